/** The admin listener: metrics after real traffic, health, readiness, and the buckets API with its token. */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { send } from '../support/http.js';
import { SEED_TABLE, startTestGateway, gatewayFixture } from '../support/gateway.js';

const fx = gatewayFixture({ graceMs: 500 });

async function metrics(): Promise<string> {
  return (await fetch(`${fx.gw!.adminUrl}/metrics`)).text();
}

describe('metrics', () => {
  it('count decisions per rule, near-limit requests, store and upstream timings, with no client identity in labels', async () => {
    fx.gw = await startTestGateway(SEED_TABLE, { upstream: fx.upstream.url });
    const ip = '198.51.100.77';
    for (let i = 0; i < 7; i++) {
      await send(fx.gw.url, {
        method: 'POST',
        path: '/api/v1/accounts',
        headers: { 'X-Forwarded-For': ip, Authorization: 'Bearer app-secret-token' },
      });
    }
    const m = await metrics();
    expect(m).toContain('rategate_requests_total{rule="sign-up",decision="allowed"} 5');
    expect(m).toContain('rategate_requests_total{rule="sign-up",decision="limited"} 2');
    expect(m).toContain('rategate_requests_total{rule="ip-access",decision="allowed"} 5');
    // 5 → remaining 4,3,2,1,0: ≤ 20 % of 5 is ≤ 1, so the 4th and 5th were near the limit.
    expect(m).toContain('rategate_near_limit_total{rule="sign-up"} 2');
    expect(m).toMatch(/rategate_store_duration_seconds_count 7/);
    expect(m).toMatch(/rategate_upstream_duration_seconds_count\{status_class="2xx"\} \d+/);
    expect(m).toContain('rategate_store_fallback_active');
    expect(m).toContain('# TYPE rategate_store_errors_total counter');
    expect(m).toContain('# TYPE rategate_upstream_errors_total counter');
    expect(m).not.toContain(ip);
    expect(m).not.toContain('app-secret-token');
  });

  it('count upstream errors by reason', async () => {
    fx.gw = await startTestGateway(SEED_TABLE, { upstream: 'http://127.0.0.1:9' });
    await send(fx.gw.url, { path: '/api/v1/statuses/1' });
    expect(await metrics()).toContain('rategate_upstream_errors_total{reason="unreachable"} 1');
  });
});

describe('health', () => {
  it('is alive and ready with a reachable upstream, and still ready, saying so, when the upstream is down (readiness.upstream: false)', async () => {
    fx.gw = await startTestGateway(SEED_TABLE, { upstream: fx.upstream.url });
    expect((await fetch(`${fx.gw.adminUrl}/healthz`)).status).toBe(200);
    const r = await fetch(`${fx.gw.adminUrl}/readyz`);
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({
      status: 'ready',
      checks: { config: true },
      upstream: { reachable: true },
      store: { kind: 'memory', reachable: true },
    });
    await fx.gw.shutdown(500);
    fx.gw = await startTestGateway(SEED_TABLE, { upstream: 'http://127.0.0.1:9' });
    const down = await fetch(`${fx.gw.adminUrl}/readyz`);
    expect(down.status).toBe(200);
    expect(await down.json()).toMatchObject({ status: 'ready', upstream: { reachable: false } });
  });

  it('serves nothing of the admin API on the proxy port', async () => {
    fx.gw = await startTestGateway(SEED_TABLE, { upstream: fx.upstream.url });
    const a = await send(fx.gw.url, { path: '/metrics' });
    expect(a.body).not.toContain('rategate_requests_total');
  });
});

describe('the buckets API', () => {
  it('shows a bucket and resets it', async () => {
    fx.gw = await startTestGateway(SEED_TABLE, { upstream: fx.upstream.url });
    for (let i = 0; i < 5; i++)
      await send(fx.gw.url, { method: 'POST', path: '/api/v1/accounts', headers: { 'X-Forwarded-For': '192.0.2.5' } });
    const shown = await fetch(`${fx.gw.adminUrl}/admin/buckets?rule=sign-up&key=192.0.2.5`);
    expect(shown.status).toBe(200);
    expect(await shown.json()).toMatchObject({
      rule: 'sign-up',
      key: 'sign-up:{ip:192.0.2.5}',
      limit: 5,
      remaining: 0,
      limited: true,
    });
    expect(
      (await send(fx.gw.url, { method: 'POST', path: '/api/v1/accounts', headers: { 'X-Forwarded-For': '192.0.2.5' } }))
        .status,
    ).toBe(429);

    const reset = await fetch(`${fx.gw.adminUrl}/admin/buckets?rule=sign-up&key=192.0.2.5`, { method: 'DELETE' });
    expect(reset.status).toBe(200);
    expect(
      (await send(fx.gw.url, { method: 'POST', path: '/api/v1/accounts', headers: { 'X-Forwarded-For': '192.0.2.5' } }))
        .status,
    ).toBe(200);
  });

  it('finds an account bucket by account id, and says what a bad key or rule is', async () => {
    fx.gw = await startTestGateway(SEED_TABLE, { upstream: fx.upstream.url });
    await send(fx.gw.url, { method: 'POST', path: '/api/v1/media', headers: { Authorization: 'Bearer user-31' } });
    const a = await (await fetch(`${fx.gw.adminUrl}/admin/buckets?rule=uploading&key=31`)).json();
    expect(a).toMatchObject({ key: 'uploading:{acct:a:31}', remaining: 29 });
    expect((await fetch(`${fx.gw.adminUrl}/admin/buckets?rule=nope&key=1`)).status).toBe(404);
    expect((await fetch(`${fx.gw.adminUrl}/admin/buckets?rule=sign-up&key=not-an-ip`)).status).toBe(400);
  });

  it('finds a parameter bucket by the value as sent and a token bucket by the token digest', async () => {
    fx.gw = await startTestGateway(
      `limits:
  - { name: resets, match: POST /auth/password, per: "param:user[email]", limit: 5, period: 30m }
  - { name: per-token, match: /api/*, per: token, limit: 300, period: 5m }
`,
      { upstream: fx.upstream.url },
    );
    await send(fx.gw.url, { method: 'POST', path: '/auth/password?user[email]=a@example.com' });
    await send(fx.gw.url, { path: '/api/v1/x', headers: { Authorization: 'Bearer tok-9' } });
    const digest = (v: string) => createHash('sha256').update(v).digest('hex');
    const p = await (
      await fetch(`${fx.gw.adminUrl}/admin/buckets?rule=resets&key=${encodeURIComponent('a@example.com')}`)
    ).json();
    expect(p).toMatchObject({ key: `resets:{prm:${digest('a@example.com')}}`, remaining: 4 });
    const t = await (await fetch(`${fx.gw.adminUrl}/admin/buckets?rule=per-token&key=${digest('tok-9')}`)).json();
    expect(t).toMatchObject({ key: `per-token:{tok:${digest('tok-9')}}`, remaining: 299 });
    expect((await fetch(`${fx.gw.adminUrl}/admin/buckets?rule=resets&key=`)).status).toBe(400);
  });

  it('requires the admin token when one is set', async () => {
    fx.gw = await startTestGateway(`${SEED_TABLE}\nadmin: { token: s3cret }\n`, { upstream: fx.upstream.url });
    const url = `${fx.gw.adminUrl}/admin/buckets?rule=sign-up&key=192.0.2.6`;
    expect((await fetch(url)).status).toBe(401);
    expect((await fetch(url, { headers: { Authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await fetch(url, { method: 'DELETE' })).status).toBe(401);
    expect((await fetch(url, { headers: { Authorization: 'Bearer s3cret' } })).status).toBe(200);
    // Probes and scrapes stay open.
    expect((await fetch(`${fx.gw.adminUrl}/healthz`)).status).toBe(200);
  });
});
