/**
 * @module A multipart body split into parts as it streams, by the rules every Rack and busboy agree
 * on, refusing what they could split differently: the gateway reads part heads and field values
 * itself, so that no part can carry a name the upstream reads and the gateway does not.
 */

/** Longest header block of one part; a longer one is refused (Rack bounds it too). */
export const MAX_HEAD = 16 * 1024;

export interface SplitEvents {
  /** A part's head (latin1, up to and including its last header line's CRLF). True: collect its body. */
  head(head: string): boolean;
  /** A collected part's body, whole or cut at the bound (`truncated`), once the part ends. */
  field(body: Buffer, truncated: boolean): void;
  /** The body cannot be split one way only: refuse it. Called once; nothing follows. */
  malformed(reason: string): void;
}

const HEAD_END = Buffer.from('\r\n\r\n');

type Phase = 'preamble' | 'head' | 'body' | 'epilogue' | 'failed';

/**
 * Security: Rack 2.2 ends a part at `--boundary` even without the CRLF before it, Rack 3 and busboy
 * only after `\r\n`; Rack 2 reads the preamble and the line after a closing delimiter line by line, so
 * a `--boundary--junk` line lets it go on to more parts that others never see; an empty head makes
 * Rack swallow the next part. So a `--boundary` that Rack 2 would take for a delimiter must be one for
 * all (at the start or after CRLF), none may fall in the preamble, a head or after the close, and a
 * part's head must not be empty. Such bodies are never sent by a form; they are refused.
 */
export class PartSplitter {
  private readonly dash: Buffer;
  /** Unread bytes are store[from, to): one growing buffer, so tiny chunks cost no re-copying. */
  private store: Buffer = Buffer.alloc(0);
  private from = 0;
  private to = 0;
  private phase: Phase = 'preamble';
  /** The stream's first byte is in `buf` (a delimiter at offset 0 needs no CRLF before it). */
  private atStart = true;
  private collecting = false;
  private collected: Buffer[] = [];
  private collectedSize = 0;
  private truncated = false;

  constructor(
    boundary: string,
    private readonly events: SplitEvents,
    /** Longest field body collected; a longer one is cut there (the caller refuses it when it counts). */
    private readonly maxField: number,
  ) {
    this.dash = Buffer.from(`--${boundary}`, 'latin1');
  }

  get failed(): boolean {
    return this.phase === 'failed';
  }

  write(chunk: Buffer): void {
    if (this.phase === 'failed') return;
    this.append(chunk);
    this.run(false);
  }

  end(): void {
    if (this.phase === 'failed') return;
    this.run(true);
    const phase = this.phase as Phase; // run() may have changed it
    if (phase !== 'epilogue' && phase !== 'failed') this.fail('the body ends before its closing boundary');
  }

  private fail(reason: string): void {
    this.phase = 'failed';
    this.store = Buffer.alloc(0);
    this.from = this.to = 0;
    this.collected = [];
    this.events.malformed(reason);
  }

  /** Whether `dash` at `at` is preceded as a delimiter must be (stream start, or CRLF). */
  private delimiterStart(at: number): boolean {
    return at === 0 ? this.atStart : at >= 2 && this.buf[at - 2] === 0x0d && this.buf[at - 1] === 0x0a;
  }

  private run(ended: boolean): void {
    for (;;) {
      const phase = this.phase;
      if (phase === 'failed') return;
      if (phase === 'epilogue') {
        if (this.buf.indexOf(this.dash) !== -1) return this.fail('the boundary occurs after the closing boundary');
        this.keep(this.dash.length - 1);
        return;
      }
      if (phase === 'head') {
        if (this.buf.length >= 2 && this.buf[0] === 0x0d && this.buf[1] === 0x0a)
          return this.fail('a part has no headers');
        const end = this.buf.indexOf(HEAD_END);
        const limit = end === -1 ? this.buf.length : end;
        const inside = this.buf.indexOf(this.dash);
        if (inside !== -1 && inside < limit) return this.fail('the boundary occurs inside a part header');
        if (end === -1) {
          if (this.buf.length > MAX_HEAD) return this.fail('a part header is too long');
          return;
        }
        if (end > MAX_HEAD) return this.fail('a part header is too long');
        const head = this.buf.toString('latin1', 0, end + 2);
        this.consume(end + 4);
        this.atStart = false;
        this.phase = 'body';
        this.collecting = this.events.head(head);
        this.collected = [];
        this.collectedSize = 0;
        this.truncated = false;
        continue;
      }
      // preamble or body: look for the next `--boundary` that any Rack would take for a delimiter.
      const found = this.nextDelimiter(phase, ended);
      if (found === 'wait' || found === 'failed') return;
      const { at, close } = found;
      const after = at + this.dash.length;
      if (phase === 'preamble' && close) return this.fail('the body starts with its closing boundary');
      let skip = after + 2;
      if (phase === 'body') {
        this.take(at - 2); // the CRLF before the delimiter is the delimiter's
        this.finishPart();
        skip = 2 + this.dash.length + 2;
      }
      this.consume(skip);
      this.atStart = false;
      this.phase = close ? 'epilogue' : 'head';
    }
  }

  /**
   * The next delimiter in `buf`, or 'wait' (bytes before a possible one passed on), or 'failed'.
   * `--boundary` followed by CRLF or `--` ends a part for Rack 2.2 wherever it is; Rack 3 and busboy
   * need the CRLF before it too: without it the readings differ, so the body is refused. Followed by
   * anything else it is content to every Rack (in a part's body); in the preamble, which Rack reads
   * line by line (`--boundary ` with a trailing space starts the parts there), any is refused.
   */
  private nextDelimiter(phase: Phase, ended: boolean): { at: number; close: boolean } | 'wait' | 'failed' {
    const buf = this.buf;
    for (let from = 0; ;) {
      const at = buf.indexOf(this.dash, from);
      if (at === -1) {
        this.take(Math.max(0, buf.length - (this.dash.length + 3)));
        return 'wait';
      }
      const after = at + this.dash.length;
      if (buf.length < after + 2) {
        if (!ended) {
          this.take(Math.max(0, at - 2));
          return 'wait';
        }
        this.fail('the body ends inside a boundary');
        return 'failed';
      }
      const close = buf[after] === 0x2d && buf[after + 1] === 0x2d;
      const next = buf[after] === 0x0d && buf[after + 1] === 0x0a;
      if (close || next) {
        if (this.delimiterStart(at)) return { at, close };
        this.fail('the boundary occurs inside a part without the line break before it');
        return 'failed';
      }
      if (phase === 'preamble') {
        this.fail('the boundary occurs in the preamble not as a delimiter line');
        return 'failed';
      }
      from = at + 1;
    }
  }

  /** Passes on (collects or drops) the first `n` bytes of `buf`. */
  private take(n: number): void {
    if (n <= 0) return;
    if (this.phase === 'body' && this.collecting) {
      const room = this.maxField - this.collectedSize;
      if (n > room) this.truncated = true;
      if (room > 0) {
        const piece = this.buf.subarray(0, Math.min(n, room));
        this.collected.push(Buffer.from(piece));
        this.collectedSize += piece.length;
      }
    }
    this.consume(n);
    this.atStart = false;
  }

  private get buf(): Buffer {
    return this.store.subarray(this.from, this.to);
  }

  private append(chunk: Buffer): void {
    const live = this.to - this.from;
    if (this.to + chunk.length > this.store.length) {
      if (live + chunk.length <= this.store.length) this.store.copyWithin(0, this.from, this.to);
      else {
        const grown = Buffer.allocUnsafe(Math.max(live + chunk.length, this.store.length * 2, 4096));
        this.store.copy(grown, 0, this.from, this.to);
        this.store = grown;
      }
      this.from = 0;
      this.to = live;
    }
    chunk.copy(this.store, this.to);
    this.to += chunk.length;
  }

  private consume(n: number): void {
    this.from += n;
    if (this.from < this.to) return;
    this.from = this.to = 0;
    // A big chunk once must not keep a big buffer for the rest of a long upload.
    if (this.store.length > 256 * 1024) this.store = Buffer.alloc(0);
  }

  private keep(n: number): void {
    this.take(this.buf.length - n);
  }

  private finishPart(): void {
    if (!this.collecting) return;
    this.collecting = false;
    const body = this.collected.length === 1 ? this.collected[0] : Buffer.concat(this.collected);
    this.collected = [];
    this.events.field(body ?? Buffer.alloc(0), this.truncated);
  }
}
