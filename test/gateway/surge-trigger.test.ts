/**
 * A surge cannot be set off on purpose (issue 38, finding 4), through real gateways: docs/surges.md's
 * example, unchanged, is not started by 256 junk sign-ups (answered 422) from one IPv6 /56, nor by 256
 * answered ones from it (one network's share of the trigger is bounded); a wave from many networks still
 * starts it; the trigger counts the upstream statuses it names, never a gateway answer; and what is
 * answered while the surge is on does not start it again at its end. On the memory store and on Redis; the gateway alive after each.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, pause } from '../support/eventually.js';
import { send } from '../support/http.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { skipRedis, startRedis, type RedisHandle } from '../support/redis.js';

/** The first YAML block of docs/surges.md, as an operator copies it. */
const DOC_TABLE = /```yaml\n([\s\S]*?)```/.exec(
  readFileSync(path.join(import.meta.dirname, '../../docs/surges.md'), 'utf8'),
)![1]!;

const signUp = (gw: TestGateway, ip: string) =>
  send(gw.url, {
    method: 'POST',
    path: '/api/v1/accounts',
    headers: { 'x-forwarded-for': ip, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'username=x',
  });

/** Sign-ups answered `status` by the upstream, as Mastodon answers a junk one 422 and a taken one 200. */
function answerSignUps(upstream: RecordingUpstream, status: () => number): void {
  upstream.route('/api/v1/accounts', (req: http.IncomingMessage, res: http.ServerResponse) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(status(), { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
}

interface SurgeView {
  name: string;
  active: boolean;
  endsAt: string | null;
  trigger: { count: number | null };
}
async function surge(gw: TestGateway, name: string): Promise<SurgeView> {
  const body = (await (await fetch(`${gw.adminUrl}/admin/surges`)).json()) as { surges: SurgeView[] };
  return body.surges.find((s) => s.name === name)!;
}

/** Waits until the trigger's count has taken what was sent (the count is added off the request path), or the surge is on. */
const settled = (gw: TestGateway, name: string, count: number) =>
  eventually(() => surge(gw, name), {
    what: `the count of ${name} at ${count}`,
    until: (s) => s.active || s.trigger.count === count,
  });

/** 256 addresses, one in each /64 of the /56 2001:db8:aa00:ab00::/56: one home allocation. */
const ONE_SLASH_56 = Array.from({ length: 256 }, (_, i) => `2001:db8:aa00:ab${i.toString(16).padStart(2, '0')}::1`);

async function alive(gw: TestGateway): Promise<void> {
  expect((await fetch(`${gw.adminUrl}/readyz`)).status).toBe(200);
  expect(
    (await send(gw.url, { path: '/api/v1/timelines/public', headers: { 'x-forwarded-for': '192.0.2.200' } })).status,
  ).toBe(200);
}

const stores: [string, boolean][] = [
  ['the memory store', false],
  ['Redis', true],
];
const noRedis = skipRedis('surge triggers on Redis');

describe.each(stores)('docs/surges.md’s sign-up surge, unchanged, on %s', (_store, onRedis) => {
  let redis: RedisHandle | undefined;
  let upstream: RecordingUpstream;
  let gw: TestGateway;
  let answer = 422;
  beforeAll(async () => {
    if (onRedis && noRedis) return;
    redis = onRedis ? await startRedis() : undefined;
    upstream = await startRecordingUpstream();
    answerSignUps(upstream, () => answer);
    gw = await startTestGateway(DOC_TABLE, { upstream: upstream.url, ...(redis ? { store: redis.url } : {}) });
  });
  afterAll(async () => {
    await gw?.shutdown(200);
    await upstream?.close();
    await redis?.stop();
  });

  it.skipIf(onRedis && noRedis)(
    'is not started from one /56, junk or not, and is by a wave from many networks',
    async () => {
      // 256 junk sign-ups from one home allocation: admitted by the gateway, refused by the upstream.
      for (const ip of ONE_SLASH_56) expect((await signUp(gw, ip)).status).toBe(422);
      expect(await settled(gw, 'sign-up-wave', 0)).toMatchObject({ active: false, trigger: { count: 0 } });
      // The same network's sign-ups that the upstream takes: one network's share of the trigger is bounded.
      answer = 200;
      for (const ip of ONE_SLASH_56) expect((await signUp(gw, ip)).status).toBe(200);
      // The default share: a tenth of `above: 50`.
      expect(await settled(gw, 'sign-up-wave', 5)).toMatchObject({ active: false, trigger: { count: 5 } });
      // Real sign-ups from unrelated addresses are not refused.
      for (const ip of ['192.0.2.10', '198.51.100.10', '2001:db8:1::1']) {
        const r = await signUp(gw, ip);
        expect(r.status).toBe(200);
        expect(r.headers['retry-after']).toBeUndefined();
      }
      // A genuine wave: one sign-up from each of 60 /24 networks passes `above: 50` and starts it.
      for (let i = 1; i <= 60; i++) await signUp(gw, `203.0.${i}.7`);
      expect(
        await eventually(() => surge(gw, 'sign-up-wave'), { what: 'the surge on', until: (s) => s.active }),
      ).toMatchObject({ active: true });
      // Its rules apply: one sign-up per IP per day, counted from its start.
      expect((await signUp(gw, '192.0.2.11')).status).toBe(200);
      const refused = await signUp(gw, '192.0.2.11');
      expect(refused.status).toBe(429);
      expect(refused.headers['ratelimit-policy']).toContain('"sign-up-surge-ip"');
      await alive(gw);
    },
  );
});

describe('a surge trigger’s statuses and network share, as configured', () => {
  const TABLE = `
limits:
  - name: sign-in
    match: POST /api/v1/accounts
    per: ip
    limit: 100
    period: 1h
surges:
  - name: failed-sign-ins
    trigger:
      rule: sign-in
      above: 3
      within: 10m
      statuses: [401, 4xx]
      perNetwork: 1
      networkPrefix: { ipv4: 16, ipv6: 32 }
    for: 1h
    limits:
      - { name: sign-in-surge, match: POST /api/v1/accounts, per: global, limit: 1000, period: 1h }
`;
  let upstream: RecordingUpstream;
  let gw: TestGateway;
  let answer = 200;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    answerSignUps(upstream, () => answer);
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
  });
  afterAll(async () => {
    await gw?.shutdown(200);
    await upstream?.close();
  });

  it('counts only the statuses named, at most perNetwork from each network of the prefix', async () => {
    // 2xx answers are not among the statuses named.
    for (let i = 1; i <= 10; i++) expect((await signUp(gw, `10.${i}.0.1`)).status).toBe(200);
    answer = 422;
    // Ten /24s of one /16, then ten /48s of one /32: one contribution each.
    for (let i = 1; i <= 10; i++) expect((await signUp(gw, `10.1.${i}.1`)).status).toBe(422);
    for (let i = 1; i <= 10; i++) expect((await signUp(gw, `2001:db8:${i.toString(16)}::1`)).status).toBe(422);
    expect(await settled(gw, 'failed-sign-ins', 2)).toMatchObject({ active: false, trigger: { count: 2 } });
    // Two more networks: the fourth contribution passes `above: 3`.
    await signUp(gw, '10.2.0.1');
    await signUp(gw, '10.3.0.1');
    expect(
      await eventually(() => surge(gw, 'failed-sign-ins'), { what: 'the surge on', until: (s) => s.active }),
    ).toMatchObject({ active: true });
    await alive(gw);
  });
});

describe('what is answered while a surge is on', () => {
  const TABLE = `
limits:
  - name: sign-up
    match: POST /api/v1/accounts
    per: ip
    limit: 5
    period: 30m
surges:
  - name: sign-up-wave
    trigger: { rule: sign-up, above: 5, within: 10m }
    for: 2s
    limits:
      - { name: sign-up-surge-ip, match: POST /api/v1/accounts, per: ip, limit: 1, period: 1d }
`;
  let upstream: RecordingUpstream;
  let gw: TestGateway;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
  });
  afterAll(async () => {
    await gw?.shutdown(200);
    await upstream?.close();
  });

  it('does not start it again at its end: it ends after `for` while the wave goes on', async () => {
    for (let i = 1; i <= 6; i++) await signUp(gw, `198.51.${i}.1`);
    const on = await eventually(() => surge(gw, 'sign-up-wave'), { what: 'the surge on', until: (s) => s.active });
    // The wave goes on during the surge, well past `above`, each sign-up admitted (one per IP).
    let n = 0;
    while (Date.now() < Date.parse(on.endsAt!) - 200)
      expect((await signUp(gw, `10.${n >> 8}.${n++ & 255}.1`)).status).toBe(200);
    expect(n).toBeGreaterThan(5);
    // Its time is up, and the next sign-up counts from zero: the surge stays off.
    await eventually(() => surge(gw, 'sign-up-wave'), {
      what: 'the surge off',
      withinMs: 3000,
      until: (s) => !s.active,
    });
    expect((await signUp(gw, '198.51.250.1')).status).toBe(200);
    expect(await settled(gw, 'sign-up-wave', 1)).toMatchObject({ active: false, trigger: { count: 1 } });
    // Nothing was pending to start it a moment later.
    await pause(300); // an event that must not happen: the surge starting again
    expect(await surge(gw, 'sign-up-wave')).toMatchObject({ active: false, endsAt: null });
    await alive(gw);
  });
});

describe('a gateway answer to an admitted request', () => {
  const TABLE = `
limits:
  - { name: sign-up, match: POST /api/v1/accounts, per: ip, limit: 100, period: 1h }
surges:
  - name: failing-sign-ups
    trigger: { rule: sign-up, above: 2, within: 10m, statuses: [5xx], perNetwork: 10 }
    for: 1h
    limits:
      - { name: sign-up-surge, match: POST /api/v1/accounts, per: global, limit: 1000, period: 1h }
`;
  let upstream: RecordingUpstream;
  let gw: TestGateway;
  let fail: 'hang-up' | 503 = 'hang-up';
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    upstream.route('/api/v1/accounts', (req, res) => {
      if (fail === 'hang-up') return void req.socket.destroy();
      req.resume();
      req.on('end', () => res.writeHead(503).end());
    });
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
  });
  afterAll(async () => {
    await gw?.shutdown(200);
    await upstream?.close();
  });

  it('never counts (a 502 for an upstream that hung up), where the upstream’s own 5xx does', async () => {
    for (let i = 0; i < 5; i++) expect((await signUp(gw, `192.0.2.${i + 1}`)).status).toBe(502);
    expect(await settled(gw, 'failing-sign-ups', 0)).toMatchObject({ active: false, trigger: { count: 0 } });
    fail = 503;
    for (let i = 0; i < 3; i++) expect((await signUp(gw, `192.0.2.${i + 1}`)).status).toBe(503);
    expect(
      await eventually(() => surge(gw, 'failing-sign-ups'), { what: 'the surge on', until: (s) => s.active }),
    ).toMatchObject({ active: true });
    await alive(gw);
  });
});
