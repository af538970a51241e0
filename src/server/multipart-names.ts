/**
 * @module The part names of a multipart body read from its raw part headers, as loosely as Rack does,
 * so that a part whose name busboy and Rack could read differently is caught.
 */

/**
 * The boundary of a multipart Content-Type, or null when it is missing or could be read two ways.
 * Security: busboy takes the first `boundary=`, Rack's regex the last and stops at `,`; a boundary that
 * is given twice or holds `,`, `;` or `"` would let the two split the body differently.
 */
export function strictBoundary(contentType: string): string | null {
  const all = [...contentType.matchAll(/boundary\s*=\s*("((?:\\.|[^"\\])*)"|[^;\s]*)/gi)];
  if (all.length !== 1) return null;
  const m = all[0]!;
  const value = m[2] ?? m[1] ?? '';
  if (!/^[0-9A-Za-z'()+_\-./:=? ]{1,70}$/.test(value) || value.endsWith(' ')) return null;
  return value;
}

/** Longest header block of one part that is read; a longer one is refused (Rack bounds it too). */
const MAX_HEAD = 16 * 1024;

/**
 * Every name a part's headers could give it: each `name=` value anywhere in the block (so also inside
 * quotes and after `file`, which errs on the side of seeing too much) and a Content-ID (Rack 2 used
 * it when a part had no name). Values are unquoted.
 */
export function candidateNames(head: string): string[] {
  const out: string[] = [];
  for (const m of head.matchAll(/name\*?\s*=\s*("((?:\\.|[^"\\])*)"?|[^;\s"]*)/gi)) out.push(m[2] ?? m[1] ?? '');
  const id = /(?:^|\r\n)content-id:\s*([^\r\n]*)/i.exec(head);
  if (id !== null) out.push(id[1]!.trim().replace(/^<|>$/g, ''));
  return out;
}

/** How many `name=` parameters (not `filename=`) a head holds: more than one is ambiguous. */
export function nameParamCount(head: string): number {
  let n = 0;
  for (const _ of head.matchAll(/(?:^|[;\s])name\*?\s*=/gi)) n++;
  return n;
}

/**
 * Finds each part's header block in a stream of chunks: after every `\r\n--boundary` (the body is read
 * as if it began with `\r\n`), up to the blank line. `onHead` gets each block as latin1 text; a block
 * over MAX_HEAD yields `null` (the caller refuses the body).
 */
export class PartHeadScanner {
  private readonly delimiter: Buffer;
  /** Bytes kept from the previous chunk: a delimiter or header end may straddle chunks. */
  private carry: Buffer;
  private inHead = false;
  private head: Buffer[] = [];
  private headSize = 0;
  /** The closing delimiter (`--boundary--`) was seen: the epilogue is nobody's part. */
  private done = false;
  private checkedClose = false;
  private prefix: number[] = [];

  constructor(
    boundary: string,
    private readonly onHead: (head: string | null) => void,
  ) {
    this.delimiter = Buffer.from(`\r\n--${boundary}`, 'latin1');
    this.carry = Buffer.from('\r\n', 'latin1');
  }

  write(chunk: Buffer): void {
    if (this.done) return;
    let buf = this.carry.length > 0 ? Buffer.concat([this.carry, chunk]) : chunk;
    this.carry = Buffer.alloc(0);
    for (;;) {
      if (this.inHead) {
        const end = buf.indexOf('\r\n\r\n', 0, 'latin1');
        if (end === -1) {
          // Keep 3 bytes back: the blank line may straddle this chunk and the next.
          const keep = Math.min(3, buf.length);
          this.pushHead(buf.subarray(0, buf.length - keep));
          if (this.done) return;
          this.carry = Buffer.from(buf.subarray(buf.length - keep));
          if (this.headSize > MAX_HEAD) this.finishHead(true);
          return;
        }
        this.pushHead(buf.subarray(0, end));
        if (this.done) return;
        this.finishHead(this.headSize > MAX_HEAD);
        buf = buf.subarray(end + 4);
        continue;
      }
      const at = buf.indexOf(this.delimiter);
      if (at === -1) {
        const keep = Math.min(this.delimiter.length - 1, buf.length);
        this.carry = Buffer.from(buf.subarray(buf.length - keep));
        return;
      }
      // The rest of the delimiter line (`--` on the last one, or padding) is part of the head block;
      // the head's first line is then that remainder, which holds no `name=` a parser would read.
      this.inHead = true;
      this.head = [];
      this.headSize = 0;
      this.checkedClose = false;
      this.prefix = [];
      buf = buf.subarray(at + this.delimiter.length);
    }
  }

  private pushHead(part: Buffer): void {
    if (part.length === 0) return;
    if (!this.checkedClose) {
      // The closing delimiter is `--boundary--`: its "head" starts with `--`.
      for (let i = 0; i < part.length && this.prefix.length < 2; i++) this.prefix.push(part[i]!);
      if (this.prefix.length === 2) {
        this.checkedClose = true;
        if (this.prefix[0] === 0x2d && this.prefix[1] === 0x2d) {
          this.done = true;
          return;
        }
      }
    }
    this.headSize += part.length;
    if (this.headSize <= MAX_HEAD) this.head.push(Buffer.from(part));
  }

  /** The body ended: a head still open (no blank line) is handed over as it is. */
  end(): void {
    if (this.done || !this.inHead) return;
    this.pushHead(this.carry);
    this.carry = Buffer.alloc(0);
    if (!this.done) this.finishHead(this.headSize > MAX_HEAD);
  }

  private finishHead(tooLong: boolean): void {
    this.inHead = false;
    const text = Buffer.concat(this.head).toString('latin1');
    this.head = [];
    this.onHead(tooLong ? null : text);
  }
}
