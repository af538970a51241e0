/**
 * Issue 37: junk tokens reached the upstream one by one. 400 requests from one client, each with a fresh
 * random bearer token, under config/examples/mastodon.yaml made 400 verify_credentials calls, including
 * for every request the gateway refused. The introspection budget bounds them per client, invalid
 * answers are remembered, and a client its IP bucket refuses is never introspected.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { send, type Answer } from '../support/http.js';
import { VERIFY } from '../support/recording-upstream.js';
import { gatewayFixture, startTestGateway, type TestGateway } from '../support/gateway.js';
import { redisFixture, skipRedis } from '../support/redis.js';

const EXAMPLE = readFileSync(fileURLToPath(new URL('../../config/examples/mastodon.yaml', import.meta.url)), 'utf8');
const fx = gatewayFixture({ graceMs: 200 });
const introspections = (): number => fx.upstream.seen.filter((s) => s.url === VERIFY).length;

/** A GET of the home timeline from client `ip` (named by X-Forwarded-For from the trusted loopback peer). */
function timeline(gw: TestGateway, ip: string, token?: string): Promise<Answer> {
  const headers: Record<string, string> = { 'x-forwarded-for': ip };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  return send(gw.url, { path: '/api/v1/timelines/home', headers });
}

const junk = (): string => randomBytes(24).toString('base64url');

/** `total` requests with a fresh junk token each, `parallel` at a time; the answers in order. */
async function junkFlood(gw: TestGateway, ip: string, total: number, parallel = 16): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let i = 0; i < total; i += parallel) {
    const n = Math.min(parallel, total - i);
    answers.push(...(await Promise.all(Array.from({ length: n }, () => timeline(gw, ip, junk())))));
  }
  return answers;
}

function statusCounts(answers: readonly Answer[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const a of answers) counts[a.status] = (counts[a.status] ?? 0) + 1;
  return counts;
}

async function metricValue(gw: TestGateway, series: string): Promise<number> {
  const text = await (await fetch(`${gw.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? NaN : Number(line.slice(series.length + 1));
}

/** The process still answers: a request from another client with no token goes through. */
async function stillAnswers(gw: TestGateway): Promise<void> {
  expect((await timeline(gw, '192.0.2.200')).status).toBe(200);
}

describe('the introspection budget, under config/examples/mastodon.yaml (memory store)', () => {
  it('400 fresh junk tokens from one client cause at most 20 verify_credentials calls; the rest are 429 introspection-budget', async () => {
    fx.gw = await startTestGateway(EXAMPLE, { upstream: fx.upstream.url });
    const answers = await junkFlood(fx.gw, '198.51.100.7', 400);
    expect(introspections()).toBeLessThanOrEqual(20);
    expect(introspections()).toBeGreaterThan(0);
    expect(statusCounts(answers)).toEqual({ 200: introspections(), 429: 400 - introspections() });
    const refused = answers.find((a) => a.status === 429)!;
    // The same body as every other 429, the budget's own rule name, and a retry hint within the window.
    expect(refused.json()).toEqual({ error: 'Too many requests' });
    expect(refused.headers['ratelimit-policy']).toBe('"introspection-budget";q=20;w=300');
    expect(refused.headers['x-ratelimit-limit']).toBe('20');
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(300);
    await stillAnswers(fx.gw);
  });

  it('another client is unaffected: its junk tokens and its real token are introspected', async () => {
    fx.gw = await startTestGateway(EXAMPLE, { upstream: fx.upstream.url });
    await junkFlood(fx.gw, '198.51.100.8', 60);
    const spent = introspections();
    expect(spent).toBeLessThanOrEqual(20);
    expect((await timeline(fx.gw, '203.0.113.9', 'user-9')).status).toBe(200);
    expect((await timeline(fx.gw, '203.0.113.9', junk())).status).toBe(200);
    expect(introspections()).toBe(spent + 2);
  });

  it('an IPv6 client counts by its /64: two addresses of one network share a budget', async () => {
    fx.gw = await startTestGateway(EXAMPLE, { upstream: fx.upstream.url });
    const first = await junkFlood(fx.gw, '2001:db8:1:1::1', 15, 1);
    const second = await junkFlood(fx.gw, '2001:db8:1:1:ffff::2', 15, 1);
    expect(statusCounts([...first, ...second])).toEqual({ 200: 20, 429: 10 });
    expect(second.slice(5).every((a) => a.status === 429)).toBe(true);
    expect((await timeline(fx.gw, '2001:db8:1:2::1', junk())).status).toBe(200);
    expect(introspections()).toBe(21);
  });

  it('a known token spends no more budget, and works past an exhausted budget', async () => {
    fx.gw = await startTestGateway(EXAMPLE, { upstream: fx.upstream.url });
    // Its first call was for a token unknown then: one of the budget's 20.
    expect((await timeline(fx.gw, '198.51.100.10', 'user-10')).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await timeline(fx.gw, '198.51.100.10', 'user-10')).status).toBe(200);
    const answers = await junkFlood(fx.gw, '198.51.100.10', 40, 1);
    expect(statusCounts(answers)).toEqual({ 200: 19, 429: 21 });
    expect(introspections()).toBe(20);
    for (let i = 0; i < 5; i++) expect((await timeline(fx.gw, '198.51.100.10', 'user-10')).status).toBe(200);
    expect(introspections()).toBe(20);
  });

  it('a token cached as invalid costs no call and no budget', async () => {
    fx.gw = await startTestGateway(EXAMPLE, { upstream: fx.upstream.url });
    const same = junk();
    for (let i = 0; i < 30; i++) expect((await timeline(fx.gw, '198.51.100.11', same)).status).toBe(200);
    expect(introspections()).toBe(1);
    // 19 of the budget's 20 are left: 19 fresh junk tokens are introspected, the 20th is refused.
    const answers = await junkFlood(fx.gw, '198.51.100.11', 20, 1);
    expect(answers.slice(0, 19).every((a) => a.status === 200)).toBe(true);
    expect(answers[19]!.status).toBe(429);
    expect(introspections()).toBe(20);
    expect((await timeline(fx.gw, '198.51.100.11', same)).status).toBe(200);
    expect(introspections()).toBe(20);
  });

  it('counts rategate_introspections_total by result', async () => {
    fx.gw = await startTestGateway(EXAMPLE, { upstream: fx.upstream.url });
    expect(await metricValue(fx.gw, 'rategate_introspections_total{result="budget_exhausted"}')).toBe(0);
    expect((await timeline(fx.gw, '203.0.113.20', 'user-20')).status).toBe(200);
    expect((await timeline(fx.gw, '203.0.113.20', 'write-20')).status).toBe(200);
    await junkFlood(fx.gw, '198.51.100.12', 30, 1);
    expect(await metricValue(fx.gw, 'rategate_introspections_total{result="ok"}')).toBe(1);
    expect(await metricValue(fx.gw, 'rategate_introspections_total{result="forbidden"}')).toBe(1);
    expect(await metricValue(fx.gw, 'rategate_introspections_total{result="invalid"}')).toBe(20);
    expect(await metricValue(fx.gw, 'rategate_introspections_total{result="budget_exhausted"}')).toBe(10);
    expect(await metricValue(fx.gw, 'rategate_introspections_total{result="error"}')).toBe(0);
  });
});

describe('a client its IP bucket refuses is never introspected', () => {
  const ipThenAccount = `
limits:
  - { name: ip-access, match: /api/*, per: ip, limit: 5, period: 5m }
  - { name: account-access, match: /api/*, per: account, limit: 300, period: 5m }
`;
  it.each([
    ['the limits alone', ipThenAccount],
    // The in-flight stage looked the account up before the limits' early refusal.
    [
      'an in-flight limit per account',
      `${ipThenAccount}concurrency:\n  - { name: per-account, match: /api/*, per: account, max: 4 }\n`,
    ],
  ])('with %s: 50 fresh junk tokens past the IP limit make 0 calls', async (_what, table) => {
    fx.gw = await startTestGateway(table, { upstream: fx.upstream.url });
    for (let i = 0; i < 5; i++) expect((await timeline(fx.gw, '198.51.100.13')).status).toBe(200);
    const answers = await junkFlood(fx.gw, '198.51.100.13', 50, 5);
    expect(statusCounts(answers)).toEqual({ 429: 50 });
    expect(answers[0]!.headers['x-ratelimit-limit']).toBe('5');
    expect(introspections()).toBe(0);
    await stillAnswers(fx.gw);
  });
});

describe.skipIf(skipRedis('introspection budget on Redis'))(
  'the introspection budget on Redis, shared by the fleet',
  () => {
    const redis = redisFixture();

    it('400 fresh junk tokens from one client, over two gateways sharing Redis, cause at most 20 calls', async () => {
      const a = await startTestGateway(EXAMPLE, { upstream: fx.upstream.url, store: redis.url });
      const b = await startTestGateway(EXAMPLE, { upstream: fx.upstream.url, store: redis.url });
      try {
        const answers = [...(await junkFlood(a, '198.51.100.14', 200)), ...(await junkFlood(b, '198.51.100.14', 200))];
        expect(introspections()).toBeLessThanOrEqual(20);
        expect(introspections()).toBeGreaterThan(0);
        expect(statusCounts(answers)).toEqual({ 200: introspections(), 429: 400 - introspections() });
        // Another client's budget is its own.
        expect((await timeline(b, '203.0.113.15', junk())).status).toBe(200);
        await stillAnswers(a);
        await stillAnswers(b);
      } finally {
        await a.shutdown(200);
        await b.shutdown(200);
      }
    });
  },
);

describe.skipIf(skipRedis('introspection budget with Redis down'))(
  'the introspection budget while Redis is down follows store.onError',
  () => {
    const redis = redisFixture();

    it.each(['local', 'deny'])(
      'onError: %s: 60 fresh junk tokens cause at most 20 calls (deny: every one 503, none asked about), and the process answers',
      async (onError) => {
        const gw = await startTestGateway(`${EXAMPLE}\nstore: { onError: ${onError}, timeout: 100ms }\n`, {
          upstream: fx.upstream.url,
          store: redis.url,
        });
        try {
          expect((await timeline(gw, '203.0.113.30', 'user-30')).status).toBe(200);
          await redis.node.kill();
          const before = introspections();
          const answers = await junkFlood(gw, '198.51.100.31', 60, 4);
          expect(introspections() - before).toBeLessThanOrEqual(20);
          if (onError === 'deny') {
            expect(statusCounts(answers)).toEqual({ 503: 60 });
            expect(introspections()).toBe(before);
          } else expect(Object.keys(statusCounts(answers)).sort()).toEqual(['200', '429']);
          // A known token needs no introspection: answered under the same policy.
          expect((await timeline(gw, '203.0.113.30', 'user-30')).status).toBe(onError === 'deny' ? 503 : 200);
        } finally {
          await gw.shutdown(200);
          await redis.node.restart();
        }
      },
    );
  },
);
