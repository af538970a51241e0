/** Hot reload: a valid change applies within 2 s without failing a request; an invalid one is refused. */
import { mkdirSync, renameSync, symlinkSync, writeFileSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/app/start.js';
import { send } from '../support/http.js';
import { startTestGateway, gatewayFixture } from '../support/gateway.js';
import { eventually } from '../support/eventually.js';

const fx = gatewayFixture<RunningGateway>({ graceMs: 500 });

const table = (limit: number) =>
  `limits:\n  - { name: everything, match: /x/*, per: global, limit: ${limit}, period: 1h }\n`;

/** Sends requests on 4 concurrent loops until stopped; returns every status seen. */
function loadLoop(url: string): {
  stop: () => Promise<number[]>;
  latestLimit: () => string | undefined;
  sent: () => number;
} {
  let running = true;
  const statuses: number[] = [];
  let latest: string | undefined;
  let n = 0;
  const loops = Array.from({ length: 4 }, async () => {
    while (running) {
      try {
        const a = await send(url, { path: `/x/${n++}` });
        statuses.push(a.status);
        latest = a.headers['x-ratelimit-limit'] as string | undefined;
      } catch {
        statuses.push(-1); // a failed request: the test asserts there are none
      }
    }
  });
  return {
    stop: async () => {
      running = false;
      await Promise.all(loops);
      return statuses;
    },
    latestLimit: () => latest,
    sent: () => statuses.length,
  };
}

describe('hot reload', () => {
  it('applies a rewritten file within 2 s under load, without a failed request', async () => {
    fx.gw = await startTestGateway(table(1_000_000), { upstream: fx.upstream.url });
    const load = loadLoop(fx.gw.url);
    // The load is under way before the edit (on a busy machine its first requests take a while).
    await eventually(() => load.latestLimit() === '1000000' && load.sent() > 20, {
      what: 'the first limit in force under load',
      withinMs: 10_000,
    });
    writeFileSync((fx.gw as { configPath: string } & RunningGateway).configPath, table(999_999));
    const written = Date.now();
    await eventually(() => load.latestLimit() === '999999', { what: 'the rewritten limit in force', withinMs: 2000 });
    const took = Date.now() - written;
    const statuses = await load.stop();
    expect(took).toBeLessThan(2000);
    expect(statuses.length).toBeGreaterThan(20);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(await (await fetch(`${fx.gw.adminUrl}/metrics`)).text()).toContain(
      'rategate_config_reloads_total{result="success"} 1',
    );
  });

  it('sees a Kubernetes ConfigMap update (the ..data symlink swap) within 2 s', async () => {
    // The kubelet's layout: limits.yaml → ..data/limits.yaml, ..data → ..<timestamp>/, swapped by rename.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-cm-'));
    const publish = (name: string, limit: number) => {
      mkdirSync(path.join(dir, name));
      writeFileSync(path.join(dir, name, 'limits.yaml'), table(limit));
      symlinkSync(name, path.join(dir, '..data_tmp'));
      renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
    };
    publish('..2026_11_21_1', 100);
    symlinkSync('..data/limits.yaml', path.join(dir, 'limits.yaml'));
    fx.gw = await startGateway({
      configPath: path.join(dir, 'limits.yaml'),
      overrides: { listen: '127.0.0.1:0', adminListen: '127.0.0.1:0', upstream: fx.upstream.url, logLevel: 'silent' },
      logger: pino({ level: 'silent' }),
      defaultMetrics: false,
    });
    expect((await send(fx.gw.url, { path: '/x/1' })).headers['x-ratelimit-limit']).toBe('100');
    publish('..2026_11_21_2', 7);
    await eventually(async () => (await send(fx.gw!.url, { path: '/x/1' })).headers['x-ratelimit-limit'] === '7', {
      what: 'limit 7 in force',
      withinMs: 2000,
    });
  });

  it('refuses an invalid file, counts the error, and keeps the old table in force', async () => {
    const t = await startTestGateway(table(50), { upstream: fx.upstream.url });
    fx.gw = t;
    writeFileSync(t.configPath, 'limits:\n  - { name: broken, match: nope, per: ip, limit: -1, period: 5x }\n');
    expect(await fx.gw.reload()).toBe(false);
    const metrics = await (await fetch(`${fx.gw.adminUrl}/metrics`)).text();
    expect(metrics).toContain('rategate_config_reloads_total{result="error"} 1');
    expect((await send(fx.gw.url, { path: '/x/1' })).headers['x-ratelimit-limit']).toBe('50');
    // Fixed again: applies.
    writeFileSync(t.configPath, table(40));
    expect(await fx.gw.reload()).toBe(true);
    expect((await send(fx.gw.url, { path: '/x/1' })).headers['x-ratelimit-limit']).toBe('40');
  });

  it('reloads on SIGHUP', async () => {
    const t = await startTestGateway(table(30), { upstream: fx.upstream.url });
    fx.gw = t;
    // Write without waiting for the watcher, then signal: the signal alone must be enough.
    writeFileSync(t.configPath, table(31));
    process.emit('SIGHUP', 'SIGHUP');
    await eventually(async () => (await send(fx.gw!.url, { path: '/x/1' })).headers['x-ratelimit-limit'] === '31', {
      what: 'limit 31 in force',
      withinMs: 2000,
    });
  });

  it('keeps counts across a reload that leaves a rule unchanged', async () => {
    const t = await startTestGateway(table(5), { upstream: fx.upstream.url });
    fx.gw = t;
    for (let i = 0; i < 3; i++) await send(fx.gw.url, { path: '/x/1' });
    writeFileSync(t.configPath, `${table(5)}\nresponses: { reset: unix }\n`);
    expect(await fx.gw.reload()).toBe(true);
    expect((await send(fx.gw.url, { path: '/x/1' })).headers['x-ratelimit-remaining']).toBe('1');
  });
});
