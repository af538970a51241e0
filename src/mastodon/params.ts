/**
 * @module The built-in upstream's request reader: query, forms, multipart and JSON into one Rack
 * parameter tree (the tree itself is rails/rack-params.ts, shared with the gateway; the value readers are
 * param-values.ts).
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import busboy from 'busboy';
import { mergeParams, pairsToHash, parseUrlEncoded, fromJson, type ParamHash } from '../rails/rack-params.js';
import { onBody } from '../http/message.js';
import { HttpError } from './reply.js';
import { failOnLimits, multipartParser, stopMultipart } from './multipart-parser.js';

export {
  assign,
  fromJson,
  isHash,
  MAX_DEPTH,
  MAX_PARAMS,
  mergeParams,
  newHash,
  pairsToHash,
  ParamError,
  parseKey,
  parseUrlEncoded,
  type ParamHash,
  type ParamScalar,
  type ParamValue,
} from '../rails/rack-params.js';
export { getBool, getHash, getInt, getPresent, getString, getStringArray, toBool } from './param-values.js';

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
const DEFAULT_MAX_FILES = 4;

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
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > max) {
        stop();
        req.pause();
        reject(tooLarge('Request body', max));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      stop();
      resolve(Buffer.concat(chunks, size));
    };
    const onAbort = (): void => {
      stop();
      reject(new HttpError(400, 'Request body was not received in full'));
    };
    const stop = onBody(req, onData, onEnd, onAbort);
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
  const parser = multipartParser(req, maxField, maxFile, maxFiles);
  if (parser instanceof HttpError) return Promise.reject(parser);
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
      process.nextTick(() => stopMultipart(req, parser, open, onReqError, onReqClose));
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
    takeFileParts(parser, opts, maxFile, { files, pending, open, settled: () => settled }, fail);
    failOnLimits(parser, maxFiles, fail);
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

/** Each file part to `onFile` (its result kept unless the part was cut at its limit), or read and dropped. */
function takeFileParts<T>(
  parser: busboy.Busboy,
  opts: ParseOptions<T>,
  maxFile: number,
  read: { files: Map<string, T>; pending: Array<Promise<void>>; open: Set<Readable>; settled: () => boolean },
  fail: (err: HttpError) => void,
): void {
  const { files, pending, open } = read;
  parser.on('file', (name, stream, info) => {
    stream.on('limit', () => fail(tooLarge('File', maxFile)));
    if (opts.onFile === undefined || read.settled()) {
      stream.resume();
      return;
    }
    open.add(stream);
    stream.once('close', () => open.delete(stream));
    const job = opts.onFile({ field: name, filename: info.filename, mimeType: info.mimeType, stream }).then(
      (result) => {
        if (stream.truncated !== true) files.set(name, result);
      },
      (err: unknown) => fail(err instanceof HttpError ? err : new HttpError(400, 'Could not read file part')),
    );
    pending.push(job);
  });
}
