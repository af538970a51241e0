/**
 * Surges through real gateways: a sign-up wave from 30 IPs over two gateways on one Redis starts the
 * surge on both within 1 s, its stricter rules (1 sign-up per IP per day, an instance-wide daily cap)
 * apply, it ends by itself, and the admin API starts and ends it (audited); the metric and the log say so.
 */
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { explain } from '../../src/cli/explain.js';
import { eventually } from '../support/eventually.js';
import { send } from '../support/http.js';
import { capturingLogger, startTestGateway, type LogLine, type TestGateway } from '../support/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { skipRedis, startRedis, type RedisHandle } from '../support/redis.js';

const TABLE = `
limits:
  - name: sign-up
    match: POST /api/v1/accounts
    per: ip
    limit: 5
    period: 30m
surges:
  - name: sign-up-wave
    trigger: { rule: sign-up, above: 20, within: 10m }
    for: 3s
    limits:
      - name: sign-up-surge-ip
        match: POST /api/v1/accounts
        per: ip
        limit: 1
        period: 1d
      - name: sign-up-surge-cap
        match: POST /api/v1/accounts
        per: global
        limit: 100
        period: 1d
`;

const signUp = (gw: TestGateway, ip: string) =>
  send(gw.url, {
    method: 'POST',
    path: '/api/v1/accounts',
    headers: { 'x-forwarded-for': ip, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'username=x',
  });

interface SurgeView {
  name: string;
  active: boolean;
  endsAt: string | null;
  who: string | null;
  trigger: { count: number | null };
}
async function surge(gw: TestGateway): Promise<SurgeView> {
  const body = (await (await fetch(`${gw.adminUrl}/admin/surges`)).json()) as { surges: SurgeView[] };
  return body.surges[0]!;
}

const metric = async (gw: TestGateway): Promise<string | undefined> =>
  /rategate_surge_active\{surge="sign-up-wave"\} (\d)/.exec(await (await fetch(`${gw.adminUrl}/metrics`)).text())?.[1];

/**
 * Polls both gateways' gauge until the surge is `on` on each; the ms it took (fails after `withinMs`). The
 * gauge reads the replica's own picture as the request path does (GET /admin/surges would sync it first).
 */
async function until(gws: TestGateway[], on: boolean, withinMs: number): Promise<number> {
  const t0 = Date.now();
  await eventually(() => Promise.all(gws.map(async (g) => (await metric(g)) === '1')), {
    what: `the surge ${on ? 'on' : 'off'} on every gateway`,
    withinMs,
    until: (states) => states.every((s) => s === on),
  });
  return Date.now() - t0;
}

const said = (lines: LogLine[], re: RegExp): number => lines.filter((l) => re.test(l.msg)).length;

const noRedis = skipRedis('surges on two gateways');
describe.skipIf(noRedis)('a sign-up surge over two gateways on one Redis', () => {
  let redis: RedisHandle;
  let upstream: RecordingUpstream;
  const gws: TestGateway[] = [];
  const logs = [capturingLogger('info'), capturingLogger('info')];
  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    for (const { logger } of logs)
      gws.push(await startTestGateway(TABLE, { upstream: upstream.url, store: redis.url, logger }));
  });
  afterAll(async () => {
    for (const g of gws) await g.shutdown(200);
    await upstream?.close();
    await redis?.stop();
  });

  it('starts on both within 1 s of the wave, applies its rules, and ends by itself', async () => {
    const [a, b] = gws as [TestGateway, TestGateway];
    // Before the surge one IP may sign up more than once.
    expect([(await signUp(a, '198.51.100.1')).status, (await signUp(b, '198.51.100.1')).status]).toEqual([200, 200]);
    expect(await surge(a)).toMatchObject({ active: false });
    expect(await metric(b)).toBe('0');
    // The wave: 30 IPs in 30 networks (one network's share is bounded), one sign-up each, over both
    // gateways. The 21st counted passes `above: 20`.
    for (let i = 1; i <= 30; i++) await signUp(i % 2 === 0 ? a : b, `203.0.${i}.1`);
    const took = await until(gws, true, 1000);
    expect(took).toBeLessThanOrEqual(1000);
    // Its rules apply on both: one sign-up per IP per day.
    // Its rules apply on both: one sign-up per IP per day (counted from the surge's start).
    expect((await signUp(a, '192.0.2.50')).status).toBe(200);
    const refused = await signUp(b, '192.0.2.50');
    expect(refused.status).toBe(429);
    expect(refused.headers['ratelimit-policy']).toContain('"sign-up-surge-ip";q=1;w=86400');
    expect(await metric(a)).toBe('1');
    expect(await metric(b)).toBe('1');
    // It ends by itself after `for: 3s`, on both.
    await until(gws, false, 5000);
    expect((await signUp(b, '192.0.2.50')).status).toBe(200);
    expect(await metric(a)).toBe('0');
    // Each replica logs the start and the end once (it looks every 250 ms).
    for (const { lines } of logs) {
      expect(said(lines, /^surge sign-up-wave on until .*sign-up: more than 20 answered 2xx within 10m/)).toBe(1);
      await eventually(() => expect(said(lines, /^surge sign-up-wave off \(its time is up\)/)).toBe(1), {
        withinMs: 1000,
        what: 'the off line',
      });
    }
  });

  it('is started and ended by the admin API on every replica, audited', async () => {
    const [a, b] = gws as [TestGateway, TestGateway];
    const start = await fetch(`${a.adminUrl}/admin/surges/sign-up-wave/start?for=1h&reason=spam%20wave`, {
      method: 'POST',
    });
    expect(start.status).toBe(200);
    expect(await until(gws, true, 1000)).toBeLessThanOrEqual(1000);
    expect((await surge(b)).who).toMatch(/^no token from 127\.0\.0\.1/);
    // The status page shows it, on the replica that did not start it too.
    const page = (await (await fetch(`${b.adminUrl}/status.json`)).json()) as {
      surges: { name: string; active: boolean; trigger: string }[];
    };
    expect(page.surges).toEqual([
      expect.objectContaining({ name: 'sign-up-wave', active: true, trigger: 'sign-up above 20 within 10m, for 3s' }),
    ]);
    expect(await (await fetch(`${b.adminUrl}/`)).text()).toMatch(/Surges[\s\S]*sign-up-wave[\s\S]*active/);
    expect([(await signUp(b, '192.0.2.60')).status, (await signUp(a, '192.0.2.60')).status]).toEqual([200, 429]);
    const end = await fetch(`${b.adminUrl}/admin/surges/sign-up-wave/end?reason=over`, { method: 'POST' });
    expect(end.status).toBe(200);
    expect(await until(gws, false, 1000)).toBeLessThanOrEqual(1000);
    // Ending empties the trigger's count: it takes a new wave to start it again.
    expect((await surge(a)).trigger.count).toBe(0);
    expect((await signUp(a, '192.0.2.60')).status).toBe(200);
    expect((await fetch(`${b.adminUrl}/admin/surges/sign-up-wave/end`, { method: 'POST' })).status).toBe(404);
    expect((await fetch(`${b.adminUrl}/admin/surges/nope/start`, { method: 'POST' })).status).toBe(404);
    expect((await fetch(`${b.adminUrl}/admin/surges/sign-up-wave/start?for=forever`, { method: 'POST' })).status).toBe(
      400,
    );
    expect(logs[0]!.lines.find((l) => l.audit === 'surge.start')).toMatchObject({
      surge: 'sign-up-wave',
      reason: 'spam wave',
    });
    expect(logs[1]!.lines.find((l) => l.audit === 'surge.end')).toMatchObject({
      surge: 'sign-up-wave',
      reason: 'over',
    });
    await eventually(() => expect(said(logs[1]!.lines, /^surge sign-up-wave off \(ended early\)/)).toBe(1), {
      withinMs: 1000,
      what: 'the early-end line',
    });
    // Both gateways are alive and answer.
    for (const g of gws) expect((await fetch(`${g.adminUrl}/readyz`)).status).toBe(200);
  });
});

describe('surges added by a reload', () => {
  it('are watched from the reload on: a surge that ends by itself is logged off, on the memory store too', async () => {
    const upstream = await startRecordingUpstream();
    const { logger, lines } = capturingLogger('info');
    const noSurges = TABLE.slice(0, TABLE.indexOf('surges:'));
    const gw = await startTestGateway(noSurges, { upstream: upstream.url, logger });
    try {
      writeFileSync(gw.configPath, TABLE);
      expect(await gw.reload()).toBe(true);
      expect((await fetch(`${gw.adminUrl}/admin/surges/sign-up-wave/start?for=1s`, { method: 'POST' })).status).toBe(
        200,
      );
      // Only the watch's timer sees a surge's time run out.
      await eventually(() => expect(said(lines, /^surge sign-up-wave off \(its time is up\)/)).toBe(1), {
        withinMs: 3000,
        what: 'the off line',
      });
    } finally {
      await gw.shutdown(200);
      await upstream.close();
    }
  });
});

describe('surges in the table and in explain', () => {
  it('explain --surge counts the surge’s rules; without it they are off', async () => {
    const snapshot = parseConfig(TABLE, 'limits.yaml');
    const req = { request: 'POST /api/v1/accounts', headers: [], ip: '203.0.113.9' };
    const off = (await explain(snapshot, req)).join('\n');
    expect(off).toMatch(/sign-up-surge-ip: no \(surge sign-up-wave is not on\)/);
    const on = (await explain(snapshot, { ...req, surge: 'sign-up-wave' })).join('\n');
    expect(on).toMatch(/sign-up-surge-ip: yes, per ip \(surge sign-up-wave\), 1\/1d/);
    expect(on).toMatch(/sign-up-surge-cap: yes, per global \(surge sign-up-wave\)/);
    await expect(explain(snapshot, { ...req, surge: 'nope' })).rejects.toThrow(
      /--surge: no surge "nope" in the table \(surges: sign-up-wave\)/,
    );
  });

  it('refuses malformed surges with their place', () => {
    const bad = (yaml: string) => () => parseConfig(yaml, 'limits.yaml');
    expect(bad(TABLE.replace('rule: sign-up,', 'rule: sign-in,'))).toThrow(
      /surges\[0\]\.trigger\.rule: unknown rule "sign-in"/,
    );
    expect(bad(TABLE.replace('name: sign-up-surge-cap', 'name: sign-up'))).toThrow(
      /surges\[0\]\.limits\[1\]\.name: duplicate rule name "sign-up" \(first used at limits\[0\]\.name\)/,
    );
    expect(bad(TABLE.replace('within: 10m', 'within: soon'))).toThrow(
      /surges\[0\]\.trigger\.within: invalid duration "soon"/,
    );
    expect(bad(TABLE.replace('for: 3s', 'for: 3s\n    extra: 1'))).toThrow(/surges\[0\]\.extra: unknown key/);
    expect(bad(TABLE.replace('above: 20', 'above: 0'))).toThrow(/surges\[0\]\.trigger\.above/);
    const trigger = (extra: string) => TABLE.replace('within: 10m }', `within: 10m, ${extra} }`);
    expect(bad(trigger('statuses: [6xx]'))).toThrow(
      /surges\[0\]\.trigger\.statuses\[0\]: invalid status "6xx" \(a code from 100 to 599, or a class: 1xx … 5xx\)/,
    );
    expect(bad(trigger('statuses: []'))).toThrow(/surges\[0\]\.trigger\.statuses/);
    expect(bad(trigger('perNetwork: 0'))).toThrow(/surges\[0\]\.trigger\.perNetwork: must be a positive integer/);
    expect(bad(trigger('networkPrefix: { ipv4: 33 }'))).toThrow(/surges\[0\]\.trigger\.networkPrefix\.ipv4/);
    expect(bad(trigger('networkPrefix: { v4: 16 }'))).toThrow(
      /surges\[0\]\.trigger\.networkPrefix\.v4: unknown key \(expected one of: ipv4, ipv6\)/,
    );
  });
});
