/**
 * @module The bound on a request body's chunks by its bytes: beyond its first FREE_CHUNKS chunks, a
 * body must bring MIN_AVERAGE_CHUNK bytes a chunk on average, or its connection is closed.
 *
 * Why: node:http hands each chunk of a chunked body (and each socket read of any body) to JavaScript
 * on its own: a buffer copy, a call from C++ with its tick queue run, a stream push. Measured on Node 20,
 * that is 1.4–1.6 µs a chunk with a listener that does nothing, and nothing the gateway does per chunk
 * can lower it. A one-byte chunk is 6 bytes on the wire, so 50 connections × 60,000 of them (18 MB)
 * held the event loop for seconds and every other request waited (issue 37). With this bound a body's
 * parsing costs at most FREE_CHUNKS chunks, one chunk per MIN_AVERAGE_CHUNK bytes, and the rest of the
 * socket read in which it was cut (~10k chunks of 64 kB, each skipped at once): a cost per byte.
 *
 * No HTTP client sends a body so: a browser, curl or an SDK writes chunks of kilobytes. The connection
 * is closed without an answer (whatever was being done with the body fails as when a client hangs up).
 */
import http from 'node:http';

/** Chunks any body may have whatever their size: a slow client's small reads, a typed stream. */
export const FREE_CHUNKS = 1024;
/** Average bytes each chunk beyond FREE_CHUNKS must bring. */
export const MIN_AVERAGE_CHUNK = 64;

/**
 * The IncomingMessage of the proxy listener: counts the chunks and bytes node:http pushes into each
 * request's body, the one place every body passes (peeked, forwarded, or discarded after an answer).
 * `onCut` is told of each connection closed (a metric).
 */
export function chunkBoundMessage(onCut: () => void): typeof http.IncomingMessage {
  return class ChunkBoundMessage extends http.IncomingMessage {
    private chunks = 0;
    private bytes = 0;
    private cut = false;

    override push(chunk: unknown, encoding?: BufferEncoding): boolean {
      if (chunk === null) return super.push(chunk, encoding);
      // The rest of a socket read after the cut: dropped here, not pushed into a destroyed stream
      // (which costs an error object a chunk, ~20 µs).
      if (this.cut) return false;
      this.bytes += (chunk as Buffer).length;
      if (++this.chunks > FREE_CHUNKS && tooFragmented(this.chunks, this.bytes)) {
        this.cut = true;
        onCut();
        this.socket.destroy();
        return false;
      }
      return super.push(chunk, encoding);
    }
  };
}

/** Whether `chunks` chunks of `bytes` in all break the bound (the caller has checked chunks > FREE_CHUNKS). */
export function tooFragmented(chunks: number, bytes: number): boolean {
  return bytes < (chunks - FREE_CHUNKS) * MIN_AVERAGE_CHUNK;
}
