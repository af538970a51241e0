import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BASELINE_BYTES,
  BYTES_PER_BUCKET,
  effectiveMaxKeys,
  LIMIT_SHARE,
  maxKeysFor,
  memoryLimit,
  MIN_KEYS,
} from '../../src/limiter/memory/key-bound.js';
import { limitsFile } from '../support/gateway.js';
import { spawnServe, stop, type GatewayProcess } from '../support/process.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { scaledMs } from '../support/speed.js';

const MiB = 2 ** 20;

describe('the default store.maxKeys', () => {
  it('is the buckets that fit in 90 % of the limit once the baseline is taken', () => {
    expect(maxKeysFor(256 * MiB, 144 * MiB, 420)).toBe(Math.floor((256 * MiB * 0.9 - 144 * MiB) / 420));
    expect(maxKeysFor(1000, 0, 10)).toBe(MIN_KEYS); // 90 buckets fit: the floor
    expect(maxKeysFor(100 * MiB, 144 * MiB, 420)).toBe(MIN_KEYS); // no room at all
    expect(maxKeysFor(4096 * MiB, 144 * MiB, 400)).toBe(Math.floor((4096 * MiB * 0.9 - 144 * MiB) / 400));
  });

  it("with the chart's 256Mi, the baseline and the buckets at the bound stay within 90 % of the limit", () => {
    const limit = 256 * MiB;
    const keys = maxKeysFor(limit, BASELINE_BYTES, BYTES_PER_BUCKET);
    expect(BASELINE_BYTES + keys * BYTES_PER_BUCKET).toBeLessThanOrEqual(limit * LIMIT_SHARE);
    expect(keys).toBeGreaterThan(200_000);
  });

  it('reads RATEGATE_MEMORY_LIMIT first, then cgroup v2, then v1, then the heap limit; "max" and unlimited are no limit', () => {
    const files =
      (map: Record<string, string>) =>
      (p: string): string => {
        if (map[p] === undefined) throw new Error(`ENOENT ${p}`);
        return map[p];
      };
    const v2 = '/sys/fs/cgroup/memory.max';
    const v1 = '/sys/fs/cgroup/memory/memory.limit_in_bytes';
    expect(memoryLimit({ RATEGATE_MEMORY_LIMIT: '1000000' }, files({ [v2]: '5000000\n' }))).toEqual({
      bytes: 1_000_000,
      source: 'RATEGATE_MEMORY_LIMIT',
    });
    expect(memoryLimit({}, files({ [v2]: '268435456\n', [v1]: '1000\n' }))).toEqual({
      bytes: 268_435_456,
      source: 'cgroup v2',
    });
    expect(memoryLimit({}, files({ [v2]: 'max\n', [v1]: '268435456\n' }))).toEqual({
      bytes: 268_435_456,
      source: 'cgroup v1',
    });
    expect(memoryLimit({}, files({ [v1]: '9223372036854771712\n' })).source).toBe('V8 heap limit');
    expect(memoryLimit({}, files({})).source).toBe('V8 heap limit');
    expect(() => memoryLimit({ RATEGATE_MEMORY_LIMIT: '256Mi' }, files({}))).toThrow(/number of bytes/);
  });

  it('is store.maxKeys whenever that is given', () => {
    expect(effectiveMaxKeys(1234, () => ({ bytes: 1, source: 'cgroup v2' }))).toEqual({ maxKeys: 1234, derived: null });
    expect(effectiveMaxKeys(undefined, () => ({ bytes: 100 * MiB, source: 'cgroup v2' })).maxKeys).toBe(MIN_KEYS);
  });
});

describe('a gateway started with a small memory limit', () => {
  let upstream: RecordingUpstream;
  let gw: GatewayProcess;
  const table =
    'clients:\n  ipv6Prefix: 64\n  trustedProxies: [loopback]\nlimits:\n  - name: api\n    match: /api/*\n    per: ip\n    limit: 100\n    period: 5m\n';
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    // Less than the baseline: the bound is the floor, whatever this process's RSS.
    gw = await spawnServe(['--config', limitsFile(table), '--upstream', upstream.url], {
      RATEGATE_LOG_LEVEL: 'info',
      RATEGATE_MEMORY_LIMIT: String(100 * MiB),
    });
  });
  afterAll(async () => {
    await stop(gw);
    await upstream.close();
  });

  const metric = async (name: string): Promise<number> => {
    const text = await (await fetch(`${gw.adminUrl}/metrics`)).text();
    return Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1]);
  };

  it(
    'shows the derived bound, and refuses fresh clients past it with 429 as docs/stores.md says, alive after',
    async () => {
      expect(await metric('rategate_store_max_keys')).toBe(MIN_KEYS);
      expect(gw.output()).toContain(`store.maxKeys ${MIN_KEYS} from the memory limit (RATEGATE_MEMORY_LIMIT)`);
      const statuses: number[] = [];
      const retryAfter = new Set<string | null>();
      const n = MIN_KEYS + 200;
      for (let i = 0; i < n; i += 50) {
        const wave = await Promise.all(
          Array.from({ length: Math.min(50, n - i) }, (_, j) =>
            fetch(`${gw.url}/api/v1/timelines/public`, {
              headers: { 'x-forwarded-for': `2001:db8:${(i + j).toString(16)}::1` },
            }),
          ),
        );
        for (const r of wave) {
          statuses.push(r.status);
          if (r.status === 429) retryAfter.add(r.headers.get('retry-after'));
          await r.arrayBuffer();
        }
      }
      // IPv6 networks are keys the client chooses: they may fill 90 % of the table.
      const room = Math.floor(MIN_KEYS * 0.9);
      expect(statuses.filter((s) => s === 200)).toHaveLength(room);
      expect(statuses.filter((s) => s === 429)).toHaveLength(n - room);
      expect([...retryAfter]).toEqual(['1']);
      expect(await metric('rategate_store_keys')).toBe(room);
      expect(await metric('rategate_store_keys_refused_total')).toBe(n - room);
      // The rest is kept for IPv4 clients, accounts and global.
      expect(
        (await fetch(`${gw.url}/api/v1/timelines/public`, { headers: { 'x-forwarded-for': '198.51.100.7' } })).status,
      ).toBe(200);
      expect((await fetch(`${gw.adminUrl}/healthz`)).status).toBe(200);
      expect(gw.child.exitCode).toBeNull();
    },
    scaledMs(120_000),
  );
});
