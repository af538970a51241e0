/** The one store-URL parser, and that every place that reads `store.url` refuses alike. */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { parseStoreUrl, StoreUrlError } from '../../src/config/store-url.js';
import { checkStoreUrl } from '../../src/config/fields/validators.js';
import { createStoreFor } from '../../src/limiter/factory.js';
import { createRedisStore } from '../../src/limiter/redis/store.js';
import { cliArgs } from '../support/process.js';
import { scaledMs } from '../support/speed.js';

describe('the store URL parser', () => {
  it('reads every form the store connects to: memory, redis, rediss with credentials and a database, and both cluster schemes', () => {
    expect(parseStoreUrl('memory')).toEqual({ kind: 'memory' });
    expect(parseStoreUrl('redis://cache')).toEqual({
      kind: 'redis',
      tls: false,
      node: { host: 'cache', port: 6379 },
      db: 0,
    });
    expect(parseStoreUrl('rediss://default:s%3Acret@cache.internal:6380/2')).toEqual({
      kind: 'redis',
      tls: true,
      username: 'default',
      password: 's:cret',
      node: { host: 'cache.internal', port: 6380 },
      db: 2,
    });
    expect(parseStoreUrl('redis://:pw@[::1]:7000/')).toEqual({
      kind: 'redis',
      tls: false,
      password: 'pw',
      node: { host: '::1', port: 7000 },
      db: 0,
    });
    expect(parseStoreUrl('redis-cluster://a:7000,10.0.0.2:7001')).toEqual({
      kind: 'redis-cluster',
      tls: false,
      nodes: [
        { host: 'a', port: 7000 },
        { host: '10.0.0.2', port: 7001 },
      ],
    });
    expect(parseStoreUrl('rediss-cluster://u:p%40ss@[::1]:7000,h:7001')).toEqual({
      kind: 'redis-cluster',
      tls: true,
      username: 'u',
      password: 'p@ss',
      nodes: [
        { host: '::1', port: 7000 },
        { host: 'h', port: 7001 },
      ],
    });
  });

  it("reads Sentinel URLs: the sentinels (port 26379 by default), the master name and a database; the credentials are the master's", () => {
    expect(parseStoreUrl('redis-sentinel://s1,10.0.0.2:26380/mymaster')).toEqual({
      kind: 'redis-sentinel',
      tls: false,
      sentinels: [
        { host: 's1', port: 26379 },
        { host: '10.0.0.2', port: 26380 },
      ],
      name: 'mymaster',
      db: 0,
    });
    expect(parseStoreUrl('rediss-sentinel://u:p%40ss@[::1]:26379/cache-1/3')).toEqual({
      kind: 'redis-sentinel',
      tls: true,
      username: 'u',
      password: 'p@ss',
      sentinels: [{ host: '::1', port: 26379 }],
      name: 'cache-1',
      db: 3,
    });
    expect(checkStoreUrl('redis-sentinel://s1:26379,s2:26379/mymaster')).toBeNull();
    for (const [url, why] of [
      ['redis-sentinel://s1:26379', /needs \/MASTERNAME/],
      ['redis-sentinel://s1:26379/', /needs \/MASTERNAME/],
      ['redis-sentinel://s1:26379/my master', /invalid master name/],
      ['redis-sentinel://s1:26379/m/x', /database "x" is not a number/],
      ['redis-sentinel://s1:26379/m/1/2', /is not a number/],
      ['redis-sentinel://s1:0/m', /invalid port/],
    ] as const) {
      expect(() => parseStoreUrl(url), url).toThrow(why);
    }
  });

  it('refuses what the store cannot connect to, saying why', () => {
    const refusals: [string, RegExp][] = [
      ['mongodb://db:27017', /unknown scheme/],
      ['redis-cluster://10.0.0.1:6379,10.0.0.2', /cluster node "10.0.0.2" has no port/],
      ['redis-cluster://a:7000/1', /a cluster has no database number/],
      ['redis://cache:6379/zero', /database "zero" is not a number/],
      ['redis://cache:6379?db=2', /a query or fragment is not supported/],
      ['redis://a:1,b:2', /several hosts need redis-cluster/],
      ['redis://cache:99999', /invalid port/],
      ['redis://127.1:6379', /invalid host/],
      ['redis://', /no host/],
      ['redis://u:%zz@cache', /malformed percent-encoding/],
    ];
    for (const [url, why] of refusals) {
      expect(() => parseStoreUrl(url), url).toThrow(StoreUrlError);
      expect(() => parseStoreUrl(url), url).toThrow(why);
    }
  });

  it('never repeats a password in a refusal', () => {
    const msg = checkStoreUrl('redis://admin:hunter2@cache:6379/x')!;
    expect(msg).toContain('redis://admin:***@cache:6379/x');
    expect(msg).not.toContain('hunter2');
  });

  it('lets config validation accept rediss-cluster:// and cluster URLs with credentials (they were refused before)', () => {
    for (const url of [
      'rediss-cluster://a:7000,b:7001',
      'redis-cluster://user:pw@a:7000,b:7001',
      'rediss://user:pw@cache:6380/2',
    ]) {
      expect(checkStoreUrl(url), url).toBeNull();
      expect(parseConfig(`store: { url: "${url}" }`, 't').config.store.url).toBe(url);
    }
  });

  it('gives the same refusal from config validation, the Redis store and the store factory', async () => {
    for (const url of ['memcached://x', 'redis-cluster://a:1,b', 'redis://c/db']) {
      const fromConfig = checkStoreUrl(url);
      expect(fromConfig).not.toBeNull();
      expect(() => createRedisStore({ url, prefix: 'p', timeoutMs: 50 })).toThrow(fromConfig!);
      await expect(createStoreFor({ url, prefix: 'p', timeout: 50, onError: 'local' })).rejects.toThrow(fromConfig!);
    }
  });

  it(
    'gives the same refusal from `rategate check` and `rategate serve`',
    async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-store-url-'));
      const config = path.join(dir, 'limits.yaml');
      writeFileSync(config, 'store:\n  url: "redis-cluster://a:7000,b"\n');
      const run = (args: string[]) =>
        new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
          const child = spawn(process.execPath, cliArgs(args), { stdio: ['ignore', 'pipe', 'pipe'] });
          let stdout = '';
          let stderr = '';
          child.stdout!.on('data', (d) => (stdout += d));
          child.stderr!.on('data', (d) => (stderr += d));
          child.once('exit', (code) => resolve({ code, stdout, stderr }));
        });
      const [check, serve] = await Promise.all([
        run(['check', '--config', config]),
        run(['serve', '--config', config, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0']),
      ]);
      expect(check.code).toBe(78);
      expect(serve.code).toBe(78);
      expect(check.stderr).toContain('cluster node "b" has no port');
      // check prints the sentence; serve logs it as one fatal JSON line (stdout), the same sentence in msg.
      const fatal = JSON.parse(serve.stdout.trim().split('\n').at(-1)!) as { level: string; msg: string };
      expect(fatal.level).toBe('fatal');
      expect(fatal.msg.trim()).toBe(check.stderr.trim());
    },
    scaledMs(30_000),
  );
});
