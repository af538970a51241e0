/**
 * The upstream's own rate limits reach the client (Mastodon sends X-RateLimit-* on its answers): its 429
 * keeps its headers, and on other answers the client sees the tighter of the gateway's and the upstream's.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { send, type Answer } from '../support/http.js';
import { startTestGateway, type TestGateway, upstreamFixture } from '../support/gateway.js';

const upstream = upstreamFixture();
let gw: TestGateway;

const TABLE = `limits:\n  - { name: api, match: /api/*, per: ip, limit: 300, period: 5m }\n`;

afterEach(async () => gw.shutdown(200));

function answer(status: number, headers: Record<string, string>) {
  return (_req: unknown, res: import('node:http').ServerResponse) => {
    res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
    res.end(status === 429 ? '{"error":"Too many requests"}' : '{}');
  };
}

/** An answer's X-RateLimit-* triple: limit, remaining, reset. */
const triple = (r: Answer): unknown[] =>
  ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'].map((h) => r.headers[h]);

describe("the upstream's own limits", () => {
  it("an upstream 429 reaches the client with the upstream's rate-limit headers, and a Retry-After computed from its reset", async () => {
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
    const reset = new Date(Date.now() + 120_000).toISOString().replace('Z', '000Z');
    upstream.route(
      '/api/v1/statuses',
      answer(429, { 'X-RateLimit-Limit': '300', 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': reset }),
    );
    const r = await send(gw.url, { path: '/api/v1/statuses' });
    expect(r.status).toBe(429);
    expect(triple(r)).toEqual(['300', '0', reset]);
    const retry = Number(r.headers['retry-after']);
    expect(retry).toBeGreaterThanOrEqual(115);
    expect(retry).toBeLessThanOrEqual(121);
    // The gateway's own bucket (299 left) is not shown against the upstream's refusal.
    expect(String(r.headers['ratelimit'] ?? '')).not.toContain('r=299');
  });

  it("an upstream 429 keeps the upstream's Retry-After, and gets none when its reset cannot be read", async () => {
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
    upstream.route('/api/v1/a', answer(429, { 'X-RateLimit-Remaining': '0', 'Retry-After': '7' }));
    upstream.route('/api/v1/b', answer(429, { 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': 'soon' }));
    const a = await send(gw.url, { path: '/api/v1/a' });
    expect(a.status).toBe(429);
    expect(a.headers['retry-after']).toBe('7');
    expect(a.headers['x-ratelimit-remaining']).toBe('0');
    const b = await send(gw.url, { path: '/api/v1/b' });
    expect(b.status).toBe(429);
    expect(b.headers['retry-after']).toBeUndefined();
    expect(b.headers['x-ratelimit-reset']).toBe('soon');
  });

  it('on other answers the client sees the tighter of the two X-RateLimit-* triples', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
    const reset = new Date(Date.now() + 60_000).toISOString();
    upstream.route(
      '/api/v1/tight',
      answer(200, { 'X-RateLimit-Limit': '300', 'X-RateLimit-Remaining': '5', 'X-RateLimit-Reset': reset }),
    );
    upstream.route(
      '/api/v1/loose',
      answer(200, { 'X-RateLimit-Limit': '1500', 'X-RateLimit-Remaining': '1499', 'X-RateLimit-Reset': reset }),
    );
    const tight = await send(gw.url, { path: '/api/v1/tight' });
    expect(tight.status).toBe(200);
    expect(triple(tight)).toEqual(['300', '5', reset]);
    const loose = await send(gw.url, { path: '/api/v1/loose' });
    expect(loose.headers['x-ratelimit-remaining']).toBe('298');
    expect(loose.headers['x-ratelimit-limit']).toBe('300');
    // One triple, never two values of a header.
    expect(Array.isArray(loose.headers['x-ratelimit-remaining'])).toBe(false);
  });

  it('the gateway still answers afterwards', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
    upstream.route('/api/v1/odd', answer(429, { 'X-RateLimit-Remaining': 'lots', 'X-RateLimit-Reset': '' }));
    expect((await send(gw.url, { path: '/api/v1/odd' })).status).toBe(429);
    expect((await send(gw.url, { path: '/api/v1/ok' })).status).toBe(200);
  });
});
