/**
 * @module The bytes a body peek holds, copied into one buffer that grows by doubling: memory is
 * bounded by the bytes held, whatever the chunking (one Buffer kept per chunk cost hundreds of bytes per
 * one-byte chunk, and pinned the socket read each chunk was sliced from: issue 18).
 */

const FIRST = 4 * 1024;

export class HeldBytes {
  private buf: Buffer | null = null;
  private used = 0;

  /** `bound`: the bytes a peek means to hold; the buffer grows past it only by what it must hold. */
  constructor(private readonly bound: number) {}

  get length(): number {
    return this.used;
  }

  append(chunk: Buffer): void {
    const need = this.used + chunk.length;
    if (this.buf === null || need > this.buf.length) {
      let size = this.buf === null ? FIRST : this.buf.length * 2;
      while (size < need) size *= 2;
      size = Math.max(need, Math.min(size, this.bound));
      const next = Buffer.allocUnsafeSlow(size);
      if (this.buf !== null) this.buf.copy(next, 0, 0, this.used);
      this.buf = next;
    }
    chunk.copy(this.buf, this.used);
    this.used = need;
  }

  /** The bytes held, as one Buffer (a view, not a copy); empty when none. */
  bytes(): Buffer {
    return this.buf === null ? Buffer.alloc(0) : this.buf.subarray(0, this.used);
  }
}
