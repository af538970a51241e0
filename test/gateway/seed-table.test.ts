/**
 * The seed's limit table enforced end to end: real sockets, a recording upstream, and a fake clock
 * driving the memory store so that 30-minute windows pass in no time.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../support/clock.js';
import { send, type Answer } from '../support/http.js';
import { SEED_TABLE, startTestGateway, type TestGateway, upstreamFixture } from '../support/gateway.js';

const T0 = Date.UTC(2026, 10, 21, 19, 0, 0); // on a 30-minute boundary
const upstream = upstreamFixture();
let gw: TestGateway;
let clock: FakeClock;

beforeEach(async () => {
  clock = new FakeClock(T0 + 60_000);
  gw = await startTestGateway(SEED_TABLE, { upstream: upstream.url, now: clock.now });
  upstream.seen.length = 0;
});
afterEach(async () => gw.shutdown(1000));

function req(
  method: string,
  path: string,
  ip: string,
  token?: string,
  extra: Record<string, string> = {},
): Promise<Answer> {
  return send(gw.url, {
    method,
    path,
    headers: { 'X-Forwarded-For': ip, ...(token ? { Authorization: `Bearer ${token}` } : {}), ...extra },
  });
}

describe('sign-up: 5 per 30 minutes per IP', () => {
  it('admits five sign-ups counting down, then answers 429 with the exact body and headers', async () => {
    const ip = '198.51.100.1';
    const remaining: string[] = [];
    for (let i = 0; i < 5; i++) {
      const a = await req('POST', '/api/v1/accounts', ip, 'app-1');
      expect(a.status).toBe(200);
      // sign-up (5) is closer to exhaustion than ip-access (300): its numbers are the ones shown.
      expect(a.headers['x-ratelimit-limit']).toBe('5');
      expect(a.headers['x-ratelimit-reset']).toBe('2026-11-21T19:30:00.000000Z');
      remaining.push(a.headers['x-ratelimit-remaining'] as string);
    }
    expect(remaining).toEqual(['4', '3', '2', '1', '0']);

    const limited = await req('POST', '/api/v1/accounts', ip, 'app-1');
    expect(limited.status).toBe(429);
    expect(limited.body).toBe('{"error":"Too many requests"}');
    expect(limited.headers['content-type']).toMatch(/^application\/json/);
    expect(limited.headers['x-ratelimit-limit']).toBe('5');
    expect(limited.headers['x-ratelimit-remaining']).toBe('0');
    expect(limited.headers['x-ratelimit-reset']).toBe('2026-11-21T19:30:00.000000Z');
    expect(limited.headers['retry-after']).toBe(String(29 * 60));
    expect(limited.headers['ratelimit-policy']).toBe('"sign-up";q=5;w=1800, "ip-access";q=300;w=300');
    expect(limited.headers.ratelimit).toBe('"sign-up";r=0;t=1740, "ip-access";r=295;t=240');

    // The upstream saw exactly the five admitted sign-ups.
    expect(upstream.forwarded().filter((s) => s.method === 'POST' && s.url === '/api/v1/accounts')).toHaveLength(5);
  });

  it('opens again when the 30-minute window ends, and counts per IP', async () => {
    const ip = '198.51.100.2';
    for (let i = 0; i < 5; i++) await req('POST', '/api/v1/accounts', ip, 'app-1');
    expect((await req('POST', '/api/v1/accounts', ip, 'app-1')).status).toBe(429);
    expect((await req('POST', '/api/v1/accounts', '198.51.100.3', 'app-1')).status).toBe(200);
    clock.set(T0 + 30 * 60_000);
    const again = await req('POST', '/api/v1/accounts', ip, 'app-1');
    expect(again.status).toBe(200);
    expect(again.headers['x-ratelimit-remaining']).toBe('4');
    expect(again.headers['x-ratelimit-reset']).toBe('2026-11-21T20:00:00.000000Z');
  });

  it('charges nothing for a rejected request: the IP bucket keeps its count', async () => {
    const ip = '198.51.100.4';
    for (let i = 0; i < 5; i++) await req('POST', '/api/v1/accounts', ip, 'app-1');
    for (let i = 0; i < 20; i++) expect((await req('POST', '/api/v1/accounts', ip, 'app-1')).status).toBe(429);
    const read = await req('GET', '/api/v1/statuses/1', ip);
    // 5 sign-ups + this read: 294 left in ip-access; the 20 rejected ones took nothing.
    expect(read.headers['x-ratelimit-remaining']).toBe('294');
    expect(upstream.forwarded()).toHaveLength(6);
  });
});

describe('uploading: 30 per 30 minutes per account', () => {
  it('limits each account separately, whatever IP it comes from', async () => {
    for (let i = 0; i < 30; i++) {
      const a = await req('POST', '/api/v1/media', `198.51.100.${10 + (i % 5)}`, 'user-7');
      expect(a.status).toBe(200);
    }
    const limited = await req('POST', '/api/v1/media', '198.51.100.99', 'user-7');
    expect(limited.status).toBe(429);
    expect(limited.headers['x-ratelimit-limit']).toBe('30');
    expect(limited.headers['retry-after']).toBe(String(29 * 60));
    const other = await req('POST', '/api/v1/media', '198.51.100.10', 'user-8');
    expect(other.status).toBe(200);
    expect(other.headers['x-ratelimit-remaining']).toBe('29');
  });

  it('counts an app-only token as no account (per IP only), as Mastodon does', async () => {
    const a = await req('POST', '/api/v1/media', '198.51.100.20', 'app-3');
    expect(a.status).toBe(200);
    expect(a.headers['ratelimit-policy']).toBe('"ip-access";q=300;w=300');
  });
});

describe('deletion: one bucket shared by DELETE and unreblog', () => {
  it('rejects the 31st of either route once 30 were spent across both', async () => {
    const ip = '198.51.100.30';
    for (let i = 0; i < 15; i++)
      expect((await req('DELETE', `/api/v1/statuses/${100 + i}`, ip, 'user-9')).status).toBe(200);
    for (let i = 0; i < 15; i++)
      expect((await req('POST', `/api/v1/statuses/${200 + i}/unreblog`, ip, 'user-9')).status).toBe(200);
    const a = await req('DELETE', '/api/v1/statuses/999', ip, 'user-9');
    const b = await req('POST', '/api/v1/statuses/999/unreblog', ip, 'user-9');
    expect([a.status, b.status]).toEqual([429, 429]);
    expect(a.headers['x-ratelimit-limit']).toBe('30');
    // Another account's deletions are its own.
    expect((await req('DELETE', '/api/v1/statuses/1', ip, 'user-10')).status).toBe(200);
  });

  it('does not count a reblog (only unreblog) in the deletion bucket', async () => {
    const a = await req('POST', '/api/v1/statuses/5/reblog', '198.51.100.31', 'user-11');
    expect(a.headers['ratelimit-policy']).toBe('"account-access";q=300;w=300, "ip-access";q=300;w=300');
  });
});

describe('300 per 5 minutes per account and per IP', () => {
  it('limits one account at 300 across many IPs, with the account bucket shown', async () => {
    let last: Answer | undefined;
    for (let i = 0; i < 300; i++) last = await req('GET', '/api/v1/statuses/1', `198.51.${i % 50}.7`, 'user-20');
    expect(last!.status).toBe(200);
    expect(last!.headers['x-ratelimit-remaining']).toBe('0');
    const limited = await req('GET', '/api/v1/statuses/1', '192.0.2.200', 'user-20');
    expect(limited.status).toBe(429);
    expect(limited.headers['x-ratelimit-reset']).toBe('2026-11-21T19:05:00.000000Z');
    expect(limited.headers['retry-after']).toBe('240');
  });

  it('limits one IP at 300 across anonymous requests, and other IPs are unaffected', async () => {
    const ip = '192.0.2.50';
    for (let i = 0; i < 300; i++) await req('GET', '/api/v1/statuses/1', ip);
    expect((await req('GET', '/api/v1/statuses/1', ip)).status).toBe(429);
    expect((await req('GET', '/api/v1/statuses/1', '192.0.2.51')).status).toBe(200);
    // The upstream saw exactly 300 + 1 reads.
    expect(upstream.forwarded()).toHaveLength(301);
    clock.set(T0 + 5 * 60_000);
    expect((await req('GET', '/api/v1/statuses/1', ip)).status).toBe(200);
  });

  it('shows the closest bucket: ties go to the rule listed first', async () => {
    const a = await req('GET', '/api/v1/statuses/1', '192.0.2.60', 'user-21');
    // account-access and ip-access both at 299: account-access is listed first.
    expect(a.headers['ratelimit-policy']).toBe('"account-access";q=300;w=300, "ip-access";q=300;w=300');
    expect(a.headers['x-ratelimit-remaining']).toBe('299');
    const b = await req('GET', '/api/v1/statuses/1', '192.0.2.60', 'user-22');
    // Now ip-access (298) is closer than user-22's account-access (299).
    expect(b.headers['x-ratelimit-remaining']).toBe('298');
    expect(b.headers.ratelimit).toBe('"ip-access";r=298;t=240, "account-access";r=299;t=240');
  });
});

describe('headers on every answer of a matched request', () => {
  it('adds the headers to upstream errors and replaces the upstream’s own rate-limit headers', async () => {
    upstream.route('/api/v1/broken', (_req, res) => {
      res.writeHead(503, { 'Content-Type': 'application/json', 'X-RateLimit-Limit': '1' });
      res.end('{"error":"down"}');
    });
    const a = await req('GET', '/api/v1/broken', '192.0.2.70');
    expect(a.status).toBe(503);
    expect(a.body).toBe('{"error":"down"}');
    expect(a.headers['x-ratelimit-limit']).toBe('300');
    expect(a.headers['x-ratelimit-remaining']).toBe('299');
  });

  it('adds no rate-limit headers to a request that matches no rule', async () => {
    const a = await req('POST', '/oauth/token', '192.0.2.71');
    expect(a.status).toBe(200);
    expect(a.headers['x-ratelimit-limit']).toBeUndefined();
    expect(a.headers.ratelimit).toBeUndefined();
  });
});

describe('attempts to dodge a bucket', () => {
  async function exhaustSignUp(ip: string): Promise<void> {
    for (let i = 0; i < 5; i++) expect((await req('POST', '/api/v1/accounts', ip, 'app-1')).status).toBe(200);
  }

  it.each([
    ['a doubled slash', '//api//v1//accounts'],
    ['a trailing slash', '/api/v1/accounts/'],
    ['percent-encoded letters', '/api/v1/%61ccounts'],
    ['percent-encoded lower-case escapes', '/%61%70%69/v1/accounts'],
  ])('cannot escape sign-up with %s: it is counted, and the upstream sees the normal path', async (_what, path) => {
    const ip = '192.0.2.80';
    await exhaustSignUp(ip);
    const a = await req('POST', path, ip, 'app-1');
    expect(a.status).toBe(429);
    clock.set(T0 + 30 * 60_000);
    const b = await req('POST', path, ip, 'app-1');
    expect(b.status).toBe(200);
    expect(upstream.forwarded().at(-1)!.url).toBe('/api/v1/accounts');
  });

  it.each([
    ['a dot segment', '/api/v1/./accounts'],
    ['a dot-dot segment', '/api/v1/x/../accounts'],
    ['encoded dots', '/api/v1/x/%2e%2E/accounts'],
    ['an encoded slash', '/api/v1%2Faccounts'],
    ['an encoded backslash', '/api/v1%5Caccounts'],
    ['a NUL', '/api/v1/accounts%00'],
  ])('gets 400 and reaches nothing for %s', async (_what, path) => {
    const a = await req('POST', path, '192.0.2.81', 'app-1');
    expect(a.status).toBe(400);
    expect(a.json<{ error: string }>().error).toMatch(/^Bad request path/);
    expect(upstream.forwarded()).toHaveLength(0);
  });

  it('keeps the query string as sent while matching the path', async () => {
    const a = await req('GET', '/api//v1/statuses/1/?x=%2F&y=1', '192.0.2.82');
    expect(a.status).toBe(200);
    expect(upstream.forwarded().at(-1)!.url).toBe('/api/v1/statuses/1?x=%2F&y=1');
  });
});

describe('identity from an untrusted peer', () => {
  it('ignores a spoofed X-Forwarded-For: a client cannot pick a fresh IP bucket per request', async () => {
    await gw.shutdown(1000);
    gw = await startTestGateway(`${SEED_TABLE}\nclients: { trustedProxies: [10.0.0.0/8] }\n`, {
      upstream: upstream.url,
      now: clock.now,
    });
    for (let i = 0; i < 5; i++)
      expect((await req('POST', '/api/v1/accounts', `198.18.0.${i}`, 'app-1')).status).toBe(200);
    const a = await req('POST', '/api/v1/accounts', '198.18.0.99', 'app-1');
    expect(a.status).toBe(429);
    // The upstream is told the real peer only, not the client's claim.
    expect(upstream.forwarded().at(-1)!.headers['x-forwarded-for']).toBe('127.0.0.1');
  });

  it('extends the chain of a trusted proxy for the upstream', async () => {
    await req('GET', '/api/v1/statuses/1', '192.0.2.90');
    const h = upstream.forwarded().at(-1)!.headers;
    expect(h['x-forwarded-for']).toBe('192.0.2.90, 127.0.0.1');
    expect(h['x-forwarded-proto']).toBe('http');
  });
});
