/**
 * @module Holding the first bytes of a request body to read its parameters (a token, `_method`,
 * `param:` rules), then handing the body on unchanged: the held bytes, then the rest as it streams.
 */
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { fromJson, ParamError, type ParamHash } from './rack-params.js';
import { startMultipartPeek, type MultipartPeek } from './multipart-peek.js';
import { ReplayBody } from './replay-body.js';
import { HeldBytes } from './held-bytes.js';
import { declaresBody, onBody } from '../http/message.js';
import { formValues, valuesOf, type WantedParams } from './request-params.js';

/** How Rails reads a body, from its Content-Type (and method: Rack reads a typeless POST as a form). */
export type BodyKind = 'form' | 'multipart' | 'json' | 'opaque';

/**
 * The media type as Rack (split on `[;,]`) and Rails (`^([^,;]*)`) read it: everything before
 * the first `;` or `,`, trimmed and lower-cased. Security: `application/json, x` is JSON to both.
 */
export function mediaTypeOf(contentType: string): string {
  let end = 0;
  while (end < contentType.length) {
    const c = contentType.charCodeAt(end);
    if (c === 0x3b /* ; */ || c === 0x2c /* , */) break;
    end++;
  }
  return (end === contentType.length ? contentType : contentType.slice(0, end)).trim().toLowerCase();
}

/** Rack::Request's FORM_DATA and PARSEABLE_DATA media types, and the JSON types Rails parses (a superset: reading more is safe, less is not). */
export function bodyKindOf(method: string, contentType: string | undefined): BodyKind {
  if (contentType === undefined) return method === 'POST' ? 'form' : 'opaque';
  const type = mediaTypeOf(contentType);
  if (type === 'application/x-www-form-urlencoded') return 'form';
  if (type === 'multipart/form-data' || type === 'multipart/related' || type === 'multipart/mixed') return 'multipart';
  if (
    type === 'application/json' ||
    type === 'text/x-json' ||
    type === 'application/jsonrequest' ||
    type.endsWith('+json')
  )
    return 'json';
  // Also a typeless-looking '' (Content-Type: with no value): Rack's media_type is nil for it.
  if (type === '') return method === 'POST' ? 'form' : 'opaque';
  return 'opaque';
}

export type BodyPeek =
  /** No body, or one Rails reads no parameters from: `body` is the request itself, untouched. */
  | { readonly kind: 'opaque'; readonly body: Readable }
  /**
   * Read: `values` holds the wanted names present (by name as written), `form` whether Rack's
   * `req.POST` reads this body (only then does `_method` count). `body` replays every byte: hand it to
   * the upstream request instead of `req`. For multipart it keeps watching the rest and fails with
   * ParamBeyondPeekError if a wanted field follows the first file part.
   */
  | {
      readonly kind: 'read';
      readonly values: ReadonlyMap<string, string>;
      readonly form: boolean;
      readonly body: Readable;
    }
  /** A wanted parameter may lie past the bound: answer 400 with `message`; never forward it. */
  | { readonly kind: 'beyond'; readonly message: string }
  /** A body Rails would refuse, or one that did not arrive: answer `status` with `message`. */
  | { readonly kind: 'malformed'; readonly status: 400 | 413; readonly message: string };

export interface PeekOptions {
  readonly wanted: WantedParams;
  /** `server.paramPeekBytes`. */
  readonly maxBytes: number;
}

export { ParamBeyondPeekError } from './replay-body.js';

export function beyondMessage(maxBytes: number, multipart: boolean): string {
  return multipart
    ? `Request body not accepted: put access_token, bearer_token, _method and other counted fields before the first file part, within the first ${maxBytes} bytes`
    : `Request body too large to read its parameters (over ${maxBytes} bytes); send the access token in the Authorization header`;
}

/**
 * Peeks at `req`'s body. Call before anything else reads `req`. Never rejects. Memory: at most
 * `maxBytes` plus one socket chunk is held, copied into one buffer whatever the chunking; the rest of
 * the body is never buffered.
 */
export function peekBody(req: IncomingMessage, opts: PeekOptions): Promise<BodyPeek> {
  const kind = bodyKindOf(req.method ?? 'GET', req.headers['content-type']);
  if (kind === 'opaque' || !declaresBody(req)) return Promise.resolve({ kind: 'opaque', body: req });
  if (kind === 'multipart') return peekMultipart(req, opts);
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > opts.maxBytes) {
    return Promise.resolve({ kind: 'beyond', message: beyondMessage(opts.maxBytes, false) });
  }
  return readAll(req, opts.maxBytes).then((read): BodyPeek => {
    if (read === 'aborted') return ABORTED;
    if (read === 'over') return { kind: 'beyond', message: beyondMessage(opts.maxBytes, false) };
    return readBodyBytes(kind, read, opts);
  });
}

/**
 * Reads a whole body's parameters as the peek does: a socket's bytes once held, or a body given whole
 * (`explain`, `replay`). A multipart body is read only as it streams (peekBody): given whole, it is
 * refused here rather than read another way.
 */
export function readBodyBytes(kind: BodyKind, bytes: Buffer, opts: PeekOptions): BodyPeek {
  if (kind === 'opaque') return { kind: 'opaque', body: replayOf(bytes) };
  if (bytes.length > opts.maxBytes)
    return { kind: 'beyond', message: beyondMessage(opts.maxBytes, kind === 'multipart') };
  if (kind === 'multipart')
    return {
      kind: 'malformed',
      status: 400,
      message: 'A multipart body given whole is not read (send it to the gateway)',
    };
  const text = bytes.toString('utf8');
  try {
    if (kind === 'form') {
      const values = formValues(text, opts.wanted);
      if (values === 'ambiguous') {
        return {
          kind: 'malformed',
          status: 400,
          message: 'Bad request: the body reads differently split on "&" and on ";"; encode ";" as %3B',
        };
      }
      return { kind: 'read', values, form: true, body: replayOf(bytes) };
    }
    const tree = jsonTree(text);
    if (tree === 'invalid') return { kind: 'malformed', status: 400, message: 'Invalid JSON in request body' };
    return {
      kind: 'read',
      values: tree === null ? new Map() : valuesOf(tree, opts.wanted),
      form: false,
      body: replayOf(bytes),
    };
  } catch (err) {
    if (err instanceof ParamError) return { kind: 'malformed', status: err.status, message: err.message };
    throw err;
  }
}

/** A JSON body's parameter tree; null when it names none (blank, or a top-level array or scalar: Rails puts those under `_json`). */
function jsonTree(text: string): ParamHash | null | 'invalid' {
  if (text.trim() === '') return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return 'invalid';
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
  return fromJson(parsed);
}

const ABORTED: BodyPeek = Object.freeze({
  kind: 'malformed',
  status: 400,
  message: 'Request body was not received in full',
});

/** A whole body read by the peek, to forward: one chunk. */
function replayOf(read: Buffer): Readable {
  return Readable.from([read], { objectMode: false });
}

/** The whole body if it fits in `max` bytes; 'over' (reading stopped, `req` paused) if not. */
function readAll(req: IncomingMessage, max: number): Promise<Buffer | 'over' | 'aborted'> {
  return new Promise((resolve) => {
    const held = new HeldBytes(max);
    const done = (r: Buffer | 'over' | 'aborted'): void => {
      stop();
      resolve(r);
    };
    const onData = (chunk: Buffer): void => {
      if (held.length + chunk.length > max) {
        req.pause();
        done('over');
      } else held.append(chunk);
    };
    const stop = onBody(
      req,
      onData,
      () => done(held.bytes()),
      () => done('aborted'),
    );
  });
}

/**
 * Multipart: fields are read up to the first file part (within `maxBytes`); the body then streams
 * on through the same parser, which refuses a wanted field arriving after the file.
 */
function peekMultipart(req: IncomingMessage, opts: PeekOptions): Promise<BodyPeek> {
  let watch: MultipartPeek;
  try {
    watch = startMultipartPeek(req.headers, opts.wanted, opts.maxBytes);
  } catch (err) {
    return Promise.resolve({
      kind: 'malformed',
      status: 400,
      message: `Malformed multipart body: ${(err as Error).message}`,
    });
  }
  return new Promise((resolve) => {
    const held = new HeldBytes(opts.maxBytes);
    let settled = false;
    const finish = (r: BodyPeek): void => {
      if (settled) return;
      settled = true;
      stop();
      if (r.kind !== 'read') watch.dispose();
      resolve(r);
    };
    const settle = (ended: boolean): void => {
      const state = watch.state();
      if (state.kind === 'beyond') return finish({ kind: 'beyond', message: beyondMessage(opts.maxBytes, true) });
      if (state.kind === 'malformed')
        return finish({ kind: 'malformed', status: state.status, message: state.message });
      if (state.kind === 'head') {
        if (!ended && held.length <= opts.maxBytes) return; // keep reading
        if (!ended) return finish({ kind: 'beyond', message: beyondMessage(opts.maxBytes, true) });
      }
      // Past the first file part, or the whole body read: the fields are known.
      const values = watch.values();
      if (values === null) return finish({ kind: 'malformed', status: 400, message: watch.error() });
      finish({ kind: 'read', values, form: true, body: new ReplayBody([held.bytes()], ended ? null : req, watch) });
    };
    // 'end' may come while the last chunk is still in the parser (a paused stream still ends).
    let inParser = false;
    let endPending = false;
    const onData = (chunk: Buffer): void => {
      held.append(chunk);
      // One chunk at a time through the parser, so its verdict on each is known before the next.
      req.pause();
      inParser = true;
      watch.write(chunk, () => {
        inParser = false;
        if (settled) return;
        if (endPending) onEnd();
        else if (watch.state().kind !== 'head' || held.length > opts.maxBytes) settle(false);
        else req.resume();
      });
    };
    const onEnd = (): void => {
      if (inParser) {
        endPending = true;
        return;
      }
      watch.end();
      settle(true);
    };
    const stop = onBody(req, onData, onEnd, () => finish(ABORTED));
  });
}
