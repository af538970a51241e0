/**
 * @module A multipart body read as it streams, part by part as Rack reads it: the fields before the
 * first file part, and a watch on the rest that refuses a counted field arriving after it.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { pairsToHash, ParamError, parseKey, rack2Path } from './rack-params.js';
import { valuesOf, type WantedParams } from './request-params.js';
import { strictBoundary } from './multipart-names.js';
import { PartSplitter } from './multipart-split.js';
import { candidateNames, rack2Reading, rack3Reading, type PartReading } from './rack-part-head.js';

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
  /** Feeds the parser; `processed` runs once it has seen the chunk (fields before it read). */
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

/** The top-level keys a name could be filed under: Rack 3's and Rack 2's nesting. */
function topsOf(name: string): string[] {
  return [parseKey(name)?.[0] ?? name, rack2Path(name)?.[0] ?? name];
}

/** The same part as both Racks read it: one field name, or not a field for either. */
function agreed(a: PartReading, b: PartReading): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind === 'error' || b.kind === 'error') return true;
  const pa = rack2Path(a.name);
  const pb = parseKey(b.name);
  return (
    a.name === b.name &&
    pa !== undefined &&
    pb !== undefined &&
    pa.length === pb.length &&
    pa.every((s, i) => s === pb[i])
  );
}

/**
 * Throws when the headers are not a multipart form with one plain boundary. Rack parses
 * multipart/related and multipart/mixed like form-data, so those are read as form-data too.
 */
export function startMultipartPeek(
  headers: IncomingHttpHeaders,
  wanted: WantedParams,
  maxBytes: number,
): MultipartPeek {
  const boundary = strictBoundary(headers['content-type'] ?? '');
  if (boundary === null) throw new Error('the boundary is missing, repeated or unusual');
  const reader = new PartReader(wanted, maxBytes);
  const splitter = new PartSplitter(boundary, reader, maxBytes);

  let disposed = false;
  return {
    write(chunk, processed) {
      if (!disposed) splitter.write(chunk);
      // Asynchronous, as a stream parser's callback: the caller's flow does not depend on the timing.
      process.nextTick(processed);
    },
    end() {
      if (disposed) return;
      splitter.end();
      if (reader.state === HEAD || reader.state === TAIL) reader.state = DONE;
    },
    state: () => reader.state,
    values: () => reader.values(),
    error: () => reader.why,
    dispose() {
      disposed = true;
    },
  };
}

/** The splitter's events: which parts are read as fields, and when the peek gives up. */
class PartReader {
  state: MultipartState = HEAD;
  why = '';
  private readonly pairs: Array<[string, string]> = [];
  private pending: string | null = null;

  constructor(
    private readonly wanted: WantedParams,
    private readonly maxBytes: number,
  ) {}

  private counted(name: string): boolean {
    return topsOf(name).some((t) => this.wanted.tops.has(t));
  }

  private refuse(next: MultipartState, message: string): false {
    if (this.state.kind !== 'beyond' && this.state.kind !== 'malformed') {
      this.state = next;
      this.why = message;
    }
    return false;
  }

  head(head: string): boolean {
    if (this.state.kind === 'beyond' || this.state.kind === 'malformed') return false;
    const r2 = rack2Reading(head);
    const r3 = rack3Reading(head);
    const names = [r2, r3].flatMap((r) => (r.kind === 'error' ? [] : [r.name]));
    const counted = (name: string): boolean => this.counted(name);
    const mentions = names.some(counted) || candidateNames(head).some(counted);
    const field = r2.kind === 'field' && r3.kind === 'field' && agreed(r2, r3) ? r2.name : null;
    const fileLike = r2.kind !== 'field' || r3.kind !== 'field';
    if (mentions) {
      // Security: a counted name is read only where both Racks read the same field by it.
      if (this.state === TAIL)
        return this.refuse(BEYOND, 'a counted multipart field comes after a file part; send it before the first file');
      if (field === null || !counted(field)) {
        const message =
          fileLike && field === null && agreed(r2, r3)
            ? 'Malformed multipart body: a counted field is sent as a file'
            : 'Malformed multipart body: a part names a counted field in a way Rack versions read differently';
        return this.refuse({ kind: 'malformed', status: 400, message }, message);
      }
    }
    if (fileLike) {
      if (this.state === HEAD) this.state = TAIL;
      return false;
    }
    if (this.state !== HEAD || field === null) return false;
    this.pending = field;
    return true;
  }

  field(body: Buffer, truncated: boolean): void {
    const name = this.pending!;
    this.pending = null;
    if (this.state !== HEAD) return;
    if (truncated && this.counted(name)) {
      this.refuse(
        BEYOND,
        `the multipart field ${JSON.stringify(name.slice(0, 64))} is longer than ${this.maxBytes} bytes`,
      );
      return;
    }
    this.pairs.push([name, body.toString('utf8')]);
  }

  malformed(reason: string): void {
    this.refuse(
      { kind: 'malformed', status: 400, message: `Malformed multipart body: ${reason}` },
      `Malformed multipart body: ${reason}`,
    );
  }

  values(): Map<string, string> | null {
    try {
      return valuesOf(pairsToHash(this.pairs), this.wanted);
    } catch (err) {
      if (!(err instanceof ParamError)) throw err;
      this.why = err.message;
      return null;
    }
  }
}
