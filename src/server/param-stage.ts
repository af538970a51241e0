/**
 * @module The `param:` stage of the pipeline: when a matched rule keys on a request parameter, read
 * the wanted names from the query string and (through the body peek of issue 11) the body, and hand
 * decide() their values and the forwarder the body to replay. Tables without `param:` rules skip it.
 */
import type http from 'node:http';
import type { Readable } from 'node:stream';
import type { CompiledRule } from '../config/types.js';
import { continueNow } from './expect-continue.js';
import { readRequestParams } from './read-params.js';
import type { RequestPolicy } from './policy.js';
import type { BodyParams } from './rule-facts.js';

export type ParamStage =
  /** `values`: the wanted names found, by name; `body`: forward this instead of `req` (null: `req`). */
  | { readonly ok: true; readonly values: BodyParams | undefined; readonly body: Readable | null }
  /** Answer `status` with `{"error": message}`; the body was not (wholly) read. */
  | { readonly ok: false; readonly status: 400 | 413; readonly message: string };

const SKIPPED: ParamStage = Object.freeze({ ok: true, values: undefined, body: null });

function readsParam(rules: readonly CompiledRule[]): boolean {
  for (const r of rules) if (r.per === 'param') return true;
  return false;
}

/**
 * Reads the parameters the matched rules key on. `rawQuery` is the query with its `?` (or ''). A value
 * given in the query and the body with two different values, or possibly beyond the peek bound, is
 * refused (400) rather than counted against a guess. `res` (plain requests) gets its `100 Continue`
 * before the body is read, since a client that expects one sends nothing until then.
 */
export function readRuleParams(
  req: http.IncomingMessage,
  res: http.ServerResponse | undefined,
  policy: RequestPolicy,
  method: string,
  path: string,
  rawQuery: string,
): ParamStage | Promise<ParamStage> {
  const wanted = policy.paramWanted;
  if (wanted === null || !readsParam(policy.snapshot.matcher.match(method, path))) return SKIPPED;
  if (res !== undefined) continueNow(req, res);
  const read = readRequestParams(req, rawQuery.length > 0 ? rawQuery.slice(1) : '', {
    wanted,
    maxBytes: policy.snapshot.config.server.paramPeekBytes,
    readBody: true,
  });
  return read instanceof Promise ? read.then((r) => toStage(r, wanted.names)) : toStage(read, wanted.names);
}

function toStage(read: Awaited<ReturnType<typeof readRequestParams>>, names: readonly string[]): ParamStage {
  if (!read.ok) return read;
  const values = new Map<string, string>();
  for (const name of names) {
    const pick = read.params.param(name);
    if (pick.kind === 'conflict') return { ok: false, status: 400, message: `Bad request: ${name} is given twice with different values` };
    if (pick.kind === 'value') values.set(name, pick.value);
  }
  return { ok: true, values, body: read.params.body };
}
