/**
 * Issue 32, the status page without a browser: its rates (a ring buffer of the per-rule counters), its
 * bounded reload history, and through the real admin listener the Content-Security-Policy, the escaping of
 * hostile values, the door rules (the same as the admin API's), and the JSON's shape.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/app/start.js';
import { RuleRates, type DecisionCounts } from '../../src/admin/rates.js';
import { MAX_RELOADS, ReloadHistory } from '../../src/admin/reloads.js';
import { NO_TOKEN_OFF_LOOPBACK } from '../../src/admin/door.js';
import { createAdminServer } from '../../src/admin/server.js';
import { healthLine, statusView } from '../../src/admin/status-view.js';
import type { StatusData } from '../../src/admin/status-data.js';
import { SEED_TABLE, gatewayFixture, startTestGateway } from '../support/gateway.js';
import { listen } from '../support/servers.js';

const fx = gatewayFixture<RunningGateway>({ graceMs: 200 });
const TOKEN = 'status-page-test-token';

/** The admin URL as reached over loopback, whatever address the listener bound. */
const adminOf = (g: RunningGateway): string => `http://127.0.0.1:${new URL(g.adminUrl).port}`;

async function gateway(extra = ''): Promise<RunningGateway> {
  fx.gw = await startTestGateway(`${SEED_TABLE}\n${extra}`, { upstream: fx.upstream.url });
  return fx.gw;
}

/** A gateway whose admin listener binds all interfaces (reached over 127.0.0.1 all the same). */
async function gatewayOffLoopback(extra = ''): Promise<RunningGateway> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-status-'));
  const configPath = path.join(dir, 'limits.yaml');
  writeFileSync(configPath, `${SEED_TABLE}\n${extra}\n`);
  fx.gw = await startGateway({
    configPath,
    overrides: { listen: '127.0.0.1:0', adminListen: '0.0.0.0:0', upstream: fx.upstream.url, logLevel: 'silent' },
    logger: pino({ level: 'silent' }),
    defaultMetrics: false,
    watch: false,
  });
  return fx.gw;
}

const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const basic = (user: string, t: string) => ({
  authorization: `Basic ${Buffer.from(`${user}:${t}`).toString('base64')}`,
});

type StatusJson = StatusData & { view: { id: string; rows: unknown[][]; line?: { text: string; tone: string } }[] };

async function statusJson(admin: string, headers: Record<string, string> = {}): Promise<StatusJson> {
  const r = await fetch(`${admin}/status.json`, { headers });
  expect(r.status).toBe(200);
  return (await r.json()) as StatusJson;
}

describe('the rates of the status page', () => {
  function fakeRules() {
    let now = 1_000_000;
    const counts = new Map<string, { allowed: number; limited: number; shadowLimited: number }>();
    let names = ['a', 'b'];
    for (const n of names) counts.set(n, { allowed: 0, limited: 0, shadowLimited: 0 });
    const rates = new RuleRates({ rules: () => names, counts: (n): DecisionCounts => counts.get(n)!, now: () => now });
    return {
      rates,
      counts: (n: string) => counts.get(n)!,
      advance: (ms: number) => void (now += ms),
      setRules: (r: string[]) => {
        names = r;
        for (const n of r) if (!counts.has(n)) counts.set(n, { allowed: 0, limited: 0, shadowLimited: 0 });
      },
    };
  }

  it('gives requests per second over the last minute and the last five minutes, each from its own window', () => {
    const t = fakeRules();
    // Five minutes of 10 allowed per second, then one minute of 2 allowed and 3 limited per second.
    for (let s = 0; s < 300; s += 5) {
      t.advance(5_000);
      t.counts('a').allowed += 50;
      t.rates.sample();
    }
    for (let s = 0; s < 60; s += 5) {
      t.advance(5_000);
      t.counts('a').allowed += 10;
      t.counts('a').limited += 15;
      t.rates.sample();
    }
    const m1 = t.rates.rates('a', '1m');
    expect(m1).toEqual({ allowed: 2, limited: 3, shadowLimited: 0, seconds: 60 });
    const m5 = t.rates.rates('a', '5m');
    expect(m5.seconds).toBe(300);
    expect(m5.allowed).toBeCloseTo((240 * 10 + 60 * 2) / 300, 6);
    expect(m5.limited).toBeCloseTo((60 * 3) / 300, 6);
    expect(t.rates.rates('b', '1m')).toEqual({ allowed: 0, limited: 0, shadowLimited: 0, seconds: 60 });
  });

  it('moves with the live counters between samples, and says how much history it has while the gateway is young', () => {
    const t = fakeRules();
    t.advance(4_000);
    t.counts('a').shadowLimited += 8;
    expect(t.rates.rates('a', '1m')).toEqual({ allowed: 0, limited: 0, shadowLimited: 2, seconds: 4 });
    expect(t.rates.rates('a', '5m').seconds).toBe(4);
  });

  it('keeps a fixed number of samples however long it runs, and drops the rules a reload removed', () => {
    const t = fakeRules();
    const ring = (name: string) =>
      (t.rates as unknown as { rings: Map<string, { values: Float64Array }> }).rings.get(name);
    const size = ring('a')!.values.length;
    for (let i = 0; i < 10_000; i++) {
      t.advance(5_000);
      t.counts('a').allowed++;
      t.rates.sample();
    }
    expect(ring('a')!.values.length).toBe(size);
    expect(size).toBeLessThanOrEqual(3 * 64);
    t.setRules(['a', 'c']);
    t.rates.sample();
    expect(ring('b')).toBeUndefined();
    expect(ring('c')).toBeDefined();
    // A rule that came with a reload has its rate from its first sample on, not from the gateway's start.
    t.advance(10_000);
    t.counts('c').allowed += 30;
    expect(t.rates.rates('c', '5m')).toEqual({ allowed: 3, limited: 0, shadowLimited: 0, seconds: 10 });
  });

  it('samples once a minute while nobody reads the rates, every 5 s from a read on until a minute after the last', () => {
    vi.useFakeTimers({ now: 1_000_000 });
    try {
      const t0 = Date.now();
      let samples = 0;
      const live = (): DecisionCounts => ({ allowed: ((Date.now() - t0) / 1000) * 10, limited: 0, shadowLimited: 0 });
      const rates = new RuleRates({ rules: () => (samples++, ['a']), counts: live });
      rates.start();
      const taken = (ms: number): number => {
        const before = samples;
        vi.advanceTimersByTime(ms);
        return samples - before;
      };
      expect(taken(330_000)).toBe(5);
      // The first read takes its baseline from the coarse samples, and says over how long.
      expect(rates.rates('a', '1m')).toEqual({ allowed: 10, limited: 0, shadowLimited: 0, seconds: 90 });
      expect(taken(65_000)).toBe(12);
      expect(rates.rates('a', '1m')).toEqual({ allowed: 10, limited: 0, shadowLimited: 0, seconds: 60 });
      // Unread for a minute: back to one sample a minute.
      expect(taken(120_000)).toBe(13);
      expect(taken(600_000)).toBe(10);
      rates.stop();
      expect(taken(600_000)).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps the last reloads only, newest first', () => {
    const h = new ReloadHistory();
    h.started(5);
    for (let i = 0; i < MAX_RELOADS + 5; i++) h.record({ ok: false, errors: [`bad ${i}`, 'x'.repeat(10_000)] });
    const list = h.list();
    expect(list).toHaveLength(MAX_RELOADS);
    expect(list[0]!.errors![0]).toBe(`bad ${MAX_RELOADS + 4}`);
    expect(list[0]!.errors![1]!.length).toBeLessThanOrEqual(300);
  });
});

describe('the status page on the admin listener', () => {
  it('is one HTML page under a strict Content-Security-Policy that allows exactly its own inline style and script', async () => {
    const g = await gateway();
    for (const p of ['/', '/status']) {
      const r = await fetch(adminOf(g) + p);
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
      const csp = r.headers.get('content-security-policy')!;
      const html = await r.text();
      const directives = Object.fromEntries(
        csp
          .split(';')
          .map((d) => d.trim().split(/\s+/) as [string, ...string[]])
          .map(([k, ...v]) => [k, v]),
      );
      expect(directives['default-src']).toEqual(["'none'"]);
      expect(directives['frame-ancestors']).toEqual(["'none'"]);
      expect(directives['connect-src']).toEqual(["'self'"]);
      const sha = (s: string) => `'sha256-${createHash('sha256').update(s).digest('base64')}'`;
      const scripts = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]!);
      const styles = [...html.matchAll(/<style>([\s\S]*?)<\/style>/g)].map((m) => m[1]!);
      expect(scripts).toHaveLength(1);
      expect(styles).toHaveLength(1);
      expect(directives['script-src']).toEqual([sha(scripts[0]!)]);
      expect(directives['style-src']).toEqual([sha(styles[0]!)]);
      // Nothing from elsewhere, no inline handler, no style attribute (the hashes would not allow them).
      expect(html).not.toMatch(/\s(src|href)=/i);
      expect(html).not.toMatch(/\son[a-z]+=/i);
      expect(html).not.toMatch(/\sstyle=/i);
      expect(r.headers.get('x-frame-options')).toBe('DENY');
      expect(r.headers.get('cache-control')).toBe('no-store');
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    }
  });

  it('HTML-escapes hostile reasons and keys on the page, and the gateway answers after them', async () => {
    const g = await gateway();
    const admin = adminOf(g);
    const hostile = '</td><script>alert("x")</script><img src=x onerror=alert(1)>';
    const post = (p: string, body: object) =>
      fetch(admin + p, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await post('/admin/blocks', { ip: '203.0.113.7', reason: hostile })).status).toBe(201);
    expect((await post('/admin/exemptions', { cidr: '198.51.100.0/24', reason: `'"&${hostile}` })).status).toBe(201);
    const html = await (await fetch(`${admin}/status`)).text();
    expect(html).toContain(
      '&lt;/td&gt;&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;',
    );
    expect(html).toContain('&#39;&quot;&amp;&lt;/td&gt;');
    expect(html).not.toContain(hostile);
    expect(html.match(/<script/g)).toHaveLength(1);
    expect(html.match(/<img/g)).toBeNull();
    // The JSON carries the value as it is (JSON is not HTML; the page's script sets it as text).
    const j = await statusJson(admin);
    expect(JSON.stringify(j.blocks)).toContain(JSON.stringify(hostile).slice(1, -1));
    expect((await fetch(`${admin}/healthz`)).status).toBe(200);
  });

  it('answers /status.json with the rules and their live rates, the store, the admin listings, the reloads and an empty surges list', async () => {
    const g = await gateway();
    const admin = adminOf(g);
    for (let i = 0; i < 7; i++)
      await (await fetch(`${g.url}/api/v1/accounts`, { method: 'POST', body: 'username=x' })).arrayBuffer();
    await fetch(`${admin}/admin/blocks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ip: '192.0.2.1', for: '10m', reason: 'test' }),
    });
    const j = await statusJson(admin);
    expect(Object.keys(j).sort()).toEqual(
      [
        'auth',
        'bans',
        'blocks',
        'exemptions',
        'fleet',
        'generatedAt',
        'limited',
        'reloads',
        'replica',
        'rules',
        'store',
        'surges',
        'upstream',
        'version',
        'view',
      ].sort(),
    );
    expect(j.auth).toEqual({ tokenRequired: false });
    expect(j.rules.map((r) => r.name)).toEqual(['account-access', 'ip-access', 'sign-up', 'uploading', 'deletion']);
    const signUp = j.rules.find((r) => r.name === 'sign-up')!;
    expect(signUp).toMatchObject({
      match: ['POST /api/v1/accounts'],
      per: 'ip',
      limit: 5,
      period: '30m',
      shadow: false,
    });
    expect(signUp.rates['1m'].allowed).toBeGreaterThan(0);
    expect(signUp.rates['1m'].limited).toBeGreaterThan(0);
    expect(signUp.rates['5m'].limited).toBeGreaterThan(0);
    expect(j.store).toMatchObject({
      kind: 'memory',
      url: 'memory',
      reachable: true,
      fallbackActive: false,
      nodes: [],
      leases: null,
    });
    // The admin listings as GET /admin/… answers them.
    expect(j.bans).toEqual(await (await fetch(`${admin}/admin/bans`)).json());
    expect(j.blocks).toEqual(await (await fetch(`${admin}/admin/blocks`)).json());
    expect(j.limited).toEqual([await (await fetch(`${admin}/admin/limited?rule=sign-up&top=10`)).json()]);
    expect(j.reloads).toEqual([expect.objectContaining({ kind: 'start', ok: true, rules: 5 })]);
    expect(j.surges).toEqual([]);
    // The memory store is this process's only: no fleet, no Replicas section.
    expect(j.fleet).toBeNull();
    expect(j.upstream).toMatchObject({ url: fx.upstream.url, probe: { up: true }, errors: {}, upstream5xx: 0 });
    expect(j.upstream.answered).toBeGreaterThan(0);
    expect(j.upstream.p99Ms).toBeGreaterThan(0);
    expect(j.view.map((s) => s.id)).toEqual([
      'health',
      'rules',
      'upstream',
      'store',
      'bans',
      'blocks',
      'exemptions',
      'limited',
      'reloads',
    ]);
    expect(j.view[0]!.line).toEqual({
      text: 'healthy: 1 replica (a store of this process only), upstream up, store up',
      tone: 'good',
    });
  });

  it('lists reloads with their result: a refused one with its errors, a good one with what changed', async () => {
    const g = await gateway();
    const file = (g as unknown as { configPath: string }).configPath;
    writeFileSync(file, `${SEED_TABLE}\n  - { name: broken, match: /x, per: ip, limit: -1, period: 1m }\n`);
    expect(await g.reload()).toBe(false);
    writeFileSync(file, SEED_TABLE.replace('limit: 5\n', 'limit: 6\n'));
    expect(await g.reload()).toBe(true);
    const j = await statusJson(adminOf(g));
    expect(j.reloads.map((r) => [r.kind, r.ok])).toEqual([
      ['reload', true],
      ['reload', false],
      ['start', true],
    ]);
    expect(j.reloads[1]!.errors!.join(' ')).toMatch(/limit/);
    expect(j.reloads[0]!.live).toEqual(['limits']);
    const html = await (await fetch(`${adminOf(g)}/status`)).text();
    expect(html).toContain('refused: the previous table stays');
  });

  it('says in one line what is wrong first: the upstream, the store, a refused reload, with the replicas it knows', () => {
    const ok = {
      generatedAt: new Date(0).toISOString(),
      rules: [],
      store: {
        kind: 'redis',
        url: 'redis://r:6379',
        onError: 'local',
        reachable: true,
        fallbackActive: false,
        nodes: [{ node: 'r:6379', up: true }],
        leases: null,
      },
      upstream: {
        url: 'http://up:3000',
        probe: { up: true, at: 0, ms: 3 },
        answered: 0,
        p50Ms: null,
        p99Ms: null,
        errors: {},
        upstream5xx: 0,
      },
      fleet: { gateways: 2, replicas: [{}, {}] },
      reloads: [{ kind: 'start', ok: true, at: new Date(0).toISOString(), rules: 0 }],
    } as unknown as StatusData;
    const line = (d: Partial<StatusData>) => healthLine({ ...ok, ...d } as StatusData);
    expect(line({})).toEqual({ text: 'healthy: 2 replicas, upstream up, store up', tone: 'good' });
    expect(line({ upstream: { ...ok.upstream, probe: { up: false, at: 0, ms: 5000, error: 'timeout' } } })).toEqual({
      text: 'degraded: upstream does not answer (timeout) · 2 replicas, store up',
      tone: 'bad',
    });
    expect(line({ store: { ...ok.store, fallbackActive: true } }).text).toBe(
      'degraded: store failing: decisions by onError: local · 2 replicas, upstream up',
    );
    expect(
      line({ reloads: [{ kind: 'reload', ok: false, at: new Date(0).toISOString(), rules: 0 }, ...ok.reloads] }).text,
    ).toMatch(/^degraded: the last config reload was refused/);
  });

  it('shows surges only when the table has them', () => {
    const data = {
      generatedAt: new Date(0).toISOString(),
      rules: [],
      upstream: { url: 'builtin', probe: null, answered: 0, p50Ms: null, p99Ms: null, errors: {}, upstream5xx: 0 },
      fleet: null,
      store: {
        kind: 'memory',
        url: 'memory',
        onError: 'local',
        reachable: true,
        fallbackActive: false,
        nodes: [],
        leases: null,
      },
      bans: null,
      blocks: null,
      exemptions: null,
      limited: [],
      reloads: [],
      surges: [],
    } as unknown as StatusData;
    expect(statusView(data).map((s) => s.id)).not.toContain('surges');
    const withSurge = {
      ...data,
      surges: [{ name: 'sign-up-wave', active: true, since: new Date(0).toISOString(), until: null }],
    };
    const surges = statusView(withSurge).find((s) => s.id === 'surges')!;
    expect(surges.rows[0]![0]).toBe('sign-up-wave');
  });
});

describe('who may read the status page: the admin API door', () => {
  it('with a token set: 401 without it or with a wrong one, 200 with it as a bearer or as the Basic password', async () => {
    const g = await gateway(`admin: { token: ${TOKEN} }`);
    const admin = adminOf(g);
    await fetch(`${admin}/admin/blocks`, {
      method: 'POST',
      headers: { ...bearer(TOKEN), 'content-type': 'application/json' },
      body: JSON.stringify({ ip: '203.0.113.99' }),
    });
    for (const p of ['/', '/status', '/status.json']) {
      for (const headers of [{}, bearer('wrong'), basic('admin', 'wrong')]) {
        const r = await fetch(admin + p, { headers });
        expect(r.status, `${p} ${JSON.stringify(headers)}`).toBe(401);
        expect(r.headers.get('www-authenticate')).toBe('Bearer realm="rategate-admin"');
        // The page that asks for the token shows no data: no IP.
        expect(await r.text()).not.toContain('203.0.113.99');
      }
      expect((await fetch(admin + p, { headers: bearer(TOKEN) })).status).toBe(200);
      expect((await fetch(admin + p, { headers: basic('anyone', TOKEN) })).status).toBe(200);
    }
    // `?login` asks the browser's own dialog (reading without JavaScript).
    const login = await fetch(`${admin}/status?login`);
    expect(login.status).toBe(401);
    expect(login.headers.get('www-authenticate')).toMatch(/^Basic realm="rategate status"/);
    expect(
      ((await fetch(`${admin}/status.json`, { headers: bearer(TOKEN) }).then((r) => r.json())) as StatusJson).auth,
    ).toEqual({ tokenRequired: true });
  });

  it('never takes Basic credentials for the admin API, reads or writes: a browser sends those by itself', async () => {
    const g = await gateway(`admin: { token: ${TOKEN} }`);
    const admin = adminOf(g);
    expect((await fetch(`${admin}/admin/bans`, { headers: basic('x', TOKEN) })).status).toBe(401);
    const post = await fetch(`${admin}/admin/blocks`, {
      method: 'POST',
      headers: { ...basic('x', TOKEN), 'content-type': 'application/json' },
      body: JSON.stringify({ ip: '203.0.113.5' }),
    });
    expect(post.status).toBe(401);
    expect(
      (
        (await fetch(`${admin}/admin/blocks`, { headers: bearer(TOKEN) }).then((r) => r.json())) as {
          entries: unknown[];
        }
      ).entries,
    ).toEqual([]);
  });

  it('without a token on a listener that is not loopback-only: refused 403 like the admin API, while /metrics stays open', async () => {
    const g = await gatewayOffLoopback();
    const admin = adminOf(g);
    for (const p of ['/', '/status', '/status.json', '/admin/bans']) {
      const r = await fetch(admin + p);
      expect(r.status, p).toBe(403);
      expect(await r.text()).toContain(
        p === '/status.json' || p === '/admin/bans'
          ? JSON.stringify(NO_TOKEN_OFF_LOOPBACK).slice(1, -1)
          : 'no admin token is set',
      );
    }
    expect((await fetch(`${admin}/metrics`)).status).toBe(200);
  });

  it('off loopback with a token: open with the token only', async () => {
    const g = await gatewayOffLoopback(`admin: { token: ${TOKEN} }`);
    const admin = adminOf(g);
    expect((await fetch(`${admin}/status.json`)).status).toBe(401);
    expect((await fetch(`${admin}/status.json`, { headers: bearer(TOKEN) })).status).toBe(200);
  });

  it('is not served by an admin router without the admin API (the --workers primary): 404', async () => {
    const server = createAdminServer({
      metrics: { contentType: 'text/plain', metrics: async () => '' },
      ready: async () => ({ ready: true, checks: {} }),
    });
    const running = await listen(server);
    try {
      for (const p of ['/', '/status', '/status.json']) expect((await fetch(running.url + p)).status, p).toBe(404);
    } finally {
      await running.close();
    }
  });
});
