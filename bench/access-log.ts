/**
 * @module Gateway CPU per request with the access log on (`log.requests: info`, the default) and off
 * (RATEGATE_LOG_LEVEL=warn), memory store, the bench table (two rules match an anonymous
 * `GET /api/v1/statuses/1`). The gateway's stdout is a pipe this process drains, as in a container.
 *   node --import tsx bench/access-log.ts [--cli dist/cli.js] [--cli /tmp/other/dist/cli.js] [--requests 60000] [--rounds 3]
 * Several --cli compare builds (e.g. before/after a change); rounds are interleaved, each figure is the
 * best round (least CPU per request).
 * `--callgrind`: runs each gateway under valgrind's callgrind and reports instructions per request
 * (counters zeroed after the warm-up, dumped after the measured requests): slow, but independent of
 * what else the machine is doing, which CPU time on a shared 2-core machine is not.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { cpuMsOfTree, freePort, killAll, start, waitForPort, type Proc } from './lib/procs.js';

const { values } = parseArgs({
  options: {
    cli: { type: 'string', multiple: true },
    requests: { type: 'string' },
    rounds: { type: 'string' },
    connections: { type: 'string' },
    callgrind: { type: 'boolean' },
  },
});
const CALLGRIND = values.callgrind === true;
const CG_DIR = CALLGRIND ? mkdtempSync(path.join(os.tmpdir(), 'rategate-cg-')) : '';
const CLIS = values.cli ?? ['dist/cli.js'];
const REQUESTS = Number(values.requests ?? 60_000);
const ROUNDS = Number(values.rounds ?? 3);
const CONNECTIONS = Number(values.connections ?? 32);

// A trivial upstream in this process: its CPU is not the gateway's, and it answers like a status read.
const body = JSON.stringify({ id: '1', content: 'x'.repeat(1200) });
const upstream = http.createServer((_req, res) => {
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
});
await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;

interface Variant {
  name: string;
  cli: string;
  log: boolean;
}
const variants: Variant[] = CLIS.flatMap((cli) => [
  { name: `${cli} log off`, cli, log: false },
  { name: `${cli} log on`, cli, log: true },
]);

async function startGateway(v: Variant): Promise<{ proc: Proc; url: string; lines: () => number }> {
  const port = await freePort();
  const admin = await freePort();
  const gatewayArgs = [v.cli, 'serve', '--config', 'bench/limits.bench.yaml', '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${admin}`, '--upstream', upstreamUrl, '--store', 'memory'];
  const env = { RATEGATE_LOG_LEVEL: v.log ? 'info' : 'warn' };
  const out = path.join(CG_DIR, `${variants.indexOf(v)}.cg`);
  const proc = CALLGRIND
    ? start(v.name, 'valgrind', ['--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}`, process.execPath, ...gatewayArgs], env)
    : start(v.name, process.execPath, gatewayArgs, env);
  let lines = 0;
  proc.child.stdout!.on('data', (d: Buffer) => {
    for (const b of d) if (b === 10) lines++;
  });
  await waitForPort(proc, port, CALLGRIND ? 300_000 : 30_000);
  return { proc, url: `http://127.0.0.1:${port}`, lines: () => lines };
}

function load(url: string, amount: number): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    autocannon({ url: `${url}/api/v1/statuses/1`, connections: CONNECTIONS, amount }, (err, r) => (err ? reject(err) : resolve(r)));
  });
}

/** Instructions the gateway ran for `amount` requests, from callgrind's counters. */
async function instructionsPerRequest(v: Variant, gw: Awaited<ReturnType<typeof startGateway>>, amount: number): Promise<number> {
  const ctl = (arg: string) => spawnSync('callgrind_control', [arg, String(gw.proc.pid)], { encoding: 'utf8' });
  ctl('-z');
  const r = await load(gw.url, amount);
  await new Promise((res) => setTimeout(res, 400));
  ctl('-d');
  const prefix = `${variants.indexOf(v)}.cg`;
  const dumps = readdirSync(CG_DIR).filter((f) => f.startsWith(prefix)).sort();
  const text = readFileSync(path.join(CG_DIR, dumps[dumps.length - 1]!), 'utf8');
  const total = Number(/^(?:summary|totals): (\d+)/m.exec(text)?.[1]);
  return total / r.requests.total;
}

const best = new Map<string, { usPerReq: number; rps: number; lines: number }>();
try {
  if (CALLGRIND) {
    for (const v of variants) {
      const gw = await startGateway(v);
      await load(gw.url, 2_000); // warm-up (JIT)
      const ipr = await instructionsPerRequest(v, gw, REQUESTS);
      console.log(`${v.name.padEnd(40)} ${Math.round(ipr).toString().padStart(9)} instructions/req  ${gw.lines()} log lines`);
      await gw.proc.stop('SIGTERM', 60_000);
    }
    process.exit(0);
  }
  const running = new Map<string, Awaited<ReturnType<typeof startGateway>>>();
  for (const v of variants) running.set(v.name, await startGateway(v));
  for (const v of variants) await load(running.get(v.name)!.url, 5_000); // warm-up (JIT)
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? variants : [...variants].reverse();
    for (const v of order) {
      const gw = running.get(v.name)!;
      const cpu0 = cpuMsOfTree(gw.proc.pid);
      const lines0 = gw.lines();
      const r = await load(gw.url, REQUESTS);
      await new Promise((res) => setTimeout(res, 400)); // the last buffered lines reach the pipe
      const usPerReq = ((cpuMsOfTree(gw.proc.pid) - cpu0) * 1000) / r.requests.total;
      const prev = best.get(v.name);
      if (!prev || usPerReq < prev.usPerReq) best.set(v.name, { usPerReq, rps: r.requests.average, lines: gw.lines() - lines0 });
      if (r.non2xx > 0 || r.errors > 0) throw new Error(`${v.name}: ${r.non2xx} non-2xx, ${r.errors} errors`);
    }
  }
  for (const v of variants) {
    const b = best.get(v.name)!;
    console.log(`${v.name.padEnd(40)} ${b.usPerReq.toFixed(1).padStart(6)} µs CPU/req  ${Math.round(b.rps).toString().padStart(6)} req/s  ${b.lines} log lines`);
  }
  for (const cli of CLIS) {
    const off = best.get(`${cli} log off`)!;
    const on = best.get(`${cli} log on`)!;
    console.log(`${cli}: access log costs ${(on.usPerReq - off.usPerReq).toFixed(1)} µs CPU per request`);
  }
} finally {
  killAll();
  upstream.close();
}
