/** The request body as undici gets it: limit, errors passed on, small chunks batched (issue 18). */
import { PassThrough, Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { BodyTooLargeError, upstreamBody } from '../../src/proxy/upstream-body.js';
import { HeldBytes } from '../../src/server/held-bytes.js';

/** The chunks as pushed ('data' events: an async iterator would join what is buffered). */
function collect(r: Readable): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const out: Buffer[] = [];
    r.on('data', (c: Buffer) => out.push(c));
    r.on('end', () => resolve(out));
    r.on('error', reject);
  });
}

describe('upstreamBody', () => {
  it('passes every byte in order, batching one-byte chunks into few large ones', async () => {
    const src = new PassThrough();
    const body = upstreamBody(src, Infinity);
    const sent = Buffer.from(Array.from({ length: 40_000 }, (_, i) => i % 251));
    const got = collect(body);
    for (let i = 0; i < sent.length; i++) src.write(sent.subarray(i, i + 1));
    src.end();
    const chunks = await got;
    expect(Buffer.concat(chunks).equals(sent)).toBe(true);
    expect(chunks.length).toBeLessThan(10);
  });

  it('passes large chunks through without copying them', async () => {
    const big = Buffer.alloc(64 * 1024, 7);
    const chunks = await collect(upstreamBody(Readable.from([Buffer.from('ab'), big, Buffer.from('c')], { objectMode: false }), Infinity));
    expect(chunks.some((c) => c === big)).toBe(true);
    expect(Buffer.concat(chunks).toString('latin1')).toBe(`ab${big.toString('latin1')}c`);
  });

  it('fails with BodyTooLargeError past the limit', async () => {
    const body = upstreamBody(Readable.from([Buffer.alloc(600), Buffer.alloc(600)], { objectMode: false }), 1000);
    await expect(collect(body)).rejects.toBeInstanceOf(BodyTooLargeError);
  });

  it('passes the source’s error on (pipe does not), so nothing is left unhandled', async () => {
    const src = new PassThrough();
    const body = upstreamBody(src, Infinity);
    const got = collect(body);
    src.write('x');
    src.destroy(new Error('client hung up'));
    await expect(got).rejects.toThrow('client hung up');
  });
});

describe('HeldBytes', () => {
  it('holds appended chunks as one buffer, growing no further than its bound needs', () => {
    const h = new HeldBytes(10_000);
    for (let i = 0; i < 10_000; i++) h.append(Buffer.from([i & 255]));
    expect(h.length).toBe(10_000);
    expect(h.bytes()[9_999]).toBe(9_999 & 255);
    expect(h.bytes().buffer.byteLength).toBeLessThanOrEqual(10_000);
    h.append(Buffer.alloc(5000));
    expect(h.length).toBe(15_000);
  });

  it('is empty before anything is appended', () => {
    expect(new HeldBytes(10).bytes().length).toBe(0);
  });
});
