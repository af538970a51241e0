/**
 * @module HTTP/2's compat request and response as the HTTP/1.1 pipeline reads them (h2.ts hands them to
 * node:http2): the head rebuilt once, the body's chunks bounded, `destroyed` on the response.
 */
import type http from 'node:http';
import http2 from 'node:http2';
import { FREE_CHUNKS, tooFragmented } from './chunk-bound.js';
import { closeFor } from './h2-floods.js';

/**
 * A request as the HTTP/1.1 pipeline reads it: pseudo-headers left out, `:authority` as Host, the
 * Cookie fields an HTTP/2 client may split joined with "; " (RFC 9113 §8.2.3: what a hop to HTTP/1.1
 * must do), and a body the HEADERS frame did not end without a length declared as chunked (it is
 * counted as it streams, as a chunked HTTP/1.1 body is). Its body's chunks are bounded as chunk-bound.ts
 * bounds HTTP/1.1's, and its bytes counted for the body-rate watch (the connection's bytes are all
 * streams' bytes).
 */
export class H2Request extends http2.Http2ServerRequest {
  /** Bytes of this stream's body so far (http/body-rate.ts reads it). */
  bodyBytesRead = 0;
  private chunks = 0;
  private cut = false;

  constructor(
    stream: http2.ServerHttp2Stream,
    headers: http2.IncomingHttpHeaders,
    options: Record<string, unknown>,
    rawHeaders: readonly string[],
  ) {
    super(stream, headers, options, rawHeaders);
    const raw: string[] = [];
    let cookie: string | undefined;
    let host = false;
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const name = rawHeaders[i]!;
      if (name.charCodeAt(0) === 0x3a) continue; // ':'
      if (name === 'cookie') {
        cookie = cookie === undefined ? rawHeaders[i + 1]! : `${cookie}; ${rawHeaders[i + 1]!}`;
        continue;
      }
      if (name === 'host') host = true;
      raw.push(name, rawHeaders[i + 1]!);
    }
    const h: http.IncomingHttpHeaders = {};
    for (const name in headers) if (name.charCodeAt(0) !== 0x3a) h[name] = headers[name] as string;
    const authority = headers[':authority'];
    if (!host && typeof authority === 'string') {
      raw.unshift('host', authority);
      h.host = authority;
    }
    if (cookie !== undefined) {
      raw.push('cookie', cookie);
      h.cookie = cookie;
    }
    if (h['content-length'] === undefined && !stream.endAfterHeaders) h['transfer-encoding'] = 'chunked';
    // Own properties over the prototype's getters (which read the HTTP/2 fields): built once, read often.
    Object.defineProperty(this, 'headers', { value: h });
    Object.defineProperty(this, 'rawHeaders', { value: raw });
  }

  override push(chunk: unknown, encoding?: BufferEncoding): boolean {
    if (chunk === null) return super.push(chunk, encoding);
    if (this.cut) return false;
    this.bodyBytesRead += (chunk as Buffer).length;
    if (++this.chunks > FREE_CHUNKS && tooFragmented(this.chunks, this.bodyBytesRead)) {
      this.cut = true;
      const session = this.stream.session;
      if (session !== undefined) closeFor(session, 'fragmented_body');
      return false;
    }
    return super.push(chunk, encoding);
  }
}

/** node:http2's response, with `destroyed` (the pipeline's "the client left" test), which it lacks. */
export class H2Response extends http2.Http2ServerResponse {}
Object.defineProperty(H2Response.prototype, 'destroyed', {
  get(this: H2Response) {
    return this.stream.destroyed;
  },
});
