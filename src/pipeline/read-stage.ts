/**
 * @module The stage that reads the request as Rails will see it: the method Rack's override names, the
 * token wherever Doorkeeper finds it, the `param:` values. What to read is decided from every rule that
 * may apply — limits, bans, in-flight limits, for a POST under any method its form's `_method` could
 * name (route-rules.ts) — so no later stage decides on less than another would read (issue 27 item 3).
 */
// The module's binding, not the global: globalThis.Buffer is a getter, called on every use.
import { Buffer } from 'node:buffer';
import { continueNow } from '../http/expect-continue.js';
import { declaresBody, firstHeader } from '../http/message.js';
import { GATEWAY_ERRORS, errorBody, paramConflictMessage } from '../http/errors.js';
import { NEED, needs } from '../keys/index.js';
import {
  bodyKindOf,
  doorkeeperHeaderToken,
  QueryParams,
  readParamsNow,
  readParamsPeeking,
  resolveMethodOverride,
  type ReadParams,
  type RequestParams,
} from '../rails/index.js';
import type { ScreenContext } from './context.js';
import { catalogued, refusal, type Decision } from './decision.js';
import { GO_ON, type Stage, type Verdict } from './drive.js';
import type { RequestPolicy } from './policy.js';
import type { RequestView } from './request-view.js';
import type { BodySource, Screening } from './screening.js';

/** A query Rails would refuse is refused here (400) rather than read one way by us and another by Rails. */
const BAD_QUERY: Decision = Object.freeze(catalogued('QUERY_CONFLICT'));

/**
 * Reads what Rails will read. The body is read only when it can change the decision; a socket's answer
 * then tells a client waiting on `Expect: 100-continue` to send it. No wait when nothing is to be read
 * from a stream (the usual GET); a promise while a body is peeked at.
 */
export const readStage: Stage = {
  name: 'read',
  run(ctx, s) {
    const v = s.view;
    const { req, policy } = v;
    // An X-HTTP-Method-Override a POST carries names its method before any body is read.
    if (v.method === 'POST')
      v.routeAs(resolveMethodOverride('POST', firstHeader(req.headers['x-http-method-override']), undefined).method);
    const body = s.source;
    const readBody = bodyCanDecide(v, body);
    const query = v.query.length > 1 ? new QueryParams(v.query.slice(1)) : v.queryParams;
    v.queryParams = query;
    const opts = { wanted: policy.wantedParams, maxBytes: policy.paramPeekBytes, readBody };
    if (readBody && body !== null && !Buffer.isBuffer(body)) {
      if (s.res !== undefined) continueNow(body, s.res);
      return readParamsPeeking(req, query, opts, body).then((read) => afterRead(ctx, s, read));
    }
    return afterRead(ctx, s, readParamsNow(req, query, opts, Buffer.isBuffer(body) ? body : null));
  },
};

function afterRead(ctx: ScreenContext, s: Screening, read: ReadParams): Verdict {
  if (!read.ok) return refusal(read.status, errorBody(read.code, read.message));
  const v = s.view;
  const p = read.params;
  v.token = p.token.kind === 'token' ? p.token.token : null;
  v.form = p.bodyValues;
  v.routeAs(p.method);
  // `param:` rules: their values from the query and the body together (two different ones: 400).
  const values = v.policy.paramNames.length > 0 ? ruleParamValues(p, v.policy.paramNames) : undefined;
  if (typeof values === 'string')
    return refusal(GATEWAY_ERRORS.PARAM_CONFLICT.status, errorBody('PARAM_CONFLICT', paramConflictMessage(values)));
  v.values = values;
  if (needs(v.rules.needs, NEED.query) && !v.exempt(ctx.runtimeExempt) && !v.facts().queryReadable()) return BAD_QUERY;
  s.body = p.body;
  s.dropOverrideHeader = p.dropOverrideHeader;
  return GO_ON;
}

/**
 * Whether reading the body can change this request's decision, so it is worth holding its first
 * bytes: for the union of what every rule that may apply needs — a POST form whose `_method` could
 * name other rules or another route, a `param:` rule, a `when.query` rule (a form body), or a rule on
 * the token or the account while the Authorization header carries no token (Doorkeeper then reads
 * `access_token` from the body too). Plain GETs and requests with a bearer header on
 * method-insensitive routes never pay for a peek.
 */
export function bodyCanDecide(v: RequestView, body: BodySource): boolean {
  if (body === null || (Buffer.isBuffer(body) ? body.length === 0 : !declaresBody(body))) return false;
  const { req, policy } = v;
  // A body Rails reads no parameters from (an image, octet-stream) holds neither a token nor `_method`.
  const kind = bodyKindOf(req.method ?? 'GET', req.headers['content-type']);
  if (kind === 'opaque') return false;
  // Rack::MethodOverride reads `_method` from a POST's form body (never JSON): then any method may apply.
  const form = kind !== 'json';
  const overridable = form && req.method === 'POST';
  const may = overridable ? policy.routeRules.anyMethodNeeds(v.path) | v.rules.needs : v.rules.needs;
  if (overridable && needs(may, NEED.method)) return true;
  if (needs(may, NEED.params) || (form && needs(may, NEED.form))) return true;
  return readsToken(may, policy) && doorkeeperHeaderToken(req.headers.authorization) === null;
}

/** Whether deciding reads the token: a rule keys on it, or on the account in a mode that finds the account from it. */
function readsToken(may: number, policy: RequestPolicy): boolean {
  return needs(may, NEED.token) || (needs(may, NEED.account) && policy.accountReadsToken);
}

/** The `param:` names' values, by name; the name of one given twice with different values instead. */
function ruleParamValues(p: RequestParams, names: readonly string[]): Map<string, string> | string {
  const values = new Map<string, string>();
  for (const name of names) {
    const pick = p.param(name);
    if (pick.kind === 'conflict') return name;
    if (pick.kind === 'value') values.set(name, pick.value);
  }
  return values;
}
