/**
 * @module Bytes per distinct client, and per bucket, held by the real gateway process (`rategate serve`,
 * memory store, config/examples/mastodon.yaml) for N clients each from its own IPv6 /64 (default 40 000).
 *
 *   node --import tsx bench/memory-gateway.ts [N]      (or '{"clients":N}', from run.ts)
 *
 * Each client sends `GET /api/v1/timelines/public` and `POST /api/v1/accounts` (no token: the
 * `unauthenticated-api` and `api-sign-up` buckets, two per client), over keep-alive connections through
 * X-Forwarded-For from loopback (trusted by the table). The gateway runs with --expose-gc and
 * bench/lib/gc-probe.mjs: full GCs before each sample. Warm-up: 5 000 clients of their own first, then the
 * baseline; the growth over it divided by N (and by the buckets added, from rategate_store_keys) is
 * the figure. Also printed: RSS of the process just started (the baseline store.maxKeys's default
 * subtracts). Prints one JSON line last (for bench/run.ts).
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const json = process.argv[2]?.startsWith('{') ? (JSON.parse(process.argv[2]) as { clients?: number }) : {};
const N = json.clients ?? Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 40_000);
const WARM = 5_000;
const IN_FLIGHT = 32;

interface Sample {
  rss: number;
  heap: number;
  keys: number;
}

const upstream = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => res.end('{}'));
});
await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

const child = spawn(
  process.execPath,
  [
    '--expose-gc',
    '--import',
    'tsx',
    '--import',
    './bench/lib/gc-probe.mjs',
    'src/cli/index.ts',
    'serve',
    '--listen',
    '127.0.0.1:0',
    '--admin-listen',
    '127.0.0.1:0',
    '--config',
    'config/examples/mastodon.yaml',
    '--upstream',
    upstreamUrl,
  ],
  { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RATEGATE_LOG_LEVEL: 'warn' } },
);
let out = '';
child.stdout.on('data', (d) => (out += d));
child.stderr.on('data', (d) => (out += d));
const { url, admin } = await new Promise<{ url: string; admin: string }>((resolve, reject) => {
  const t = setInterval(() => {
    const m = /"listen":"([^"]+)","admin":"([^"]+)"/.exec(out);
    if (m) {
      clearInterval(t);
      resolve({ url: m[1]!, admin: m[2]! });
    } else if (child.exitCode !== null) reject(new Error(out));
  }, 50);
});
const agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT });

function request(method: string, path: string, i: number): Promise<void> {
  const ip = `2001:db8:${(i >>> 16).toString(16)}:${(i & 0xffff).toString(16)}::1`;
  return new Promise((resolve, reject) => {
    const r = http.request(
      `${url}${path}`,
      { method, agent, headers: { 'X-Forwarded-For': ip, 'Content-Length': 0 } },
      (res) => {
        res.resume();
        res.on('end', () => resolve());
      },
    );
    r.on('error', reject);
    r.end();
  });
}

async function clients(from: number, n: number): Promise<void> {
  let next = from;
  const worker = async (): Promise<void> => {
    while (next < from + n) {
      const i = next++;
      await request('GET', '/api/v1/timelines/public', i);
      await request('POST', '/api/v1/accounts', i);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}

async function sample(): Promise<Sample> {
  const at = out.length;
  child.kill('SIGUSR2');
  while (!/gc-probe \{.*\}\n/.test(out.slice(at))) await new Promise((r) => setTimeout(r, 20));
  const m = JSON.parse(/gc-probe (\{.*\})\n/.exec(out.slice(at))![1]!) as { rss: number; heap: number };
  const metrics = await (await fetch(`${admin}/metrics`)).text();
  return { ...m, keys: Number(/^rategate_store_keys (\d+)/m.exec(metrics)![1]) };
}

const started = await sample();
await clients(0, WARM);
const before = await sample();
await clients(WARM, N);
const after = await sample();
child.kill('SIGTERM');
await new Promise((r) => child.once('exit', r));
agent.destroy();
upstream.close();

const buckets = after.keys - before.keys;
const mb = (b: number): string => (b / 2 ** 20).toFixed(1);
const result = {
  clients: N,
  bucketsPerClient: +(buckets / N).toFixed(2),
  startRssBytes: started.rss,
  rssBytesPerClient: Math.round((after.rss - before.rss) / N),
  rssBytesPerBucket: Math.round((after.rss - before.rss) / buckets),
  heapBytesPerBucket: Math.round((after.heap - before.heap) / buckets),
};
console.log(
  `started: RSS ${mb(started.rss)} MB; after ${WARM} warm-up clients: RSS ${mb(before.rss)} MB, heap + external ${mb(before.heap)} MB, ${before.keys} buckets`,
);
console.log(
  `after ${N} more clients (/64 each): RSS ${mb(after.rss)} MB, heap + external ${mb(after.heap)} MB, ${after.keys} buckets (${result.bucketsPerClient} per client)`,
);
console.log(
  `per client ${result.rssBytesPerClient} B RSS; per bucket ${result.rssBytesPerBucket} B RSS, ${result.heapBytesPerBucket} B heap + external`,
);
console.log(JSON.stringify(result));
