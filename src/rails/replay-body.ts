/** @module The body handed to the upstream after a peek: the held bytes, then the rest as it streams. */
import { RategateError } from '../errors.js';
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import type { MultipartPeek } from './multipart-peek.js';

/** A wanted multipart field came after the first file part, once the body was already streaming. */
export class ParamBeyondPeekError extends RategateError {
  readonly code = 'PARAM_BEYOND_PEEK';
}

/**
 * The held bytes, then the rest of `src` with backpressure (src is paused while the consumer is
 * full). With a multipart watch each later chunk is passed on only once the parser has seen it, so a
 * refused field never completes a body upstream: the stream fails instead (ParamBeyondPeekError).
 */
export class ReplayBody extends Readable {
  private attached = false;
  /** A chunk is in the parser: src stays paused until it is passed on. */
  private inParser = false;
  /** src ended while a chunk was in the parser: end once it is passed on. */
  private endPending = false;
  private readonly onData = (chunk: Buffer): void => {
    const watch = this.watch;
    if (watch === null) {
      if (!this.push(chunk)) this.src!.pause();
      return;
    }
    this.src!.pause();
    this.inParser = true;
    watch.write(chunk, () => {
      this.inParser = false;
      if (this.destroyed) return;
      const kind = watch.state().kind;
      if (kind === 'beyond' || kind === 'malformed') return this.refuse();
      const more = this.push(chunk);
      if (this.endPending) this.onEnd();
      else if (more) this.src!.resume();
    });
  };
  private readonly onEnd = (): void => {
    if (this.inParser) {
      this.endPending = true;
      return;
    }
    if (this.watch !== null) {
      this.watch.end();
      const kind = this.watch.state().kind;
      if (kind === 'beyond' || kind === 'malformed') return this.refuse();
    }
    this.push(null);
  };
  private readonly onAbort = (): void => {
    this.destroy(new Error('Request body was not received in full'));
  };
  private readonly onClose = (): void => {
    if (!this.src!.complete) this.onAbort();
  };

  constructor(
    private held: Buffer[],
    private readonly src: IncomingMessage | null,
    private readonly watch: MultipartPeek | null,
  ) {
    super();
  }

  private refuse(): void {
    this.destroy(new ParamBeyondPeekError(this.watch?.error() || 'Request body refused'));
  }

  override _read(): void {
    while (this.held.length > 0) {
      if (!this.push(this.held.shift()!)) return;
    }
    if (this.src === null) {
      this.push(null);
      return;
    }
    if (!this.attached) {
      this.attached = true;
      this.src.on('data', this.onData);
      this.src.on('end', this.onEnd);
      this.src.on('error', this.onAbort);
      this.src.on('close', this.onClose);
    }
    if (!this.inParser) this.src.resume();
  }

  override _destroy(err: Error | null, cb: (err: Error | null) => void): void {
    this.held = [];
    if (this.src !== null) {
      this.src.off('data', this.onData);
      this.src.off('end', this.onEnd);
      this.src.off('error', this.onAbort);
      this.src.off('close', this.onClose);
    }
    this.watch?.dispose();
    cb(err);
  }
}
