/**
 * @module The lines of the logs replay reads, streamed: files or `-` (standard input), each plain or
 * gzip (told by its first two bytes, not its name: rotated logs are often renamed), one after another.
 * Concatenated gzip members (`cat a.gz b.gz`) are read through.
 */
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { createGunzip } from 'node:zlib';

/** A line is cut after this many characters (it is then a bad line): no access log has lines near it. */
export const MAX_LINE = 64 * 1024;

/** A batch of lines of one source, in order; `first` is the line number of lines[0] (from 1). */
export interface LineBatch {
  readonly source: string;
  readonly first: number;
  readonly lines: string[];
  /** Bytes read from the source so far (compressed bytes for a gzip file). */
  readonly bytes: number;
}

/** The chunks of `input`, gunzipped when its first bytes are gzip's magic. */
async function* decoded(input: Readable, onBytes: (n: number) => void): AsyncGenerator<Buffer> {
  const it = input[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const first = await it.next();
  if (first.done === true) return;
  const head = first.value;
  const rest = async function* (): AsyncGenerator<Buffer> {
    onBytes(head.length);
    yield head;
    for (let r = await it.next(); r.done !== true; r = await it.next()) {
      onBytes(r.value.length);
      yield r.value;
    }
  };
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b)
    yield* Readable.from(rest()).pipe(createGunzip()) as AsyncIterable<Buffer>;
  else yield* rest();
}

/** The lines of each source in turn, in batches (one per chunk read); a trailing '\r' is dropped. */
export async function* logLines(
  sources: readonly string[],
  stdin: Readable = process.stdin,
): AsyncGenerator<LineBatch> {
  for (const source of sources) {
    const input = source === '-' ? stdin : createReadStream(source, { highWaterMark: 1 << 20 });
    const decoder = new StringDecoder('utf8');
    let bytes = 0;
    let carry = '';
    let lineNo = 1;
    let overlong = false;
    for await (const chunk of decoded(input, (n) => (bytes += n))) {
      let text = decoder.write(chunk);
      if (overlong) {
        // The rest of a line past MAX_LINE is dropped up to its end: a file with no newline is not held.
        const nl = text.indexOf('\n');
        if (nl < 0) continue;
        text = text.slice(nl);
        overlong = false;
      }
      const lines = (carry + text).split('\n');
      carry = lines.pop()!;
      if (carry.length > MAX_LINE) {
        carry = carry.slice(0, MAX_LINE);
        overlong = true;
      }
      if (lines.length === 0) continue;
      for (let i = 0; i < lines.length; i++) if (lines[i]!.endsWith('\r')) lines[i] = lines[i]!.slice(0, -1);
      yield { source, first: lineNo, lines, bytes };
      lineNo += lines.length;
    }
    const last = carry + decoder.end();
    if (last !== '') yield { source, first: lineNo, lines: [last.endsWith('\r') ? last.slice(0, -1) : last], bytes };
  }
}
