/**
 * @module How long store calls take under load with several gateways on one Redis, on this machine as it
 * is (busy or not): the figures `store.timeout`'s default is chosen from (docs/stores.md, "Choosing
 * store.timeout"). Starts a redis-server, the built-in upstream and N `rategate serve` processes on
 * loopback, drives each at a fixed rate from many client addresses (X-Forwarded-For from loopback), then
 * reads each gateway's `rategate_store_duration_seconds` histogram and store timeout counter.
 *
 *   npm run build && node --import tsx bench/store-timeout.ts [--gateways 3] [--rate 150] [--seconds 60]
 *     [--timeout 1s] [--lease true|false]
 *
 * With a timeout far above the tail (1s, the default here) nothing times out and the histogram is the
 * true distribution: the share of calls above each bucket bound is the share a timeout of that bound
 * would have sent to the fallback. Load stays on loopback.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { freePort, killAll, start, type Proc } from './lib/procs.js';

const { values } = parseArgs({
  options: {
    gateways: { type: 'string', default: '3' },
    rate: { type: 'string', default: '100' },
    seconds: { type: 'string', default: '60' },
    timeout: { type: 'string', default: '1s' },
    lease: { type: 'string', default: 'true' },
  },
});
const GATEWAYS = Number(values.gateways);
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);
const CLI = path.join(import.meta.dirname, '..', 'dist', 'cli', 'index.js');

async function waitHttp(url: string, ms = 20_000): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    if ((await fetch(url).catch(() => null))?.ok) return;
    if (Date.now() - t0 > ms) throw new Error(`${url} did not answer`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function waitRedis(port: number): Promise<void> {
  const net = await import('node:net');
  const t0 = Date.now();
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => (s.end(), resolve(true)));
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() - t0 > 10_000) throw new Error('redis-server did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Scrape {
  /** Cumulative counts by upper bound in seconds (Infinity last). */
  readonly buckets: [number, number][];
  readonly timeouts: number;
  /** Every other store error, by reason (`circuit_open`: calls an open breaker kept off Redis). */
  readonly otherErrors: Record<string, number>;
}

function parseMetrics(text: string): Scrape {
  const buckets: [number, number][] = [];
  let timeouts = 0;
  const otherErrors: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const b = /^rategate_store_duration_seconds_bucket\{le="([^"]+)"\} (\d+)/.exec(line);
    if (b) buckets.push([b[1] === '+Inf' ? Infinity : Number(b[1]), Number(b[2])]);
    const e = /^rategate_store_errors_total\{reason="([^"]+)"\} (\d+)/.exec(line);
    if (e) {
      if (e[1] === 'timeout') timeouts += Number(e[2]);
      else if (Number(e[2]) > 0) otherErrors[e[1]!] = Number(e[2]);
    }
  }
  return { buckets, timeouts, otherErrors };
}

function load(url: string): Promise<autocannon.Result> {
  let i = 0;
  return new Promise((resolve, reject) => {
    // overallRate: a fixed request rate, whatever the answers' latency (autocannon's own option).
    const options: autocannon.Options & { overallRate: number } = {
      url: `${url}/api/v1/timelines/public`,
      connections: 8,
      overallRate: RATE,
      duration: SECONDS,
      requests: [
        {
          setupRequest: (req) => {
            // 2,000 clients: the many keys of real traffic, each far below its limit.
            i = (i + 1) % 2000;
            return { ...req, headers: { ...req.headers, 'x-forwarded-for': `198.18.${i >> 8}.${i & 255}` } };
          },
        },
      ],
    };
    autocannon(options, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-store-timeout-'));
  const procs: Proc[] = [];
  process.on('exit', killAll);
  const redisPort = await freePort();
  procs.push(
    start('redis', 'redis-server', [
      '--port',
      String(redisPort),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
    ]),
  );
  await waitRedis(redisPort);
  const upstreamPort = await freePort();
  procs.push(start('upstream', process.execPath, [CLI, 'upstream', '--listen', `127.0.0.1:${upstreamPort}`]));
  const config = path.join(dir, 'limits.yaml');
  writeFileSync(
    config,
    `log: { level: warn, requests: debug }
store: { timeout: ${values.timeout}, lease: ${values.lease}, gateways: ${GATEWAYS} }
limits:
  - { name: ip-access, match: /api/*, per: ip, limit: 3000, period: 5m }
  - { name: global-api, match: /api/*, per: global, limit: 100000000, period: 1h }
`,
  );
  const gateways: { url: string; admin: string }[] = [];
  for (let g = 0; g < GATEWAYS; g++) {
    const [port, admin] = [await freePort(), await freePort()];
    procs.push(
      start(`gateway-${g}`, process.execPath, [
        CLI,
        'serve',
        '--config',
        config,
        '--listen',
        `127.0.0.1:${port}`,
        '--admin-listen',
        `127.0.0.1:${admin}`,
        '--upstream',
        `http://127.0.0.1:${upstreamPort}`,
        '--store',
        `redis://127.0.0.1:${redisPort}`,
      ]),
    );
    gateways.push({ url: `http://127.0.0.1:${port}`, admin: `http://127.0.0.1:${admin}` });
  }
  for (const g of gateways) await waitHttp(`${g.admin}/healthz`);
  const load1 = os.loadavg()[0] ?? 0;
  const results = await Promise.all(gateways.map((g) => load(g.url)));
  const scrapes = await Promise.all(
    gateways.map(async (g) => parseMetrics(await (await fetch(`${g.admin}/metrics`)).text())),
  );
  for (const p of procs) await p.stop();

  const total = scrapes.reduce((n, s) => n + (s.buckets.at(-1)?.[1] ?? 0), 0);
  const bounds = scrapes[0]!.buckets.map(([le]) => le);
  const above = bounds.map(
    (le, i) => [le, scrapes.reduce((n, s) => n + (s.buckets.at(-1)![1] - s.buckets[i]![1]), 0)] as const,
  );
  console.log(
    `${GATEWAYS} gateways × ${RATE} req/s for ${SECONDS} s, store.timeout ${values.timeout}, lease ${values.lease}; load average ${load1.toFixed(1)} → ${(os.loadavg()[0] ?? 0).toFixed(1)} on ${os.cpus().length} cores`,
  );
  console.log(
    `requests: ${results.map((r) => r.requests.total).join(' + ')}; non-2xx: ${results.map((r) => r.non2xx).join(' + ')}; store decisions: ${total}`,
  );
  console.log(
    `store timeouts per gateway: ${scrapes.map((s) => s.timeouts).join(', ')}; other store errors: ${scrapes.map((s) => JSON.stringify(s.otherErrors)).join(', ')}`,
  );
  console.log('slower than   calls   share');
  for (const [le, n] of above) {
    if (le === Infinity) continue;
    console.log(
      `${`${(le * 1000).toString()} ms`.padStart(11)} ${String(n).padStart(7)}   ${total === 0 ? '-' : `${((n / total) * 100).toFixed(3)} %`}`,
    );
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    killAll();
    process.exit(1);
  },
);
