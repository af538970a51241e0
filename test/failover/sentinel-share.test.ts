/**
 * The fallback's share is a share (issue 37): two gateways on a Sentinel-managed Redis, one key limited
 * to 50 per 10 s under `onError: local` (the default), the master killed in the middle of a window under
 * load. Each gateway's local count must weigh what it had already admitted in that window (through the
 * store and its leases) against its share of 25, so the fleet admits at most limit × 1.1 + 5 = 60 in any
 * window: before, 65 (32 + 33), each gateway given its share on top of what it had admitted.
 *
 * And the start-up gap (issue 37): the two gateways started at the same moment and the master killed
 * 1.5 s later, 0.5 s before a window ends. The first gateway to beat counted itself alone until its next
 * heartbeat (5 s), so in the next window it counted the whole limit locally beside the other's half: 75.
 * With the count right, still 75: a local debt larger than the room left was dropped whole at the
 * write-back after the promotion (Redis reports a full bucket as 0 left), so the store handed out its
 * room again. With both fixed: 51.
 */
import { describe, expect, it } from 'vitest';
import {
  admittedWindows,
  startLoad,
  SHARE_LIMIT as LIMIT,
  SHARE_PERIOD_MS as PERIOD_MS,
  SHARE_TABLE as table,
} from '../support/failover-load.js';
import { startTestGateway, type TestGateway, upstreamFixture } from '../support/gateway.js';
import { skipCluster } from '../support/redis.js';
import { startSentinelGroup } from '../support/redis-ha.js';
import { scaledMs } from '../support/speed.js';

const upstream = upstreamFixture();

describe.skipIf(skipCluster('the Sentinel failover tests'))(
  'a Sentinel failover under onError: local, two gateways',
  () => {
    it(
      'admits at most limit × 1.1 + 5 per window for one key when the master is killed mid-window under load',
      async () => {
        const group = await startSentinelGroup();
        const gws: TestGateway[] = [];
        try {
          for (let i = 0; i < 2; i++)
            gws.push(await startTestGateway(table, { upstream: upstream.url, store: group.url }));
          const ip = '198.51.100.9';
          // 40 requests a second alternating between the gateways: the limit is spent within each window.
          const load = startLoad({ gateways: gws.map((g) => g.url), ips: [ip], rules: ['loc'], everyMs: 25 });
          // Kill the master 3 s into a window (its count well on), once each gateway's heartbeat has seen
          // the other (fleet.ts: every 5 s; until then a gateway sizes its share as if alone).
          const earliest = Date.now() + 6_000;
          const killAt = Math.ceil((earliest - 3_000) / PERIOD_MS) * PERIOD_MS + 3_000;
          await new Promise((r) => setTimeout(r, killAt - Date.now()));
          await group.master.kill();
          await group.promotedAt(group.replica);
          await load.wholeWindows(1, { periodMs: PERIOD_MS, since: Date.now() });
          const samples = await load.stop();
          const perWindow = admittedWindows(samples, ip, 'loc');
          const faultWindow = perWindow.find(([end]) => end > killAt && end - PERIOD_MS <= killAt);
          console.log(
            `sentinel share: admitted per window ${JSON.stringify(perWindow.map(([, n]) => n))}, in the fault's window ${faultWindow?.[1]}`,
          );
          expect(samples.filter((s) => s.status === 0)).toHaveLength(0);
          expect(faultWindow).toBeDefined();
          for (const [, n] of perWindow) expect(n).toBeLessThanOrEqual(LIMIT * 1.1 + 5);
        } finally {
          await Promise.all(gws.map((g) => g.shutdown(200)));
          await group.stop();
        }
      },
      scaledMs(90_000),
    );

    it(
      'admits at most limit × 1.1 + 5 per window when the master is killed 1.5 s after both gateways started together',
      async () => {
        const group = await startSentinelGroup();
        const gws: TestGateway[] = [];
        try {
          // Started 1.5 s before the kill, killed 0.5 s before a window ends: the outage spans the boundary.
          const killAt = Math.ceil((Date.now() + 2_500) / PERIOD_MS) * PERIOD_MS - 500;
          await new Promise((r) => setTimeout(r, killAt - 1_500 - Date.now()));
          gws.push(
            ...(await Promise.all(
              [0, 1].map(() => startTestGateway(table, { upstream: upstream.url, store: group.url })),
            )),
          );
          const ip = '198.51.100.11';
          const load = startLoad({ gateways: gws.map((g) => g.url), ips: [ip], rules: ['loc'], everyMs: 25 });
          await new Promise((r) => setTimeout(r, killAt - Date.now()));
          await group.master.kill();
          await group.promotedAt(group.replica);
          await load.wholeWindows(1, { periodMs: PERIOD_MS, since: Date.now() });
          const samples = await load.stop();
          const perWindow = admittedWindows(samples, ip, 'loc');
          console.log(`sentinel start-up share: admitted per window ${JSON.stringify(perWindow.map(([, n]) => n))}`);
          expect(samples.filter((s) => s.status === 0)).toHaveLength(0);
          for (const [, n] of perWindow) expect(n).toBeLessThanOrEqual(LIMIT * 1.1 + 5);
        } finally {
          await Promise.all(gws.map((g) => g.shutdown(200)));
          await group.stop();
        }
      },
      scaledMs(90_000),
    );
  },
);
