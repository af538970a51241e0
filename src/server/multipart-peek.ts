/**
 * @module A multipart body seen through busboy as it streams: the fields before the first file part,
 * and a watch on the rest that refuses a wanted field arriving after it.
 */
import type { IncomingHttpHeaders } from 'node:http';
import busboy from 'busboy';
import { pairsToHash, ParamError, parseKey } from '../rack-params.js';
import { valuesOf, type WantedParams } from './request-params.js';
import { candidateNames, nameParamCount, PartHeadScanner, strictBoundary } from './multipart-names.js';

export type MultipartState =
  /** Before the first file part: fields are being collected. */
  | { readonly kind: 'head' }
  /** Past the first file part: the rest streams, watched. */
  | { readonly kind: 'tail' }
  /** The parser reached the end of the form. */
  | { readonly kind: 'done' }
  /** A wanted field after the first file part, or one too long to read. */
  | { readonly kind: 'beyond' }
  | { readonly kind: 'malformed'; readonly status: 400 | 413; readonly message: string };

export interface MultipartPeek {
  /** Feeds the parser; `processed` runs once it has seen the chunk (fields before it emitted). */
  write(chunk: Buffer, processed: () => void): void;
  end(): void;
  state(): MultipartState;
  /** The wanted values among the head's fields; null when Rails would refuse them (see error()). */
  values(): Map<string, string> | null;
  /** Why the state is beyond or malformed. */
  error(): string;
  dispose(): void;
}

const HEAD: MultipartState = Object.freeze({ kind: 'head' });
const TAIL: MultipartState = Object.freeze({ kind: 'tail' });
const DONE: MultipartState = Object.freeze({ kind: 'done' });
const BEYOND: MultipartState = Object.freeze({ kind: 'beyond' });

function ignore(): void {}

/** The top-level key of a field name as Rack nests it (`user` of `user[email]`). */
function topOf(name: string | undefined): string {
  // busboy reports a part without a name (`Content-Disposition: form-data`) with an undefined name.
  if (typeof name !== 'string') return '';
  return parseKey(name)?.[0] ?? name;
}

/**
 * Throws (busboy's message) when the headers are not a multipart form with a boundary. Rack parses
 * multipart/related and multipart/mixed like form-data, so those are read as form-data too.
 */
export function startMultipartPeek(headers: IncomingHttpHeaders, wanted: WantedParams, maxBytes: number): MultipartPeek {
  const type = headers['content-type'] ?? '';
  const boundary = strictBoundary(type);
  if (boundary === null) throw new Error('the boundary is missing, repeated or unusual');
  const semi = type.indexOf(';');
  const asForm = semi === -1 ? 'multipart/form-data' : `multipart/form-data${type.slice(semi)}`;
  const parser = busboy({
    headers: { ...headers, 'content-type': asForm },
    defParamCharset: 'utf8',
    // No part or field count limits: a limit would make busboy stop reporting fields, and a wanted
    // field past it would go unseen. Field values are bounded (a longer wanted one is refused).
    limits: { fieldNameSize: 1024, fieldSize: maxBytes },
  });
  let state: MultipartState = HEAD;
  let why = '';
  const pairs: Array<[string, string]> = [];
  let disposed = false;
  /** A file part's head was seen by the raw scan (it runs ahead of busboy's events). */
  let scanPastFile = false;

  // Security: busboy reads a part's first `name=`, Rack's regex reads the last (and Rack 2 falls back
  // to Content-ID). The raw heads are checked so that no part can carry a counted name that busboy
  // does not report: ambiguous ones are refused, and after a file part any mention refuses the body.
  const scanner = new PartHeadScanner(boundary, (head) => {
    if (state.kind === 'beyond' || state.kind === 'malformed') return;
    if (head === null) {
      state = { kind: 'malformed', status: 400, message: 'Malformed multipart body: a part header is too long' };
      why = state.message;
      return;
    }
    const mentionsWanted = candidateNames(head).some((n) => wanted.tops.has(topOf(n)));
    if (mentionsWanted) {
      if (scanPastFile || state === TAIL) {
        state = BEYOND;
        why = 'a counted multipart field comes after a file part; send it before the first file';
        return;
      }
      if (nameParamCount(head) !== 1) {
        state = { kind: 'malformed', status: 400, message: 'Malformed multipart body: a part names a counted field ambiguously' };
        why = state.message;
        return;
      }
    }
    if (/(?:^|[;\s])filename\*?\s*=/i.test(head) || /(?:^|\r\n)content-type:\s*application\/octet-stream/i.test(head)) scanPastFile = true;
  });

  parser.on('field', (name: string | undefined, value: string, info: busboy.FieldInfo) => {
    if (typeof name !== 'string') return; // Rack drops a part without a name too
    const isWanted = wanted.tops.has(topOf(name));
    if (state === HEAD) {
      if (info.valueTruncated && isWanted) {
        state = BEYOND;
        why = `the multipart field ${JSON.stringify(name.slice(0, 64))} is longer than ${maxBytes} bytes`;
        return;
      }
      pairs.push([name, value]);
    } else if (state === TAIL && isWanted) {
      state = BEYOND;
      why = `the multipart field ${JSON.stringify(name.slice(0, 64))} comes after a file part; send it before the first file`;
    }
  });
  parser.on('file', (_name: string, stream: NodeJS.ReadableStream) => {
    // File contents are never held: read and dropped (the upstream gets them from the replayed body).
    // A body cut inside a file part errors this stream ('Unexpected end of file'): without a listener
    // that error would end the process (issue 18); the parser's own 'error' is what tells us.
    stream.on('error', ignore);
    stream.resume();
    if (state === HEAD) state = TAIL;
  });
  parser.on('close', () => {
    if (state === HEAD || state === TAIL) state = DONE;
  });
  parser.on('error', (err: Error) => {
    if (state.kind === 'beyond' || state.kind === 'malformed') return;
    state = { kind: 'malformed', status: 400, message: `Malformed multipart body: ${err.message}` };
    why = state.message;
  });

  return {
    write(chunk, processed) {
      if (disposed || parser.destroyed) {
        process.nextTick(processed);
        return;
      }
      scanner.write(chunk);
      try {
        parser.write(chunk, () => processed());
      } catch (err) {
        // A throw from inside the parser must not leave the caller waiting for `processed`.
        state = { kind: 'malformed', status: 400, message: `Malformed multipart body: ${(err as Error).message}` };
        why = state.message;
        process.nextTick(processed);
      }
    },
    end() {
      scanner.end();
      if (!disposed && !parser.destroyed) parser.end();
    },
    state: () => state,
    values() {
      try {
        return valuesOf(pairsToHash(pairs), wanted);
      } catch (err) {
        if (!(err instanceof ParamError)) throw err;
        why = err.message;
        return null;
      }
    },
    error: () => why,
    dispose() {
      if (disposed) return;
      disposed = true;
      parser.removeAllListeners('field');
      parser.removeAllListeners('file');
      parser.on('error', ignore);
      parser.destroy();
    },
  };
}
