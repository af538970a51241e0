/** The request body as undici gets it: limit, errors passed on, small chunks batched (issue 18). */
import { PassThrough, Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { BodyTooLargeError, upstreamBody, type BodyOwner } from '../../src/proxy/upstream-body.js';
import { HeldBytes } from '../../src/rails/held-bytes.js';

/** The chunks as pushed ('data' events: an async iterator would join what is buffered). */
function collect(r: Readable): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const out: Buffer[] = [];
    r.on('data', (c: Buffer) => out.push(c));
    r.on('end', () => resolve(out));
    r.on('error', reject);
  });
}

/** The owner every body gets at creation, when the test listens by other means. */
const ignore: BodyOwner = { bodyFailed: () => undefined, bodyReceived: () => undefined };

describe('upstreamBody', () => {
  it('passes every byte in order, batching one-byte chunks into few large ones', async () => {
    const src = new PassThrough();
    const body = upstreamBody(src, Infinity, ignore);
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
    const chunks = await collect(
      upstreamBody(Readable.from([Buffer.from('ab'), big, Buffer.from('c')], { objectMode: false }), Infinity, ignore),
    );
    expect(chunks.some((c) => c === big)).toBe(true);
    expect(Buffer.concat(chunks).toString('latin1')).toBe(`ab${big.toString('latin1')}c`);
  });

  it('fails with BodyTooLargeError past the limit', async () => {
    const body = upstreamBody(
      Readable.from([Buffer.alloc(600), Buffer.alloc(600)], { objectMode: false }),
      1000,
      ignore,
    );
    await expect(collect(body)).rejects.toBeInstanceOf(BodyTooLargeError);
  });

  it('passes the source’s error on (pipe does not), so nothing is left unhandled', async () => {
    const src = new PassThrough();
    const body = upstreamBody(src, Infinity, ignore);
    const got = collect(body);
    src.write('x');
    src.destroy(new Error('client hung up'));
    await expect(got).rejects.toThrow('client hung up');
  });
});

describe('upstreamBody tells its owner from the first moment (issue 27)', () => {
  it('hands a failing source and a body over its limit to the owner, nothing else listening', async () => {
    const heard: string[] = [];
    const owner: BodyOwner = {
      bodyFailed: (err) => heard.push((err as { code?: string }).code ?? err.message),
      bodyReceived: () => heard.push('received'),
    };
    const src = new PassThrough();
    upstreamBody(src, Infinity, owner);
    src.destroy(new Error('client hung up'));
    const over = new PassThrough();
    upstreamBody(over, 10, owner);
    over.write(Buffer.alloc(64));
    // No 'error' without a listener: an unhandled one would fail this run.
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(heard.sort()).toEqual(['BODY_TOO_LARGE', 'client hung up']);
  });

  it('tells the owner once the whole body has come from the source, before anyone reads it', async () => {
    let received = 0;
    const src = new PassThrough();
    const body = upstreamBody(src, Infinity, { bodyFailed: () => undefined, bodyReceived: () => received++ });
    src.end('status=hi');
    await new Promise((resolve) => setImmediate(resolve));
    expect(received).toBe(1);
    expect(Buffer.concat(await collect(body)).toString()).toBe('status=hi');
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
