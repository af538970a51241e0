/**
 * @module One call for the request pipeline: the token Doorkeeper will use, the method Rails will
 * route, and the `param:` values of a request, from its query string and (when asked) its body.
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { GATEWAY_ERRORS, paramConflictMessage } from '../http/errors.js';
import { firstHeader } from '../http/message.js';
import { peekBody } from './body-peek.js';
import {
  doorkeeperToken,
  METHOD_PARAM,
  NO_VALUES,
  pickParam,
  queryValues,
  resolveMethodOverride,
  type ParamPick,
  type ParamValues,
  type TokenPick,
  type WantedParams,
} from './request-params.js';

export interface ReadParamsOptions {
  /** Compiled once per snapshot: TOKEN_PARAMS, METHOD_PARAM and every `param:` name of the table. */
  readonly wanted: WantedParams;
  /** `server.paramPeekBytes`. */
  readonly maxBytes: number;
  /**
   * Whether the body may decide anything for this request: a matched rule needs the account and the
   * request has no bearer header, or it is a POST (an override may change the rules that match), or a
   * matched rule reads a `param:`. When false the body is not touched.
   */
  readonly readBody: boolean;
}

export interface RequestParams {
  /** The method to match rules with (Rack's override applied). */
  readonly method: string;
  /** Remove X-HTTP-Method-Override before forwarding. */
  readonly dropOverrideHeader: boolean;
  readonly token: Exclude<TokenPick, { kind: 'conflict' }>;
  /** A wanted name's value from the query and the body together. */
  param(name: string): ParamPick;
  /** Every wanted name's value in the body alone (`when.query` reads the body's too). */
  readonly bodyValues: ParamValues;
  /** Forward this instead of `req` (the held bytes, then the rest); null: forward `req` itself. */
  readonly body: Readable | null;
}

export type ReadParams =
  | { readonly ok: true; readonly params: RequestParams }
  /** Answer `status` with `{"error": message}` and close the connection (the body was not read). */
  | { readonly ok: false; readonly status: 400 | 413; readonly message: string };

class Params implements RequestParams {
  constructor(
    readonly method: string,
    readonly dropOverrideHeader: boolean,
    readonly token: Exclude<TokenPick, { kind: 'conflict' }>,
    private readonly query: ParamValues,
    readonly bodyValues: ParamValues,
    readonly body: Readable | null,
  ) {}

  param(name: string): ParamPick {
    return pickParam(name, this.query, this.bodyValues);
  }
}

/**
 * Reads what Rails will read. Without a query string and with `readBody` false it allocates almost
 * nothing and does not await (the plain-GET hot path): the result is then returned synchronously.
 */
export function readRequestParams(req: IncomingMessage, rawQuery: string, opts: ReadParamsOptions): ReadParams | Promise<ReadParams> {
  const query = rawQuery.length === 0 ? NO_VALUES : queryValues(rawQuery, opts.wanted);
  if (query === null) return { ok: false, status: 400, message: GATEWAY_ERRORS.QUERY_CONFLICT.message };
  if (!opts.readBody) return finish(req, query, NO_VALUES, false, null);
  return peekBody(req, opts).then((peek): ReadParams => {
    if (peek.kind === 'beyond') return { ok: false, status: 400, message: peek.message };
    if (peek.kind === 'malformed') return { ok: false, status: peek.status, message: peek.message };
    if (peek.kind === 'opaque') return finish(req, query, NO_VALUES, false, null);
    return finish(req, query, peek.values, peek.form, peek.body);
  });
}

function finish(req: IncomingMessage, query: ParamValues, body: ParamValues, form: boolean, forward: Readable | null): ReadParams {
  const original = req.method ?? 'GET';
  const override = resolveMethodOverride(original, firstHeader(req.headers['x-http-method-override']), form ? body.get(METHOD_PARAM) : undefined);
  const token = doorkeeperToken(req.headers.authorization, query, body);
  if (token.kind === 'conflict') {
    return { ok: false, status: 400, message: paramConflictMessage(token.param) };
  }
  return { ok: true, params: new Params(override.method, override.dropHeader, token, query, body, forward) };
}
