/**
 * @module A minimal HTTP/1.1 response parser for the bench's raw-socket clients (paced.ts, million.ts):
 * status line, Content-Length or chunked bodies, pipelined responses back to back. Bodies are skipped,
 * not kept. Enough for the servers under test; not a general-purpose client.
 */

const CRLFCRLF = Buffer.from('\r\n\r\n');

export class ResponseParser {
  private buf: Buffer = Buffer.alloc(0);
  /** Body bytes still to skip for a Content-Length response, or -1 when reading a chunked body. */
  private bodyLeft = 0;
  private chunked = false;
  private inBody = false;
  private status = 0;
  private close = false;

  /** `close`: the server said `Connection: close` (it will close the socket after this response). */
  constructor(private readonly onResponse: (status: number, close: boolean) => void) {}

  push(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    for (;;) {
      if (!this.inBody) {
        const end = this.buf.indexOf(CRLFCRLF);
        if (end < 0) return;
        const head = this.buf.toString('latin1', 0, end);
        this.buf = this.buf.subarray(end + 4);
        this.status = Number(head.slice(9, 12));
        const lower = head.toLowerCase();
        const cl = /\r\ncontent-length:\s*(\d+)/.exec(lower);
        this.close = /\r\nconnection:\s*close/.test(lower);
        this.chunked = cl === null && /\r\ntransfer-encoding:[^\r]*chunked/.test(lower);
        this.bodyLeft = cl !== null ? Number(cl[1]) : 0;
        this.inBody = true;
      }
      if (this.chunked) {
        // Chunks: "<hex>[;ext]\r\n<data>\r\n" ... "0\r\n\r\n" (no trailers from the servers under test).
        const lineEnd = this.buf.indexOf('\r\n');
        if (lineEnd < 0) return;
        const size = parseInt(this.buf.toString('latin1', 0, lineEnd), 16);
        if (size === 0) {
          if (this.buf.length < lineEnd + 4) return;
          this.buf = this.buf.subarray(lineEnd + 4);
        } else {
          if (this.buf.length < lineEnd + 2 + size + 2) return;
          this.buf = this.buf.subarray(lineEnd + 2 + size + 2);
          continue;
        }
      } else {
        if (this.buf.length < this.bodyLeft) {
          this.bodyLeft -= this.buf.length;
          this.buf = Buffer.alloc(0);
          return;
        }
        this.buf = this.buf.subarray(this.bodyLeft);
        this.bodyLeft = 0;
      }
      this.inBody = false;
      this.onResponse(this.status, this.close);
    }
  }
}

/** Serializes one request with the given header lines (no body). */
export function rawRequest(method: string, path: string, host: string, headers: Record<string, string>): string {
  let s = `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\n`;
  for (const [k, v] of Object.entries(headers)) s += `${k}: ${v}\r\n`;
  return `${s}\r\n`;
}

/** Latency percentile from a sorted array (nearest rank). */
export function percentile(sorted: Float64Array | number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}
