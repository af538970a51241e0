/** @module Large uploads stream through the built-in upstream without being held in memory. */
import http from 'node:http';
import v8 from 'node:v8';
import vm from 'node:vm';
import { beforeAll, describe, expect, it } from 'vitest';
import { startUpstream, type RunningUpstream } from '../../src/mastodon/index.js';
import { newUser, png } from './support.js';

const MiB = 1024 * 1024;
const FILE_BYTES = 40 * MiB;
const CHUNK = Buffer.alloc(64 * 1024);
const BOUNDARY = 'rategate-streaming-test';

/**
 * A full GC before each sample, so the figures show live memory rather than garbage not yet
 * collected: buffering the upload would keep it live, streaming leaves only garbage.
 */
function collector(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed !== undefined) return exposed;
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as unknown;
  return typeof gc === 'function' ? (gc as () => void) : () => undefined;
}

interface Upload {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Bytes the client had handed to its socket when the answer came. */
  sent: number;
}

/**
 * Sends a multipart body with one `file` part of `size` bytes (PNG header, then zeros), written from
 * one reused chunk so the client itself allocates nothing per megabyte. Stops writing once answered.
 */
function streamUpload(url: string, token: string, size: number, chunked = false): Promise<Upload> {
  const head = Buffer.from(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.png"\r\n` +
      'Content-Type: application/octet-stream\r\n\r\n',
  );
  const tail = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
  const first = Buffer.from(png(1920, 1080));
  return new Promise<Upload>((resolve, reject) => {
    let sent = 0;
    let answered = false;
    const req = http.request(new URL('/api/v1/media', url), {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
        ...(chunked ? {} : { 'content-length': String(head.length + size + tail.length) }),
      },
    });
    req.on('response', (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          sent,
        }),
      );
    });
    // Once the server has answered and closed, writes may fail; that is the server refusing the rest.
    req.on('error', (err) => (answered ? undefined : reject(err)));
    req.write(head);
    req.write(first);
    sent = first.length;
    const pump = (): void => {
      while (!answered && sent < size) {
        const n = Math.min(CHUNK.length, size - sent);
        sent += n;
        if (!req.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n))) {
          req.once('drain', pump);
          return;
        }
      }
      if (!answered && sent >= size) req.end(tail);
    };
    pump();
  });
}

describe('media uploads stream through without being held in memory', () => {
  let upstream: RunningUpstream;
  let token = '';

  beforeAll(async () => {
    upstream = await startUpstream({ port: 0, maxUploadBytes: 64 * MiB });
    token = (await newUser(upstream.url)).token;
    return () => upstream.close();
  });

  it('takes a 40 MB upload while live memory grows by far less than the file', async () => {
    const gc = collector();
    // A first upload pays the one-off costs (compiled code, allocator arenas, socket buffers)
    // before the baseline, so what is measured next is what a bigger file adds.
    expect((await streamUpload(upstream.url, token, FILE_BYTES)).status).toBe(200);
    gc();
    const base = process.memoryUsage();
    let peakBuffers = 0;
    let peakRss = 0;
    let samples = 0;
    const sample = (): void => {
      samples += 1;
      gc();
      const now = process.memoryUsage();
      peakBuffers = Math.max(peakBuffers, now.arrayBuffers - base.arrayBuffers);
      peakRss = Math.max(peakRss, now.rss - base.rss);
    };
    const timer = setInterval(sample, 15);
    let result: Upload;
    try {
      result = await streamUpload(upstream.url, token, FILE_BYTES);
    } finally {
      clearInterval(timer);
    }
    sample();

    expect(result.status).toBe(200);
    const media = JSON.parse(result.body) as { type: string; meta: { original: { width: number } } };
    expect(media.type).toBe('image');
    expect(media.meta.original.width).toBe(1920);
    expect(result.sent).toBe(FILE_BYTES);
    // The sampler shares the event loop with the server, so it must have run during the upload.
    expect(samples).toBeGreaterThan(3);
    // Lenient bounds: buffering would show the whole 40 MB; streaming shows a few socket chunks.
    expect(peakBuffers).toBeLessThan(FILE_BYTES / 2);
    expect(peakRss).toBeLessThan(FILE_BYTES / 2);
  });

  it('sees memory that is held live, so the figures above would catch a buffered upload', () => {
    const gc = collector();
    gc();
    const before = process.memoryUsage();
    const held = Buffer.alloc(FILE_BYTES, 1);
    gc();
    const after = process.memoryUsage();
    // Within 1 MiB: the collection between the two samples may also free unrelated small buffers.
    expect(after.arrayBuffers - before.arrayBuffers).toBeGreaterThanOrEqual(FILE_BYTES - MiB);
    expect(after.rss - before.rss).toBeGreaterThan(FILE_BYTES / 2);
    expect(held[FILE_BYTES - 1]).toBe(1);
  });

  it('answers 413 past the limit and stops reading the rest of the upload', async () => {
    const small = await startUpstream({ port: 0, maxUploadBytes: 2 * MiB });
    try {
      const user = await newUser(small.url);
      // Chunked, so no declared length gives it away: the cut must come from counting the stream.
      const result = await streamUpload(small.url, user.token, 1024 * MiB, true);
      expect(result.status).toBe(413);
      expect(JSON.parse(result.body)).toEqual({ error: 'File is too large (maximum is 2 MB)' });
      // The answer came long before the gigabyte was sent, and the connection is not kept for more.
      expect(result.sent).toBeLessThan(64 * MiB);
      expect(result.headers.connection).toBe('close');
      const next = await fetch(`${small.url}/api/v1/accounts/verify_credentials`, {
        headers: { authorization: `Bearer ${user.token}` },
      });
      expect(next.status).toBe(200);
    } finally {
      await small.close();
    }
  });
});
