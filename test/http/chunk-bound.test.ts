import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chunkBoundMessage, FREE_CHUNKS, MIN_AVERAGE_CHUNK, tooFragmented } from '../../src/http/chunk-bound.js';

describe('the bound on a body’s chunks by its bytes', () => {
  it('lets any body have its first chunks, then asks each further chunk for the average on the whole', () => {
    expect(tooFragmented(FREE_CHUNKS + 1, FREE_CHUNKS + 1)).toBe(false); // one-byte chunks: 1025 bytes ≥ 1 × 64
    expect(tooFragmented(FREE_CHUNKS + 100, FREE_CHUNKS + 100)).toBe(true);
    expect(tooFragmented(100_000, 100_000 * MIN_AVERAGE_CHUNK)).toBe(false);
    expect(tooFragmented(100_000, (100_000 - FREE_CHUNKS) * MIN_AVERAGE_CHUNK - 1)).toBe(true);
  });
});

describe('a node:http server with the chunk-bound message', () => {
  let server: http.Server;
  let port: number;
  let cuts = 0;
  const received: number[] = [];
  beforeAll(async () => {
    server = http.createServer({ IncomingMessage: chunkBoundMessage(() => cuts++) }, (req, res) => {
      let bytes = 0;
      req.on('data', (d: Buffer) => (bytes += d.length));
      req.on('end', () => {
        received.push(bytes);
        res.end(String(bytes));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  /** Sends a chunked POST of `count` chunks of `size` bytes; the answer's text, or 'closed' when none came. */
  function send(count: number, size: number): Promise<string> {
    const frame = Buffer.from(`${size.toString(16)}\r\n${'x'.repeat(size)}\r\n`);
    const wire = Buffer.concat([
      Buffer.from('POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n'),
      ...Array.from({ length: count }, () => frame),
      Buffer.from('0\r\n\r\n'),
    ]);
    return new Promise((resolve) => {
      let text = '';
      const s = net.connect(port, '127.0.0.1', () => s.end(wire));
      s.on('data', (d) => (text += d.toString()));
      s.on('error', () => undefined);
      s.on('close', () => resolve(text === '' ? 'closed' : text.slice(text.indexOf('\r\n\r\n') + 4)));
    });
  }

  it('reads a body of many chunks of 64 bytes whole, and closes the connection of one sent a byte a chunk', async () => {
    expect(await send(5000, MIN_AVERAGE_CHUNK)).toBe(String(5000 * MIN_AVERAGE_CHUNK));
    expect(await send(FREE_CHUNKS, 1)).toBe(String(FREE_CHUNKS));
    expect(cuts).toBe(0);
    expect(await send(60_000, 1)).toBe('closed');
    expect(cuts).toBe(1);
    // The server still reads the next body.
    expect(await send(10, 1000)).toBe('10000');
    expect(received).toEqual([5000 * MIN_AVERAGE_CHUNK, FREE_CHUNKS, 10_000]);
  });
});
