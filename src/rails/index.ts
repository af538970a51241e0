/**
 * @module What Rack / Rails / Doorkeeper read from a request, as one entry for the pipeline (and the
 * admin API and `explain`, which name buckets the same way): the request's params, token and method,
 * whether its body can hold them, and the facts `when:` and `per:` rules read.
 */
export { readRequestParams, type RequestParams } from './read-params.js';
export {
  compileWantedParams,
  doorkeeperHeaderToken,
  duplicatedHeader,
  METHOD_PARAM,
  OVERRIDABLE_METHODS,
  TOKEN_PARAMS,
  type WantedParams,
} from './request-params.js';
export { bodyKindOf } from './body-peek.js';
export {
  keyValueDigest,
  normalizedKey,
  paramNames,
  RequestFacts,
  ruleValueDigest,
  valueDigest,
  whenFails,
  whenQueryNames,
  type BodyParams,
} from './rule-facts.js';
