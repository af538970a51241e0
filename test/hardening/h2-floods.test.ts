/**
 * The HTTP/2 edge bounded as the HTTP/1.1 edge is, each attack sent as raw frames on a real socket
 * (h2c with prior knowledge): streams past the per-connection bound, a header list past
 * server.maxHeaderSize, rapid reset (CVE-2023-44487), a CONTINUATION flood, SETTINGS and PING floods
 * from a client that never reads, a body in one-byte DATA frames, and a slow body on one stream beside a
 * fast one. Each is refused or its connection closed, and the gateway answers HTTP/2 and HTTP/1.1 after.
 */
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { eventually, pause } from '../support/eventually.js';
import { FLAG, FRAME, frame, getFields, headerBlock, headersFrames, rawH2, type RawH2 } from '../support/h2-frames.js';
import { MAX_CONCURRENT_STREAMS, RESET_BURST } from '../../src/http/h2.js';
import { scaledMs } from '../support/speed.js';

const { NGHTTP2_REFUSED_STREAM, NGHTTP2_ENHANCE_YOUR_CALM, NGHTTP2_CANCEL } = http2.constants;

let upstream: RecordingUpstream;
let gw: TestGateway;
const held: Array<() => void> = [];

beforeAll(async () => {
  upstream = await startRecordingUpstream();
  // An upstream that answers when the test lets it: streams stay open meanwhile.
  upstream.route('/api/v1/held', (_req, res) => held.push(() => res.writeHead(200).end('ok')));
  gw = await startTestGateway(
    `limits:\n  - { name: per-ip, match: /api/*, per: ip, limit: 100000, period: 1h }\nserver:\n  minBodyRate: 1kB\n  minBodyRateGrace: 1s\n  maxUpstreamConnectionsPerIp: 0\n`,
    { upstream: upstream.url },
  );
});
afterAll(async () => {
  for (const release of held.splice(0)) release();
  await gw?.shutdown(200);
  await upstream?.close();
});

/** The gateway still answers: a new HTTP/2 connection and an HTTP/1.1 request. */
async function answersAfter(): Promise<void> {
  const session = http2.connect(gw.url);
  try {
    const status = await new Promise<number>((resolve, reject) => {
      const req = session.request({ ':path': '/api/v1/statuses/1' });
      req.on('response', (h) => resolve(Number(h[':status'])));
      req.on('error', reject);
      req.resume();
    });
    expect(status).toBe(200);
  } finally {
    session.close();
  }
  expect((await fetch(`${gw.url}/api/v1/statuses/2`)).status).toBe(200);
}

const closedWithin = (c: RawH2, ms: number): Promise<boolean> =>
  Promise.race([c.closed.then(() => true), pause(ms).then(() => false)]);

describe('the HTTP/2 edge under attack', () => {
  it(`refuses streams past ${MAX_CONCURRENT_STREAMS} open on one connection`, async () => {
    const c = await rawH2(gw.url);
    const before = held.length;
    const frames: Buffer[] = [];
    for (let i = 0; i < MAX_CONCURRENT_STREAMS + 50; i++)
      frames.push(headersFrames(1 + 2 * i, headerBlock(getFields('/api/v1/held')), true));
    c.send(Buffer.concat(frames));
    await eventually(() => c.resets().filter((code) => code === NGHTTP2_REFUSED_STREAM).length, {
      what: 'the streams refused',
      until: (n) => n >= 50,
    });
    // The first hundred reached the upstream and wait there; none of the others did.
    await eventually(() => held.length - before, {
      what: 'the streams admitted',
      until: (n) => n === MAX_CONCURRENT_STREAMS,
    });
    for (const release of held.splice(0)) release();
    c.socket.destroy();
    await answersAfter();
  });

  it('answers 431 to a stream whose header list is past server.maxHeaderSize, as HTTP/1.1 does', async () => {
    const c = await rawH2(gw.url);
    const big: Array<readonly [string, string]> = [];
    for (let i = 0; i < 4; i++) big.push([`x-big-${i}`, 'a'.repeat(6_000)]);
    const seenBefore = upstream.seen.length;
    c.send(headersFrames(1, headerBlock(getFields('/api/v1/statuses/3', big)), true));
    // node:http2 answers it before the request exists: its :status is a literal the encoder leaves plain.
    const head = await eventually(() => c.frames.find((f) => f.type === FRAME.HEADERS && f.streamId === 1), {
      what: 'the answer',
      until: (f) => f !== undefined,
    });
    expect(head!.payload.includes('431')).toBe(true);
    expect(upstream.seen.length).toBe(seenBefore);
    c.socket.destroy();
    await answersAfter();
  });

  it(`closes a connection that resets streams as fast as it opens them (rapid reset), past a burst of ${RESET_BURST}`, async () => {
    const c = await rawH2(gw.url);
    const frames: Buffer[] = [];
    const rst = Buffer.alloc(4);
    rst.writeUInt32BE(NGHTTP2_CANCEL);
    for (let i = 0; i < 2_000; i++) {
      frames.push(
        headersFrames(1 + 2 * i, headerBlock(getFields('/api/v1/held')), true),
        frame(FRAME.RST_STREAM, 0, 1 + 2 * i, rst),
      );
    }
    for (let i = 0; i < frames.length; i += 200) c.send(Buffer.concat(frames.slice(i, i + 200)));
    expect(await closedWithin(c, 10_000)).toBe(true);
    expect(c.goaway()).toBe(NGHTTP2_ENHANCE_YOUR_CALM);
    const metric = await gw.metrics.registry.getSingleMetricAsString('rategate_http2_closed_total');
    expect(metric).toMatch(/rategate_http2_closed_total\{reason="rapid_reset"\} [1-9]/);
    for (const release of held.splice(0)) release();
    await answersAfter();
  });

  it('closes a connection that sends CONTINUATION frames without end', async () => {
    const c = await rawH2(gw.url);
    c.send(frame(FRAME.HEADERS, 0, 1, headerBlock(getFields('/api/v1/statuses/4'))));
    const one = frame(FRAME.CONTINUATION, 0, 1, headerBlock([['x-a', 'b']]));
    const empty = frame(FRAME.CONTINUATION, 0, 1);
    for (let i = 0; i < 50 && !c.socket.destroyed; i++)
      c.send(Buffer.concat(new Array<Buffer>(200).fill(i % 2 === 0 ? one : empty)));
    expect(await closedWithin(c, 10_000)).toBe(true);
    await answersAfter();
  });

  let floods = 0;
  for (const [name, flood] of [
    ['SETTINGS', frame(FRAME.SETTINGS, 0, 0)],
    ['PING', frame(FRAME.PING, 0, 0, Buffer.alloc(8))],
  ] as const) {
    it(`bounds a ${name} flood from a client that never reads its acknowledgements`, async () => {
      const c = await rawH2(gw.url);
      c.socket.pause();
      const rssBefore = process.memoryUsage().rss;
      const batch = Buffer.concat(new Array<Buffer>(1_000).fill(flood));
      for (let i = 0; i < 200 && !c.socket.destroyed; i++) {
        if (!c.send(batch)) await Promise.race([new Promise((r) => c.socket.once('drain', r)), c.closed, pause(200)]);
      }
      // Closed by the gateway's bound on control frames, long before the flood's end.
      await eventually(() => gw.metrics.registry.getSingleMetricAsString('rategate_http2_closed_total'), {
        what: 'the connection closed for its flood',
        until: (m) => m.includes(`reason="control_flood"} ${floods + 1}`),
      });
      floods++;
      c.socket.resume();
      expect(await closedWithin(c, 5_000)).toBe(true);
      expect(process.memoryUsage().rss - rssBefore).toBeLessThan(150 * 1024 * 1024);
      c.socket.destroy();
      await answersAfter();
    });
  }

  it('closes a connection whose body comes in one-byte DATA frames', async () => {
    const c = await rawH2(gw.url);
    c.send(
      headersFrames(
        1,
        headerBlock([
          [':method', 'POST'],
          [':scheme', 'http'],
          [':authority', 'gw.test'],
          [':path', '/api/v1/statuses'],
        ]),
        false,
      ),
    );
    const one = frame(FRAME.DATA, 0, 1, Buffer.from('x'));
    const before = Number(
      / (\d+)$/.exec(await gw.metrics.registry.getSingleMetricAsString('rategate_fragmented_bodies_total'))?.[1] ?? 0,
    );
    for (let i = 0; i < 20 && !c.socket.destroyed; i++) {
      c.send(Buffer.concat(new Array<Buffer>(1_000).fill(one)));
      // Keep the flow-control window open, as a client that means it would.
      const update = Buffer.alloc(4);
      update.writeUInt32BE(1_000);
      c.send(frame(FRAME.WINDOW_UPDATE, 0, 0, update));
      await pause(5);
    }
    expect(await closedWithin(c, 10_000)).toBe(true);
    const after = Number(
      / (\d+)$/.exec(await gw.metrics.registry.getSingleMetricAsString('rategate_fragmented_bodies_total'))?.[1] ?? 0,
    );
    expect(after).toBeGreaterThan(before);
    await answersAfter();
  });

  it(
    'answers 408 to a stream whose body trickles, while a fast stream on the same connection completes',
    async () => {
      const session = http2.connect(gw.url);
      try {
        const slow = session.request({ ':method': 'POST', ':path': '/api/v1/statuses', 'content-length': '100000' });
        const slowStatus = new Promise<number>((resolve) => {
          slow.on('response', (h) => resolve(Number(h[':status'])));
          slow.on('error', () => resolve(-1));
          slow.on('close', () => resolve(-1));
        });
        slow.resume();
        const trickle = setInterval(() => !slow.destroyed && slow.write('x'), 200);
        // A fast upload on the same connection meanwhile: its bytes are not the slow stream's.
        const fast = session.request({
          ':method': 'POST',
          ':path': '/api/v1/statuses',
          'content-length': String(200_000),
        });
        const fastStatus = new Promise<number>((resolve) => fast.on('response', (h) => resolve(Number(h[':status']))));
        fast.resume();
        for (let i = 0; i < 20; i++) {
          fast.write(Buffer.alloc(10_000));
          await pause(100);
        }
        fast.end();
        expect(await fastStatus).toBe(200);
        expect(await slowStatus).toBe(408);
        clearInterval(trickle);
      } finally {
        session.destroy();
      }
      await answersAfter();
    },
    scaledMs(20_000),
  );

  it('sends the flood tests’ frames as the protocol has them (the writer itself)', () => {
    const f = frame(FRAME.PING, FLAG.ACK, 0, Buffer.alloc(8));
    expect(f.length).toBe(17);
    expect([f[3], f[4]]).toEqual([FRAME.PING, FLAG.ACK]);
  });
});
