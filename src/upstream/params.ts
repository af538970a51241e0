/** @module The one request-parameter parser of the built-in upstream: query, forms, multipart and JSON, under Rack's rules. */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import busboy from 'busboy';
import { HttpError } from './reply.js';

export type ParamScalar = string | number | boolean | null;
export type ParamValue = ParamScalar | ParamValue[] | ParamHash;
/** Always created with a null prototype, so no key a client sends can reach `Object.prototype`. */
export interface ParamHash {
  [key: string]: ParamValue;
}

/** A multipart file part, handed to the route while the body is still arriving. */
export interface IncomingFile {
  readonly field: string;
  readonly filename: string | undefined;
  /** The part's declared type; routes that care sniff the content instead. */
  readonly mimeType: string;
  readonly stream: Readable;
}

export interface ParseOptions<T> {
  /** Cap for a non-multipart body and for each multipart text field. Default 1 MiB. */
  readonly maxBodyBytes?: number;
  /** Cap for each multipart file part. Default `maxBodyBytes`. */
  readonly maxFileBytes?: number;
  /** How many file parts a multipart body may hold. Default 4. */
  readonly maxFiles?: number;
  /**
   * Consumes one file part; must read `stream` to its end. Without it, file parts are read and dropped
   * (still under `maxFileBytes`), as Rails drops parameters a controller does not permit.
   */
  readonly onFile?: (file: IncomingFile) => Promise<T>;
}

export interface ParsedRequest<T> {
  readonly params: ParamHash;
  /** What `onFile` made of each file part, by its field name as sent (last one wins). */
  readonly files: Map<string, T>;
}

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/** Rack's default nesting limit; deeper keys are refused rather than recursed into. */
export const MAX_DEPTH = 32;
/** More pairs than any route of this API takes; refuses hash-flooding bodies cheaply. */
export const MAX_PARAMS = 1000;
const DEFAULT_MAX_FILES = 4;

/** Keys that would reach a prototype if the tree were ever copied into a plain object. */
const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** Rails' boolean casting for query and form values (MASTODON.md). */
const FALSE_STRINGS: ReadonlySet<string> = new Set(['0', 'f', 'F', 'false', 'FALSE', 'off', 'OFF']);

export function newHash(): ParamHash {
  return Object.create(null) as ParamHash;
}

export function isHash(v: ParamValue | undefined): v is ParamHash {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// ---------------------------------------------------------------------------------------------
// Keys and the tree
// ---------------------------------------------------------------------------------------------

/**
 * Splits `a[b][]` into `['a', 'b', '']`, where `''` stands for "append to an array". A key whose
 * brackets do not close is one literal name, as Rack reads it. Returns undefined for an empty name.
 */
export function parseKey(key: string): string[] | undefined {
  if (key === '') return undefined;
  // Rack does not treat a bracket in the first position as nesting.
  const open = key.indexOf('[', 1);
  if (open === -1) return [key];
  const segments = [key.slice(0, open)];
  let i = open;
  while (i < key.length) {
    if (key[i] !== '[') return [key];
    const close = key.indexOf(']', i + 1);
    if (close === -1) return [key];
    const inner = key.slice(i + 1, close);
    if (inner.includes('[')) return [key];
    segments.push(inner);
    i = close + 1;
  }
  return segments;
}

function kindOf(v: ParamValue): string {
  if (v === null) return 'Null';
  if (Array.isArray(v)) return 'Array';
  if (typeof v === 'object') return 'Hash';
  return typeof v === 'string' ? 'String' : typeof v === 'number' ? 'Number' : 'Boolean';
}

function conflict(expected: string, got: ParamValue, key: string): HttpError {
  // Rack raises ParameterTypeError here and Rails answers 400.
  return new HttpError(400, `expected ${expected} (got ${kindOf(got)}) for param \`${key}'`);
}

/** Whether `path` (hash keys, `''` for arrays) already leads to a value inside `h`. */
function hasPath(h: ParamHash, path: readonly string[]): boolean {
  const [head, ...rest] = path;
  if (head === undefined || head === '') return false;
  if (!(head in h)) return false;
  if (rest.length === 0 || rest[0] === '') return true;
  const next = h[head];
  return isHash(next) ? hasPath(next, rest) : false;
}

function build(path: readonly string[], value: ParamValue): ParamValue {
  const [head, ...rest] = path;
  if (head === undefined) return value;
  if (head === '') return [build(rest, value)];
  const h = newHash();
  h[head] = build(rest, value);
  return h;
}

/** Sets `value` at `path` inside `root` with Rack's rules; `key` is the name as sent, for errors. */
export function assign(root: ParamHash, path: readonly string[], value: ParamValue, key: string): void {
  const [head, ...rest] = path;
  if (head === undefined) return;
  if (rest.length === 0) {
    root[head] = value;
    return;
  }
  if (rest[0] === '') {
    let arr = root[head];
    if (arr === undefined) root[head] = arr = [];
    else if (!Array.isArray(arr)) throw conflict('Array', arr, key);
    const child = rest.slice(1);
    if (child.length === 0) {
      arr.push(value);
      return;
    }
    // `a[][x]=1&a[][y]=2` builds one hash; a repeated `x` starts the next one.
    const last = arr[arr.length - 1];
    if (child[0] !== '' && isHash(last) && !hasPath(last, child)) assign(last, child, value, key);
    else arr.push(build(child, value));
    return;
  }
  let sub = root[head];
  if (sub === undefined) root[head] = sub = newHash();
  else if (!isHash(sub)) throw conflict('Hash', sub, key);
  assign(sub, rest, value, key);
}

/** Builds the tree from name/value pairs in order (later scalars win, `[]` appends). */
export function pairsToHash(pairs: Iterable<readonly [string, string]>, into: ParamHash = newHash()): ParamHash {
  let count = 0;
  for (const [key, value] of pairs) {
    if (++count > MAX_PARAMS) throw new HttpError(413, `Too many parameters (maximum is ${MAX_PARAMS})`);
    const path = parseKey(key);
    if (path === undefined) continue;
    if (path.length > MAX_DEPTH) throw new HttpError(400, `Parameter nesting too deep: ${key.slice(0, 64)}`);
    // Dropped, not refused: nothing legitimate is named so, and refusing would tell a prober too much.
    if (path.some((segment) => FORBIDDEN_KEYS.has(segment))) continue;
    assign(into, path, value, key);
  }
  return into;
}

/** Parses `a=1&b[]=2` (query strings and URL-encoded bodies; `+` is a space). */
export function parseUrlEncoded(text: string, into: ParamHash = newHash()): ParamHash {
  return pairsToHash(new URLSearchParams(text), into);
}

/**
 * Turns parsed JSON into the same tree a form gives: null-prototype hashes, forbidden keys dropped,
 * nesting bounded. The top level must be an object, as every route of this API takes named params.
 */
export function fromJson(value: unknown): ParamHash {
  if (!isPlainJsonObject(value)) throw new HttpError(400, 'JSON body must be an object');
  return convertJsonObject(value, 1);
}

function isPlainJsonObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function convertJson(v: unknown, depth: number): ParamValue {
  if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
  if (depth > MAX_DEPTH) throw new HttpError(400, 'JSON body nested too deep');
  if (Array.isArray(v)) return v.map((item) => convertJson(item, depth + 1));
  if (isPlainJsonObject(v)) return convertJsonObject(v, depth);
  return null;
}

function convertJsonObject(obj: Record<string, unknown>, depth: number): ParamHash {
  if (depth > MAX_DEPTH) throw new HttpError(400, 'JSON body nested too deep');
  const out = newHash();
  // Object.keys sees an own `__proto__` that JSON.parse created; it is dropped here with the others.
  for (const key of Object.keys(obj)) {
    if (FORBIDDEN_KEYS.has(key)) continue;
    out[key] = convertJson(obj[key], depth + 1);
  }
  return out;
}

/** Body params win over query params of the same top-level name (the seed's rule). */
export function mergeParams(query: ParamHash, body: ParamHash): ParamHash {
  const out = newHash();
  for (const key of Object.keys(query)) out[key] = query[key] as ParamValue;
  for (const key of Object.keys(body)) out[key] = body[key] as ParamValue;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reading a request
// ---------------------------------------------------------------------------------------------

type BodyKind = 'json' | 'form' | 'multipart' | 'none';

function bodyKind(req: IncomingMessage): BodyKind {
  const header = req.headers['content-type'];
  if (header === undefined) return 'none';
  const type = (header.split(';', 1)[0] ?? '').trim().toLowerCase();
  if (type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))) return 'json';
  if (type === 'application/x-www-form-urlencoded') return 'form';
  if (type === 'multipart/form-data') return 'multipart';
  // Rails ignores bodies of other types; so do we (Node discards the bytes after the answer).
  return 'none';
}

function declaredLength(req: IncomingMessage): number | undefined {
  const raw = req.headers['content-length'];
  if (raw === undefined) return undefined;
  const n = Number(raw);
  return Number.isFinite(n) ? n : undefined;
}

function tooLarge(what: string, max: number): HttpError {
  // The rest of the body stays unread, so the connection cannot carry another request.
  return new HttpError(413, `${what} is too large (maximum is ${formatBytes(max)})`, true);
}

export function formatBytes(n: number): string {
  if (n >= 1024 * 1024 && n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MB`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024} KB`;
  return `${n} bytes`;
}

/** Reads a whole non-multipart body, refusing past `max` bytes without holding more than that. */
export function readBody(req: IncomingMessage, max: number): Promise<Buffer> {
  const declared = declaredLength(req);
  if (declared !== undefined && declared > max) return Promise.reject(tooLarge('Request body', max));
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > max) {
        cleanup();
        req.pause();
        reject(tooLarge('Request body', max));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (): void => {
      cleanup();
      reject(new HttpError(400, 'Request body was not received in full'));
    };
    const onClose = (): void => {
      if (!req.complete) onError();
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/**
 * Reads the query string and the body into one tree, body over query. Multipart file parts go to
 * `onFile` as streams while the body arrives, so an upload is never held in memory here.
 */
export async function parseRequest<T = never>(
  req: IncomingMessage,
  rawQuery: string,
  opts: ParseOptions<T> = {},
): Promise<ParsedRequest<T>> {
  const query = parseUrlEncoded(rawQuery);
  const maxBody = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const files = new Map<string, T>();
  switch (bodyKind(req)) {
    case 'none':
      return { params: query, files };
    case 'form': {
      const body = await readBody(req, maxBody);
      return { params: mergeParams(query, parseUrlEncoded(body.toString('utf8'))), files };
    }
    case 'json': {
      const body = await readBody(req, maxBody);
      const text = body.toString('utf8');
      if (text.trim() === '') return { params: query, files };
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (err) {
        throw new HttpError(400, `Invalid JSON in request body: ${(err as Error).message}`);
      }
      return { params: mergeParams(query, fromJson(parsed)), files };
    }
    case 'multipart': {
      const pairs: Array<[string, string]> = [];
      const parsedFiles = await readMultipart(req, opts, maxBody, pairs);
      return { params: mergeParams(query, pairsToHash(pairs)), files: parsedFiles };
    }
  }
}

function readMultipart<T>(
  req: IncomingMessage,
  opts: ParseOptions<T>,
  maxField: number,
  pairs: Array<[string, string]>,
): Promise<Map<string, T>> {
  const maxFile = opts.maxFileBytes ?? maxField;
  const maxFiles = opts.maxFiles ?? DEFAULT_MAX_FILES;
  // A generous ceiling (every file at its cap, plus room for fields): a body declared bigger cannot
  // succeed, so it is refused before a byte of it is read.
  const declared = declaredLength(req);
  if (declared !== undefined && declared > maxFile * maxFiles + maxField * 2) {
    return Promise.reject(tooLarge('Request body', maxFile * maxFiles + maxField * 2));
  }
  let bb: busboy.Busboy;
  try {
    bb = busboy({
      headers: req.headers,
      defParamCharset: 'utf8',
      limits: {
        fieldNameSize: 1024,
        fieldSize: maxField + 1,
        // Busboy flags a file that reaches its limit; one byte more lets exactly `maxFile` through.
        fileSize: maxFile + 1,
        files: maxFiles,
        fields: MAX_PARAMS,
        parts: MAX_PARAMS + maxFiles,
      },
    });
  } catch (err) {
    return Promise.reject(new HttpError(400, `Malformed multipart body: ${(err as Error).message}`));
  }
  const parser = bb;
  return new Promise<Map<string, T>>((resolve, reject) => {
    const files = new Map<string, T>();
    const pending: Array<Promise<void>> = [];
    const open = new Set<Readable>();
    let settled = false;

    const fail = (err: HttpError): void => {
      if (settled) return;
      settled = true;
      reject(err);
      // Stop reading: nothing more of the body is parsed or handed on. Deferred, because busboy
      // emits from inside its own write and touches its state after the listener returns.
      process.nextTick(() => {
        req.unpipe(parser);
        req.off('error', onReqError);
        req.off('close', onReqClose);
        for (const stream of open) stream.destroy();
        parser.removeAllListeners();
        parser.on('error', () => undefined);
        parser.destroy();
      });
    };
    const onReqError = (): void => fail(new HttpError(400, 'Request body was not received in full'));
    const onReqClose = (): void => {
      if (!req.complete) onReqError();
    };

    parser.on('field', (name, value, info) => {
      if (info.nameTruncated) return fail(new HttpError(400, 'Parameter name too long'));
      if (info.valueTruncated) return fail(tooLarge(`Parameter ${name}`, maxField));
      pairs.push([name, value]);
    });
    parser.on('file', (name, stream, info) => {
      stream.on('limit', () => fail(tooLarge('File', maxFile)));
      if (opts.onFile === undefined || settled) {
        stream.resume();
        return;
      }
      open.add(stream);
      stream.once('close', () => open.delete(stream));
      const job = opts
        .onFile({ field: name, filename: info.filename, mimeType: info.mimeType, stream })
        .then(
          (result) => {
            if (stream.truncated !== true) files.set(name, result);
          },
          (err: unknown) => fail(err instanceof HttpError ? err : new HttpError(400, 'Could not read file part')),
        );
      pending.push(job);
    });
    parser.on('fieldsLimit', () => fail(new HttpError(413, `Too many parameters (maximum is ${MAX_PARAMS})`, true)));
    parser.on('partsLimit', () => fail(new HttpError(413, 'Too many parts in multipart body', true)));
    parser.on('filesLimit', () => fail(new HttpError(413, `Too many files (maximum is ${maxFiles})`, true)));
    parser.on('error', (err) => fail(new HttpError(400, `Malformed multipart body: ${(err as Error).message}`)));
    parser.on('close', () => {
      void Promise.all(pending).then(() => {
        if (settled) return;
        settled = true;
        req.off('error', onReqError);
        req.off('close', onReqClose);
        resolve(files);
      });
    });
    req.on('error', onReqError);
    req.on('close', onReqClose);
    req.pipe(parser);
  });
}

// ---------------------------------------------------------------------------------------------
// Reading values
// ---------------------------------------------------------------------------------------------

function typeError(name: string, expected: string, got: ParamValue): HttpError {
  return new HttpError(422, `Validation failed: ${name} must be ${expected}, not ${kindOf(got).toLowerCase()}`);
}

/**
 * Rails' boolean: `0 f F false FALSE off OFF` are false, `''` is "not given", any other text is true.
 * JSON's `true`/`false` pass through, `null` is not given, and the number 0 is false.
 */
export function toBool(v: ParamValue | undefined, name = 'parameter'): boolean | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v !== 0;
  if (typeof v === 'string') {
    if (v === '') return undefined;
    return !FALSE_STRINGS.has(v);
  }
  throw typeError(name, 'a boolean', v);
}

/** A scalar as text (JSON numbers and booleans too); `null` and absence are undefined. */
export function getString(p: ParamHash, key: string, name = key): string | undefined {
  const v = p[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  throw typeError(name, 'a string', v);
}

/** Like getString, but `''` (a form field left empty) also counts as not given. */
export function getPresent(p: ParamHash, key: string, name = key): string | undefined {
  const s = getString(p, key, name);
  return s === undefined || s.trim() === '' ? undefined : s;
}

export function getBool(p: ParamHash, key: string, name = key): boolean | undefined {
  return toBool(p[key], name);
}

/** Whole numbers from text (`"300"`) or JSON numbers; anything else is a 422. */
export function getInt(p: ParamHash, key: string, name = key): number | undefined {
  const v = p[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string' && /^\s*-?\d{1,15}\s*$/.test(v)) return Number.parseInt(v, 10);
  if (typeof v === 'string' || typeof v === 'number') {
    throw new HttpError(422, `Validation failed: ${name} must be an integer`);
  }
  throw typeError(name, 'an integer', v);
}

export function getHash(p: ParamHash, key: string, name = key): ParamHash | undefined {
  const v = p[key];
  if (v === undefined || v === null) return undefined;
  if (isHash(v)) return v;
  throw typeError(name, 'a hash', v);
}

/** An array of scalars as text, from `a[]=…` or a JSON array. */
export function getStringArray(p: ParamHash, key: string, name = key): string[] | undefined {
  const v = p[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw typeError(name, 'an array', v);
  return v.map((item) => {
    if (typeof item === 'string') return item;
    if (typeof item === 'number' || typeof item === 'boolean') return String(item);
    throw typeError(`${name}[]`, 'a string', item);
  });
}
