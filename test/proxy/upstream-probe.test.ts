/**
 * The upstream probe (rategate_upstream_up, /readyz's upstream check): a real HEAD with a deadline. Any
 * answer is up, a refused connection is down at once, one that accepts and answers nothing is down at its
 * deadline; a reader never waits for that deadline.
 */
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { UpstreamProbe } from '../../src/proxy/upstream-probe.js';
import { freePort, listen, serve, type Running } from '../support/servers.js';
import { eventually } from '../support/eventually.js';

let running: Running | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

describe('the upstream probe', () => {
  it('counts any HTTP answer as up, a 500 included, and asks HEAD of upstream.healthPath with its own user agent', async () => {
    const seen: string[] = [];
    running = await serve((req, res) => {
      seen.push(`${req.method} ${req.url} ${req.headers['user-agent']}`);
      res.writeHead(500).end();
    });
    const probe = new UpstreamProbe(running.url, '/health', 30_000);
    expect(await probe.up()).toBe(true);
    expect(seen).toEqual([expect.stringMatching(/^HEAD \/health rategate\/\S+ upstream-probe$/)]);
  });

  it('says down at once for a refused connection, with the reason', async () => {
    const probe = new UpstreamProbe(`http://127.0.0.1:${await freePort()}`, '/', 30_000);
    expect(await probe.up()).toBe(false);
    expect((await probe.read())?.error).toBe('refused');
  });

  it('says down when the upstream accepts and answers nothing, without a reader ever waiting for the deadline', async () => {
    // Accepts the connection and reads the request, never answers: what a frozen Puma does.
    const silent = http.createServer(() => {});
    running = await listen(silent);
    const probe = new UpstreamProbe(running.url, '/', 1_500);
    const t0 = performance.now();
    expect(await probe.up()).toBe(true); // nothing known yet: the last answer (none) counts as up
    expect(performance.now() - t0).toBeLessThan(1_000);
    await eventually(async () => (await probe.read())?.error === 'timeout', {
      what: 'the probe timing out',
      withinMs: 10_000,
      everyMs: 100,
    });
    const t1 = performance.now();
    expect(await probe.up()).toBe(false);
    expect(performance.now() - t1).toBeLessThan(1_000);
  });

  it('sees a raw TCP listener that never speaks HTTP as down, and survives it closing the connection', async () => {
    const tcp = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', () => r()));
    const { port } = tcp.address() as net.AddressInfo;
    try {
      const probe = new UpstreamProbe(`http://127.0.0.1:${port}`, '/', 30_000);
      await eventually(async () => (await probe.read())?.up === false, {
        what: 'down after a reset',
        withinMs: 5_000,
        everyMs: 100,
      });
    } finally {
      await new Promise<void>((r) => tcp.close(() => r()));
    }
  });
});
