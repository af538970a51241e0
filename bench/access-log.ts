/**
 * @module Gateway CPU per request with the access log on (`log.requests: info`, the default) and off
 * (`log.level: warn`), memory store, the bench table (two rules match an anonymous
 * `GET /api/v1/statuses/1`). The gateway's stdout is a pipe this process drains, as in a container.
 *   node --import tsx bench/access-log.ts [--cli dist/cli/index.js] [--cli /tmp/before/dist/cli/index.js] [--requests 8000] [--slices 12]
 * On a shared machine CPU time per request moves with the load of other processes far more than the
 * log costs, so the two are measured in ONE process per build: the log level is switched by a config
 * reload between short slices (on, off, on, off, …), every build's slices interleaved, and the figure is
 * the median of each side. Works for builds before the one log-level rule too (they applied the file's
 * level on reload).
 */
import http from 'node:http';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { cpuMsOfTree, freePort, killAll, start, waitForPort, type Proc } from './lib/procs.js';

const { values } = parseArgs({
  options: {
    cli: { type: 'string', multiple: true },
    requests: { type: 'string' },
    slices: { type: 'string' },
    connections: { type: 'string' },
  },
});
const CLIS = values.cli ?? ['dist/cli/index.js'];
const REQUESTS = Number(values.requests ?? 8_000);
const SLICES = Number(values.slices ?? 12);
const CONNECTIONS = Number(values.connections ?? 32);
const TABLE = readFileSync('bench/limits.bench.yaml', 'utf8');

// A trivial upstream in this process: its CPU is not the gateway's, and it answers like a status read.
const body = JSON.stringify({ id: '1', content: 'x'.repeat(1200) });
const upstream = http.createServer((_req, res) => {
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
});
await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;

interface Gateway {
  cli: string;
  proc: Proc;
  url: string;
  adminUrl: string;
  file: string;
  reloads: number;
  lines: () => number;
  on: number[];
  off: number[];
}

async function startGateway(cli: string): Promise<Gateway> {
  const port = await freePort();
  const admin = await freePort();
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-alog-')), 'limits.yaml');
  writeFileSync(file, `log: { level: info }\n${TABLE}`);
  const proc = start(cli, process.execPath, [
    cli,
    'serve',
    '--config',
    file,
    '--listen',
    `127.0.0.1:${port}`,
    '--admin-listen',
    `127.0.0.1:${admin}`,
    '--upstream',
    upstreamUrl,
    '--store',
    'memory',
  ]);
  let lines = 0;
  proc.child.stdout!.on('data', (d: Buffer) => {
    for (const b of d) if (b === 10) lines++;
  });
  await waitForPort(proc, port);
  return {
    cli,
    proc,
    url: `http://127.0.0.1:${port}`,
    adminUrl: `http://127.0.0.1:${admin}`,
    file,
    reloads: 0,
    lines: () => lines,
    on: [],
    off: [],
  };
}

/** Rewrites the file with the other level and waits until the gateway has reloaded it. */
async function setLog(gw: Gateway, on: boolean): Promise<void> {
  gw.reloads++;
  // The comment makes every text differ: an unchanged file is not reloaded.
  writeFileSync(gw.file, `# slice ${gw.reloads}\nlog: { level: ${on ? 'info' : 'warn'} }\n${TABLE}`);
  const want = `rategate_config_reloads_total{result="success"} ${gw.reloads}`;
  const started = Date.now();
  while (!(await (await fetch(`${gw.adminUrl}/metrics`)).text()).includes(want)) {
    if (Date.now() - started > 10_000) throw new Error(`${gw.cli}: reload not seen`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function load(url: string, amount: number): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    autocannon({ url: `${url}/api/v1/statuses/1`, connections: CONNECTIONS, amount }, (err, r) =>
      err ? reject(err) : resolve(r),
    );
  });
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

try {
  const gateways: Gateway[] = [];
  for (const cli of CLIS) gateways.push(await startGateway(cli)); // RATEGATE_LOG_LEVEL must be unset: it would win over the file
  for (const gw of gateways) await load(gw.url, 10_000); // warm-up (JIT), log on
  for (let i = 0; i < SLICES; i++) {
    const on = i % 2 === 0;
    for (const gw of i % 4 < 2 ? gateways : [...gateways].reverse()) {
      await setLog(gw, on);
      const lines0 = gw.lines();
      const cpu0 = cpuMsOfTree(gw.proc.pid);
      const r = await load(gw.url, REQUESTS);
      if (r.non2xx > 0 || r.errors > 0) throw new Error(`${gw.cli}: ${r.non2xx} non-2xx, ${r.errors} errors`);
      (on ? gw.on : gw.off).push(((cpuMsOfTree(gw.proc.pid) - cpu0) * 1000) / r.requests.total);
      await new Promise((res) => setTimeout(res, 300)); // buffered lines reach the pipe
      const lines = gw.lines() - lines0;
      if (on ? lines < r.requests.total : lines > 5)
        throw new Error(`${gw.cli}: ${lines} log lines for ${r.requests.total} requests, log ${on ? 'on' : 'off'}`);
    }
  }
  for (const gw of gateways) {
    const on = median(gw.on);
    const off = median(gw.off);
    console.log(
      `${gw.cli}: log off ${off.toFixed(1)} µs CPU/req, log on ${on.toFixed(1)} µs CPU/req: the access log costs ${(on - off).toFixed(1)} µs per request` +
        ` (medians of ${gw.on.length} + ${gw.off.length} slices of ${REQUESTS}; off ${gw.off.map((x) => x.toFixed(0)).join(' ')}; on ${gw.on.map((x) => x.toFixed(0)).join(' ')})`,
    );
  }
} finally {
  killAll();
  upstream.close();
}
