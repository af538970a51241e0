/**
 * The attack-day state (runtime blocks, bans) on a Redis behind password-protected sentinels: the
 * guard's own connection must reach the master the way the counter store does, with
 * `store.sentinelPassword`, or every block/ban call fails while rate limiting works.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { skipCluster } from '../support/redis.js';
import { startSentinelGroup, type SentinelGroup } from '../support/redis-ha.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { eventually } from '../support/eventually.js';

describe.skipIf(skipCluster('the Sentinel guard test'))('runtime blocks with a Sentinel store', () => {
  let group: SentinelGroup;
  let upstream: RecordingUpstream;
  let gw: TestGateway;
  beforeAll(async () => {
    group = await startSentinelGroup({ password: 'm4ster', sentinelPassword: 's3ntinel' });
    upstream = await startRecordingUpstream();
    const table = `limits:
  - { name: all, match: /*, per: ip, limit: 100, period: 1m }
store: { timeout: 1s, sentinelPassword: s3ntinel }
clients: { trustedProxies: [loopback] }
`;
    gw = await startTestGateway(table, { upstream: upstream.url, store: group.url });
  });
  afterAll(async () => {
    await gw?.shutdown(100);
    await upstream?.close();
    await group?.stop();
  });

  it('a runtime block is stored through the sentinels and refuses the IP', async () => {
    const ip = '203.0.113.77';
    const get = (): Promise<number> =>
      fetch(`${gw.url}/api/v1/timelines/public`, { headers: { 'x-forwarded-for': ip } }).then(
        async (r) => (await r.arrayBuffer(), r.status),
      );
    expect(await get()).toBe(200);
    const post = await fetch(`${gw.adminUrl}/admin/blocks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ip, for: '1m', reason: 'test' }),
    });
    expect(post.status).toBe(201);
    // Applied within the guard's poll (250 ms); allow a few polls.
    await eventually(get, { what: 'the block applied', withinMs: 3_000, everyMs: 50, until: (s) => s === 403 });
  });
});
