/**
 * The fleet sharing one Redis: the gateway count learned from heartbeats (the local fallback's share
 * follows the processes really running, not `store.gateways`), and triage for the whole fleet. Real
 * gateway processes, a real Redis, really killed.
 */
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { upstreamFixture, limitsFile } from '../support/gateway.js';
import { skipIfExternalRedis, skipRedis, redisFixture } from '../support/redis.js';
import { runCli, spawnServe, stop, waitFor, type GatewayProcess } from '../support/process.js';
import { scaledMs } from '../support/speed.js';

const upstream = upstreamFixture();

async function metric(p: GatewayProcess, name: string): Promise<number | undefined> {
  const text = await (await fetch(`${p.adminUrl}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

/** `total` requests, a few at a time, round-robin over the gateways, from one client; the status counts. */
async function flood(gws: readonly GatewayProcess[], total: number, ip: string): Promise<Record<number, number>> {
  const agent = new Agent({ connections: 16 });
  const counts: Record<number, number> = {};
  for (let i = 0; i < total; i += 6) {
    const statuses = await Promise.all(
      Array.from({ length: Math.min(6, total - i) }, async (_, k) => {
        const r = await request(`${gws[(i + k) % gws.length]!.url}/api/v1/timelines/home`, {
          dispatcher: agent,
          headers: { 'x-forwarded-for': ip },
        });
        await r.body.dump();
        return r.statusCode;
      }),
    );
    for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1;
  }
  await agent.close();
  return counts;
}

/** Start-up of a gateway process, several at once: about a second idle (spawnServe stretches it by the machine's slowdown). */
const START_MS = 30_000;

const LIMIT = 60;
const TABLE = `limits:
  - { name: home, match: /api/*, per: ip, limit: ${LIMIT}, period: 1h }
store: { onError: local, gateways: 2 }
`;

describe.skipIf(skipRedis('the fleet on one Redis'))('the gateway count, learned', () => {
  const redis = redisFixture();

  it.skipIf(skipIfExternalRedis('the fleet with Redis killed'))(
    'is 3 for three gateways configured with store.gateways 2: with Redis killed, the fleet admits within limit × 1.1 + 5',
    async () => {
      const config = limitsFile(TABLE);
      const gws = await Promise.all(
        [0, 1, 2].map(() =>
          spawnServe(
            ['--config', config, '--upstream', upstream.url, '--store', redis.url],
            { RATEGATE_LOG_LEVEL: 'warn' },
            START_MS,
          ),
        ),
      );
      try {
        // Each learns the count at its heartbeats (every 5 s).
        await waitFor(
          async () => (await Promise.all(gws.map((g) => metric(g, 'rategate_gateways')))).every((n) => n === 3),
          30_000,
          'every gateway counting 3',
        );
        await redis.node.kill();
        // A client the store never saw: each gateway starts it at its share of the limit.
        const counts = await flood(gws, 240, '198.51.100.77');
        expect((counts[200] ?? 0) + (counts[429] ?? 0)).toBe(240);
        expect(counts[200]).toBeGreaterThanOrEqual(LIMIT * 0.9);
        expect(counts[200]).toBeLessThanOrEqual(LIMIT * 1.1 + 5); // with store.gateways: 2, 3 × 30 = 90
        // Still alive and answering, with the count it last saw.
        for (const g of gws) expect(await metric(g, 'rategate_gateways')).toBe(3);
      } finally {
        await redis.node.restart();
        await Promise.all(gws.map(stop));
      }
    },
    scaledMs(180_000),
  );

  it(
    'counts each --workers worker: one gateway of 2 workers and one single process are 3',
    async () => {
      const config = limitsFile(TABLE);
      const gws = [
        await spawnServe(
          ['--config', config, '--upstream', upstream.url, '--store', redis.url, '--workers', '2'],
          { RATEGATE_LOG_LEVEL: 'warn' },
          START_MS,
        ),
        await spawnServe(
          ['--config', config, '--upstream', upstream.url, '--store', redis.url],
          { RATEGATE_LOG_LEVEL: 'warn' },
          START_MS,
        ),
      ];
      try {
        // The primary's /metrics combines its workers' gauges by max: every process sees the same count.
        await waitFor(
          async () => (await Promise.all(gws.map((g) => metric(g, 'rategate_gateways')))).every((n) => n === 3),
          30_000,
          'both counting 3',
        );
        // One leaves: the others count it out at their next heartbeat (it deregisters as it stops).
        await stop(gws[1]!);
        await waitFor(async () => (await metric(gws[0]!, 'rategate_gateways')) === 2, 15_000, 'the workers counting 2');
      } finally {
        await Promise.all(gws.map(stop));
      }
    },
    scaledMs(180_000),
  );
});

const JOINS = `limits:
  - { name: home, match: /api/*, per: ip, limit: ${LIMIT}, period: 1h }
store: { onError: local, gateways: 1 }
`;

describe.skipIf(skipRedis('the fleet on one Redis'))('a gateway joining a running fleet', () => {
  const redis = redisFixture();

  it(
    'is counted by the running gateways at once: they beat when it announces itself, not at their next heartbeat',
    async () => {
      const config = limitsFile(JOINS);
      const serve = () =>
        spawnServe(
          ['--config', config, '--upstream', upstream.url, '--store', redis.url],
          { RATEGATE_LOG_LEVEL: 'warn' },
          START_MS,
        );
      const gws: GatewayProcess[] = [];
      try {
        for (const n of [1, 2, 3]) {
          // The running ones past their own joining period (quick beats for one heartbeat period, 5 s).
          if (n > 1) await new Promise((r) => setTimeout(r, 5_500));
          gws.push(await serve());
          const joined = Date.now();
          await waitFor(
            async () => (await Promise.all(gws.map((g) => metric(g, 'rategate_gateways')))).every((c) => c === n),
            15_000,
            `every gateway counting ${n}`,
          );
          // Within a second or so of the join (a heartbeat period is 5 s): for the second and the third.
          expect(Date.now() - joined).toBeLessThanOrEqual(scaledMs(1_500));
        }
      } finally {
        await Promise.all(gws.map(stop));
      }
    },
    scaledMs(120_000),
  );
});

const TRIAGE = `limits:
  - { name: posts, match: POST /api/v1/statuses, per: ip, limit: 1, period: 1h }
`;

describe.skipIf(skipRedis('fleet triage'))('triage for the whole fleet', () => {
  const redis = redisFixture();

  it(
    '/admin/limited and `rategate limited` answer for every replica, ?scope=local / --local for one',
    async () => {
      const config = limitsFile(TRIAGE);
      const gws = await Promise.all(
        [0, 1].map(() =>
          spawnServe(
            ['--config', config, '--upstream', upstream.url, '--store', redis.url],
            { RATEGATE_LOG_LEVEL: 'warn' },
            START_MS,
          ),
        ),
      );
      try {
        const post = async (g: GatewayProcess, ip: string): Promise<number> =>
          (await fetch(`${g.url}/api/v1/statuses`, { method: 'POST', headers: { 'x-forwarded-for': ip } })).status;
        // The lab's attack: one attacker on each replica.
        expect([await post(gws[0]!, '203.0.113.1'), await post(gws[0]!, '203.0.113.1')]).toEqual([200, 429]);
        expect([
          await post(gws[1]!, '203.0.113.2'),
          await post(gws[1]!, '203.0.113.2'),
          await post(gws[1]!, '203.0.113.2'),
        ]).toEqual([200, 429, 429]);
        const limited = async (
          query: string,
        ): Promise<{ scope: string; replicas?: number; top: { key: string; count: number }[] }> =>
          (await (await fetch(`${gws[0]!.adminUrl}/admin/limited?${query}`)).json()) as never;
        // The other replica publishes at its heartbeat (every 5 s).
        await waitFor(
          async () => (await limited('rule=posts')).top.length === 2,
          15_000,
          'both attackers in the fleet answer',
        );
        const fleet = await limited('rule=posts');
        expect(fleet).toMatchObject({ scope: 'fleet', replicas: 2 });
        expect(fleet.top.map((t) => [t.key, t.count])).toEqual([
          ['203.0.113.2', 2],
          ['203.0.113.1', 1],
        ]);
        const local = await limited('rule=posts&scope=local');
        expect(local.scope).toBe('local');
        expect(local.top.map((t) => t.key)).toEqual(['203.0.113.1']);

        const cli = await runCli(['limited', 'posts', '--admin', gws[0]!.adminUrl]);
        expect(cli.code).toBe(0);
        expect(cli.stdout).toMatch(/2\s+0\s+203\.0\.113\.2\n1\s+0\s+203\.0\.113\.1/);
        expect(cli.stdout).toContain('2 replicas published');
        // SPEC's form names the rule with --rule; the same answer.
        const named = await runCli(['limited', '--rule', 'posts', '--admin', gws[0]!.adminUrl]);
        expect(named.stdout).toBe(cli.stdout);
        const one = await runCli(['limited', 'posts', '--local', '--admin', gws[0]!.adminUrl]);
        expect(one.stdout).toContain('203.0.113.1');
        expect(one.stdout).not.toContain('203.0.113.2');
        const rules = await runCli(['limited', '--admin', gws[0]!.adminUrl]);
        expect(rules.stdout).toContain('rules that limited recently: posts');

        // The store down: this replica's own answer, saying the fleet's could not be read; asked for the fleet, 503.
        if (redis.source !== 'env') {
          await redis.node.kill();
          try {
            const res = await fetch(`${gws[0]!.adminUrl}/admin/limited?rule=posts`);
            expect(res.status).toBe(200);
            expect(await res.json()).toMatchObject({
              scope: 'local',
              top: [{ key: '203.0.113.1' }],
              fleet: expect.stringMatching(/^not read: /),
            });
            expect((await fetch(`${gws[0]!.adminUrl}/admin/limited?rule=posts&scope=fleet`)).status).toBe(503);
          } finally {
            await redis.node.restart();
          }
        }
      } finally {
        await Promise.all(gws.map(stop));
      }
    },
    scaledMs(180_000),
  );
});
