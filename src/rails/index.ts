/**
 * @module What Rack / Rails / Doorkeeper read from a request, as one entry for the pipeline (and the
 * admin API and `explain`, which name buckets the same way): the request's params, token and method,
 * whether its body can hold them, and the facts `when:` and `per:` rules read.
 */
export {
  readParamsNow,
  readParamsPeeking,
  readRequestParams,
  type MessageHead,
  type ReadParams,
  type RequestParams,
} from './read-params.js';
export {
  compileWantedParams,
  doorkeeperHeaderToken,
  duplicatedHeader,
  METHOD_PARAM,
  NO_QUERY,
  OVERRIDABLE_METHODS,
  QueryParams,
  resolveMethodOverride,
  TOKEN_PARAMS,
  type WantedParams,
} from './request-params.js';
export { bodyKindOf } from './body-peek.js';
export { RequestFacts, whenFails, whenQueryNames, type BodyParams } from './rule-facts.js';
