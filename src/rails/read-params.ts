/**
 * @module One call for the request pipeline: the token Doorkeeper will use, the method Rails will
 * route, and the `param:` values of a request, from its query string and (when asked) its body — a
 * socket's body peeked at, or a body given whole (`explain`, `replay`).
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { GATEWAY_ERRORS, paramConflictMessage, type GatewayErrorCode } from '../http/errors.js';
import { firstHeader } from '../http/message.js';
import { bodyKindOf, peekBody, readBodyBytes, type BodyPeek } from './body-peek.js';
import {
  doorkeeperToken,
  METHOD_PARAM,
  NO_VALUES,
  pickParam,
  queryValues,
  resolveMethodOverride,
  type ParamPick,
  type ParamValues,
  type QueryParams,
  type TokenPick,
  type WantedParams,
} from './request-params.js';

/** What of a request head the reading needs: node:http's IncomingMessage is one, so is a request `explain` describes. */
export interface MessageHead {
  readonly method?: string | undefined;
  readonly headers: IncomingHttpHeaders;
}

export interface ReadParamsOptions {
  /** Compiled once per snapshot: TOKEN_PARAMS, METHOD_PARAM and every `param:` and `when.query` name of the table. */
  readonly wanted: WantedParams;
  /** `server.paramPeekBytes`. */
  readonly maxBytes: number;
  /** Whether the body may decide anything for this request (pipeline/read-stage.ts decides). When false the body is not touched. */
  readonly readBody: boolean;
}

export interface RequestParams {
  /** The method to match rules with (Rack's override applied). */
  readonly method: string;
  /** Remove X-HTTP-Method-Override before forwarding. */
  readonly dropOverrideHeader: boolean;
  readonly token: Exclude<TokenPick, { kind: 'conflict' }>;
  /** The query string, parsed once (its tree serves every rule's lookup). */
  readonly query: QueryParams;
  /** A wanted name's value from the query and the body together. */
  param(name: string): ParamPick;
  /** Every wanted name's value in the body alone (`when.query` reads the body's too). */
  readonly bodyValues: ParamValues;
  /** Forward this instead of `req` (the held bytes, then the rest); null: forward `req` itself. */
  readonly body: Readable | null;
}

export type ReadParams =
  | { readonly ok: true; readonly params: RequestParams }
  /** Answer `status` with `{"error": message, "code": code}` and close the connection (the body was not read). */
  | { readonly ok: false; readonly status: 400 | 413; readonly code: GatewayErrorCode; readonly message: string };

class Params implements RequestParams {
  constructor(
    readonly method: string,
    readonly dropOverrideHeader: boolean,
    readonly token: Exclude<TokenPick, { kind: 'conflict' }>,
    readonly query: QueryParams,
    private readonly queryWanted: ParamValues,
    readonly bodyValues: ParamValues,
    readonly body: Readable | null,
  ) {}

  param(name: string): ParamPick {
    return pickParam(name, this.queryWanted, this.bodyValues);
  }
}

/**
 * Reads what Rails will read. `body`: the request's stream (peeked at when `readBody`), or the whole
 * body given as bytes. A value when nothing is awaited (readParamsNow), else a promise (readParamsPeeking).
 */
export function readRequestParams(
  head: MessageHead,
  query: QueryParams,
  opts: ReadParamsOptions,
  body: IncomingMessage | Buffer,
): ReadParams | Promise<ReadParams> {
  return opts.readBody && !Buffer.isBuffer(body)
    ? readParamsPeeking(head, query, opts, body)
    : readParamsNow(head, query, opts, Buffer.isBuffer(body) ? body : null);
}

/**
 * What Rails reads without waiting: the head, the query, and the body when it is given whole as bytes
 * (`bytes`; null, or `readBody` false: not read). Without a query string and with `readBody` false it
 * allocates almost nothing (the plain-GET hot path).
 */
export function readParamsNow(
  head: MessageHead,
  query: QueryParams,
  opts: ReadParamsOptions,
  bytes: Buffer | null,
): ReadParams {
  const wanted = queryValues(query, opts.wanted);
  if (wanted === null)
    return { ok: false, status: 400, code: 'QUERY_CONFLICT', message: GATEWAY_ERRORS.QUERY_CONFLICT.message };
  if (!opts.readBody || bytes === null) return finish(head, query, wanted, NO_VALUES, false, null);
  return afterPeek(
    head,
    query,
    wanted,
    readBodyBytes(bodyKindOf(head.method ?? 'GET', head.headers['content-type']), bytes, opts),
  );
}

/** What Rails reads once the first bytes of the request's body stream have been peeked at. */
export function readParamsPeeking(
  head: MessageHead,
  query: QueryParams,
  opts: ReadParamsOptions,
  body: IncomingMessage,
): Promise<ReadParams> {
  const wanted = queryValues(query, opts.wanted);
  if (wanted === null)
    return Promise.resolve({
      ok: false,
      status: 400,
      code: 'QUERY_CONFLICT',
      message: GATEWAY_ERRORS.QUERY_CONFLICT.message,
    });
  return peekBody(body, opts).then((peek) => afterPeek(head, query, wanted, peek));
}

function afterPeek(head: MessageHead, query: QueryParams, wanted: ParamValues, peek: BodyPeek): ReadParams {
  if (peek.kind === 'beyond') return { ok: false, status: 400, code: 'BAD_REQUEST', message: peek.message };
  if (peek.kind === 'malformed')
    return {
      ok: false,
      status: peek.status,
      code: peek.status === 413 ? 'PAYLOAD_TOO_LARGE' : 'BAD_REQUEST',
      message: peek.message,
    };
  if (peek.kind === 'opaque') return finish(head, query, wanted, NO_VALUES, false, null);
  return finish(head, query, wanted, peek.values, peek.form, peek.body);
}

function finish(
  head: MessageHead,
  query: QueryParams,
  wanted: ParamValues,
  body: ParamValues,
  form: boolean,
  forward: Readable | null,
): ReadParams {
  const original = head.method ?? 'GET';
  const override = resolveMethodOverride(
    original,
    firstHeader(head.headers['x-http-method-override']),
    form ? body.get(METHOD_PARAM) : undefined,
  );
  const token = doorkeeperToken(head.headers.authorization, wanted, body);
  if (token.kind === 'conflict') {
    return { ok: false, status: 400, code: 'PARAM_CONFLICT', message: paramConflictMessage(token.param) };
  }
  return { ok: true, params: new Params(override.method, override.dropHeader, token, query, wanted, body, forward) };
}
