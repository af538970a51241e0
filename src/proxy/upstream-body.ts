/**
 * @module The request body as handed to undici: counted against the route's limit, its errors passed
 * on, and small chunks coalesced so that memory per connection is bounded in bytes, not chunk count.
 */
import { RategateError } from '../errors.js';
import { Transform, type Readable, type TransformCallback } from 'node:stream';

export class BodyTooLargeError extends RategateError {
  readonly code = 'BODY_TOO_LARGE';
}

/** Chunks smaller than this are copied into a batch; larger ones pass through as they are. */
const SMALL_CHUNK = 4 * 1024;
/** A batch is sent once it holds this much, or when the chunks that arrived together are done. */
const BATCH_BYTES = 16 * 1024;

/** Who forwards the body: told of its failure and of its last byte from the client. */
export interface BodyOwner {
  /** The body failed (the client hung up, too large, too slow, a refused field). */
  bodyFailed(err: Error): void;
  /** The client has sent the whole body (it may still wait in the buffers). */
  bodyReceived(): void;
}

/**
 * Wraps `source` for undici. Security: the source's errors (a client that hangs up, a refused
 * multipart field) reach undici, which fails the exchange once; `pipe` does not pass them on, and an
 * 'error' nobody listens to ends the process. `owner` hears every error of the stream from its first
 * moment: while the request waits for an upstream connection, undici does not listen to it yet (issue
 * 27: a client hanging up then, or a chunked body passing its limit, ended the process). `max` bytes
 * at most (Infinity: a declared length was checked before).
 *
 * Memory: a client may send a body as one-byte chunks (a chunked body of 60,000 chunks is 360 kB on the
 * wire). Handed on one by one, each is a Buffer and one or two socket writes upstream, each with its
 * own bookkeeping (hundreds of bytes), held while the upstream is slower than the client. Batched here,
 * what waits is at most two batches' bytes, and the buffers of this stream are bounded in bytes too
 * (writable side 1 kB, readable side 32 kB): the source is paused past them.
 */
export function upstreamBody(source: Readable, max: number, owner: BodyOwner): Readable {
  const body = new UpstreamBody(max, owner);
  body.on('error', toOwner);
  source.once('error', (err) => body.destroy(err));
  return source.pipe(body);
}

/** The one 'error' listener of every body (no closure per request): the emitter knows its owner. */
function toOwner(this: UpstreamBody, err: Error): void {
  this.owner.bodyFailed(err);
}

class UpstreamBody extends Transform {
  private seen = 0;
  private batch: Buffer | null = null;
  private used = 0;
  private flushQueued = false;
  private readonly flushLater = (): void => {
    this.flushQueued = false;
    if (!this.destroyed) this.flushBatch();
  };

  constructor(
    private readonly max: number,
    readonly owner: BodyOwner,
  ) {
    super({ writableHighWaterMark: 1024, readableHighWaterMark: 2 * BATCH_BYTES });
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.max) return done(new BodyTooLargeError(`request body over ${this.max} bytes`));
    if (chunk.length >= SMALL_CHUNK) {
      this.flushBatch();
      this.push(chunk);
      return done();
    }
    if (this.batch === null) this.batch = Buffer.allocUnsafeSlow(BATCH_BYTES);
    if (this.used + chunk.length > BATCH_BYTES) {
      this.flushBatch();
      this.batch = Buffer.allocUnsafeSlow(BATCH_BYTES);
    }
    chunk.copy(this.batch!, this.used);
    this.used += chunk.length;
    if (this.used === BATCH_BYTES) this.flushBatch();
    else if (!this.flushQueued) {
      // Chunks parsed from one socket read arrive in one go: send them together once they are in.
      this.flushQueued = true;
      setImmediate(this.flushLater);
    }
    done();
  }

  override _flush(done: TransformCallback): void {
    this.flushBatch();
    this.owner.bodyReceived();
    done();
  }

  private flushBatch(): void {
    if (this.batch === null || this.used === 0) return;
    const out = this.used === BATCH_BYTES ? this.batch : this.batch.subarray(0, this.used);
    this.batch = null;
    this.used = 0;
    this.push(out);
  }
}
