/**
 * Issue 29 item 3: the sentinels' own password reaches the gateway without sitting in limits.yaml (which
 * the chart renders into a ConfigMap): from RATEGATE_STORE_SENTINEL_PASSWORD or from
 * store.sentinelPasswordFile (a mounted Secret). Through the real `rategate serve`: the counters and the
 * attack-day state (a runtime block) both reach the master through the password-protected sentinels,
 * and the password is never logged.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServe, stop, waitFor, type GatewayProcess } from '../support/process.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { skipCluster } from '../support/redis.js';
import { startSentinelGroup, type SentinelGroup } from '../support/redis-ha.js';
import { pause } from '../support/eventually.js';
import { scaledMs } from '../support/speed.js';

const SENTINEL_PASSWORD = 's3ntinel-pw-29';
const RULES = `limits:
  - { name: all, match: /*, per: ip, limit: 100, period: 1m }
`;
const TABLE = `${RULES}store: { timeout: 1s }\n`;

describe.skipIf(skipCluster('the Sentinel password tests'))('the sentinels’ password, kept out of limits.yaml', () => {
  let group: SentinelGroup;
  let upstream: RecordingUpstream;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-sentinel-pw-'));
  const running: GatewayProcess[] = [];
  beforeAll(async () => {
    group = await startSentinelGroup({ password: 'm4ster', sentinelPassword: SENTINEL_PASSWORD });
    upstream = await startRecordingUpstream();
  }, scaledMs(60_000));
  afterAll(async () => {
    await Promise.all(running.map((p) => stop(p)));
    await upstream?.close();
    await group?.stop();
  });

  async function serve(table: string, env: Record<string, string> = {}): Promise<GatewayProcess> {
    const file = path.join(mkdtempSync(path.join(dir, 'gw-')), 'limits.yaml');
    writeFileSync(file, table);
    const gw = await spawnServe(['--config', file, '--upstream', upstream.url, '--store', group.url], {
      RATEGATE_LOG_LEVEL: 'info',
      ...env,
    });
    running.push(gw);
    return gw;
  }
  const storeUp = async (gw: GatewayProcess): Promise<boolean> =>
    /^rategate_store_up 1$/m.test(await (await fetch(`${gw.adminUrl}/metrics`)).text());

  /** The store answers, and a runtime block (the guard's own connection) is stored and refuses the IP. */
  async function expectStoreAndGuardWork(gw: GatewayProcess): Promise<void> {
    await waitFor(() => storeUp(gw), 10_000, 'the store up');
    const ip = `203.0.113.${running.length}`;
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
    await waitFor(async () => (await get()) === 403, 5_000, 'the block in force');
    expect(gw.output()).not.toContain(SENTINEL_PASSWORD);
  }

  it(
    'comes from RATEGATE_STORE_SENTINEL_PASSWORD',
    async () => {
      await expectStoreAndGuardWork(await serve(TABLE, { RATEGATE_STORE_SENTINEL_PASSWORD: `${SENTINEL_PASSWORD}\n` }));
    },
    scaledMs(30_000),
  );

  it(
    'comes from store.sentinelPasswordFile, trimmed',
    async () => {
      const secret = path.join(dir, 'sentinel-password');
      writeFileSync(secret, `${SENTINEL_PASSWORD}\n`);
      await expectStoreAndGuardWork(
        await serve(`${RULES}store: { timeout: 1s, sentinelPasswordFile: ${JSON.stringify(secret)} }\n`),
      );
    },
    scaledMs(30_000),
  );

  it(
    'without it, the sentinels refuse the gateway: the store stays down (the test can fail)',
    async () => {
      const gw = await serve(TABLE);
      // Several store probes (one a second) have run and all failed.
      const t0 = Date.now();
      while (Date.now() - t0 < 2_500) {
        expect(await storeUp(gw)).toBe(false);
        await pause(250); // a sample every quarter second over the window: the claim is that none succeeds
      }
    },
    scaledMs(30_000),
  );

  it(
    'refuses an unreadable file at start, naming the key, and both forms at once',
    async () => {
      const missing = path.join(dir, 'no-such-secret');
      const file = path.join(dir, 'missing.yaml');
      writeFileSync(file, `${RULES}store: { sentinelPasswordFile: ${JSON.stringify(missing)} }\n`);
      await expect(
        spawnServe(['--config', file, '--upstream', upstream.url, '--store', group.url], {}, 8_000),
      ).rejects.toThrow(/store\.sentinelPasswordFile: cannot read ".*no-such-secret": no such file/);
      await expect(
        spawnServe(
          ['--config', file, '--upstream', upstream.url, '--store', group.url],
          { RATEGATE_STORE_SENTINEL_PASSWORD: 'x' },
          8_000,
        ),
      ).rejects.toThrow(
        /set either store\.sentinelPassword \(or RATEGATE_STORE_SENTINEL_PASSWORD\) or store\.sentinelPasswordFile, not both/,
      );
    },
    scaledMs(30_000),
  );
});
