/**
 * An `Upgrade` other than `websocket` (e.g. `h2c`, which the real `curl --http2` sends to an `http://`
 * URL) is served as an ordinary HTTP/1.1 request: the server may ignore an upgrade (RFC 9110 §7.8).
 */
import { execFile } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { capturingLogger, startTestGateway, type TestGateway } from '../support/gateway.js';

let upstream: RecordingUpstream;
let gw: TestGateway;

const TABLE = `limits:\n  - { name: api, match: /api/*, per: ip, limit: 10, period: 1h }\n`;

beforeAll(async () => {
  upstream = await startRecordingUpstream();
});
afterAll(async () => upstream.close());
afterEach(async () => gw.shutdown(200));

/** Runs the real curl; resolves with its stdout (the body, then `-w`'s trailer) and stderr (the verbose trace). */
function curl(args: string[]): Promise<{ out: string; err: string }> {
  return new Promise((resolve, reject) => {
    execFile('curl', ['-sS', '--max-time', '10', ...args], { encoding: 'utf8' }, (e, out, err) => (e ? reject(new Error(`${e.message}\n${err}`)) : resolve({ out, err })));
  });
}

describe('an Upgrade other than websocket', () => {
  it('curl --http2 against http:// is answered over HTTP/1.1, counted once, logged once', async () => {
    const { logger, lines } = capturingLogger();
    gw = await startTestGateway(TABLE, { upstream: upstream.url, logger });
    const r = await curl(['-v', '--http2', '-w', '\n%{http_code} %{http_version}', `${gw.url}/api/v1/instance`]);
    // curl really asked for h2c.
    expect(r.err).toMatch(/Upgrade: h2c/i);
    const [body, trailer] = r.out.split('\n');
    expect(trailer).toBe('200 1.1');
    expect(JSON.parse(body!)).toMatchObject({ method: 'GET', url: '/api/v1/instance' });
    expect(r.err).toMatch(/x-ratelimit-remaining: 9/i);
    // The upstream saw an ordinary request: no Upgrade, no HTTP2-Settings.
    const seen = upstream.forwarded().at(-1)!;
    expect(seen.headers.upgrade).toBeUndefined();
    expect(seen.headers['http2-settings']).toBeUndefined();
    const access = lines.filter((l) => l.msg === 'request');
    expect(access.map((l) => [l.method, l.path, l.status, l.decision])).toEqual([['GET', '/api/v1/instance', 200, 'allowed']]);
  });

  it('keeps the connection usable: two requests on it, a body with one, each counted once', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
    const two = await curl(['-v', '--http2', `${gw.url}/api/v1/a`, `${gw.url}/api/v1/b`]);
    expect(two.out).toContain('"url":"/api/v1/a"');
    expect(two.out).toContain('"url":"/api/v1/b"');
    expect(two.err).toMatch(/x-ratelimit-remaining: 8/i);
    const post = await curl(['-v', '--http2', '-d', 'status=hello', '-w', '\n%{http_code}', `${gw.url}/api/v1/statuses`]);
    expect(post.out).toContain('"bodyBytes":12');
    expect(post.err).toMatch(/x-ratelimit-remaining: 7/i);
  });

  it('an unknown upgrade on a limited route is answered 429, and the gateway still serves', async () => {
    gw = await startTestGateway(`limits:\n  - { name: api, match: /api/*, per: ip, limit: 1, period: 1h }\n`, { upstream: upstream.url });
    await curl(['--http2', `${gw.url}/api/v1/x`]);
    const limited = await curl(['--http2', '-w', '\n%{http_code}', `${gw.url}/api/v1/x`]);
    expect(limited.out.split('\n').at(-1)).toBe('429');
    expect((await fetch(`${gw.url}/other`)).status).toBe(200);
  });
});
