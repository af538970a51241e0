/**
 * @module Scenario edge: what speaking the edge's protocols costs rategate (memory store) on the status
 * path, every request forwarded: HTTP/1.1 plain (the load rows' baseline), HTTP/1.1 over TLS, HTTP/2
 * over TLS (ALPN h2) and h2c, all driven by h2load (one client tool for all four, so its own cost does
 * not differ between rows), as req/s and the gateway's CPU µs per request; and TLS handshakes, a fresh
 * connection per request (openssl s_time -new), as the gateway's CPU per handshake and the handshakes
 * one core would do a second. The upstream stays HTTP/1.1 throughout.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fmtInt } from '../lib/format.js';
import { cpuMsOfTree } from '../lib/procs.js';
import { BENCH_CONFIG, CONNECTIONS, DURATION, note } from '../lib/settings.js';
import { env, startGateway, stopServer, type Server } from '../lib/systems.js';
import { statusPath } from './forwarded.js';

const run = promisify(execFile);

export type EdgeRowKey = 'http1' | 'http1-tls' | 'h2-tls' | 'h2c';
export const EDGE_LABELS: Record<EdgeRowKey, string> = {
  http1: 'HTTP/1.1, plain',
  'http1-tls': 'HTTP/1.1 over TLS',
  'h2-tls': 'HTTP/2 over TLS (h2)',
  h2c: 'HTTP/2 plain (h2c)',
};

export interface EdgeRow {
  rps: number;
  /** The gateway's CPU (user + system) per request, µs. */
  cpuUsPerRequest: number;
  requests: number;
  failed: number;
}

export interface EdgeResult {
  rows: Partial<Record<EdgeRowKey, EdgeRow>>;
  /** Full TLS handshakes (a fresh connection and one request each): the gateway's CPU per handshake, and per core a second. */
  handshakes: { count: number; cpuUsPerHandshake: number; perCoreSecond: number } | null;
  streamsPerConnection: number;
}

/** A certificate for 127.0.0.1, signed by a CA made now (P-256, as the tests make theirs). */
function certificate(): { certFile: string; keyFile: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-bench-tls-'));
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const openssl = (...args: string[]): void => void execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  openssl('req', '-x509', ...key, '-keyout', 'ca.key', '-out', 'ca.crt', '-subj', '/CN=bench CA', '-days', '1');
  openssl('req', ...key, '-keyout', 'gw.key', '-out', 'gw.csr', '-subj', '/CN=127.0.0.1');
  writeFileSync(path.join(dir, 'gw.ext'), 'subjectAltName=IP:127.0.0.1\n');
  openssl(
    'x509',
    '-req',
    '-in',
    'gw.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '1',
    '-out',
    'gw.crt',
    '-extfile',
    'gw.ext',
  );
  return { certFile: path.join(dir, 'gw.crt'), keyFile: path.join(dir, 'gw.key') };
}

/** One h2load run of DURATION seconds: its counts, and the gateway's CPU over it. */
async function h2load(server: Server, scheme: 'http' | 'https', h1: boolean, streams: number): Promise<EdgeRow> {
  const url = `${scheme}://127.0.0.1:${server.port}${statusPath()}`;
  // As many requests in flight on every row (CONNECTIONS): HTTP/2 on CONNECTIONS / streams connections.
  const connections = h1 ? CONNECTIONS : Math.max(1, Math.round(CONNECTIONS / streams));
  const args = [
    '-D',
    String(DURATION),
    '--warm-up-time',
    '1',
    '-c',
    String(connections),
    '-m',
    String(h1 ? 1 : streams),
    '-H',
    `authorization: Bearer ${env.fx.userToken}`,
  ];
  if (h1) args.push('--h1');
  // Untimed first: the row's code paths (TLS, node:http2) compiled and warm before the gateway's CPU is read.
  await run('h2load', ['-n', '3000', ...args.slice(4), url], { maxBuffer: 1 << 20 });
  const before = { cpu: cpuMsOfTree(server.proc.pid), at: Date.now() };
  const { stdout } = await run('h2load', [...args, url], { maxBuffer: 1 << 20 });
  const cpuMs = cpuMsOfTree(server.proc.pid) - before.cpu;
  const done = /requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed/.exec(stdout);
  const rps = /finished in [\d.]+s, ([\d.]+) req\/s/.exec(stdout);
  if (done === null || rps === null) throw new Error(`h2load said: ${stdout.slice(-400)}`);
  if (Number(done[3]) > 0) note(`edge, ${url}: ${/status codes: .*/.exec(stdout)?.[0] ?? 'failures'}`);
  // The warm-up second is the gateway's CPU too: spread over the requests of the whole run.
  const requests = Number(done[1]) + Math.round(Number(rps[1]));
  return {
    rps: Number(rps[1]),
    cpuUsPerRequest: (cpuMs * 1000) / requests,
    requests: Number(done[1]),
    failed: Number(done[3]),
  };
}

/** Fresh TLS connections, each with one request, for DURATION seconds (openssl s_time -new). */
async function handshakes(server: Server): Promise<EdgeResult['handshakes']> {
  const before = cpuMsOfTree(server.proc.pid);
  const { stdout } = await run(
    'openssl',
    ['s_time', '-connect', `127.0.0.1:${server.port}`, '-new', '-time', String(DURATION), '-www', statusPath()],
    {
      maxBuffer: 1 << 20,
    },
  );
  const cpuMs = cpuMsOfTree(server.proc.pid) - before;
  const m = /(\d+) connections in [\d.]+s/.exec(stdout);
  if (m === null) throw new Error(`openssl s_time said: ${stdout.slice(-300)}`);
  const count = Number(m[1]);
  const us = (cpuMs * 1000) / count;
  return { count, cpuUsPerHandshake: us, perCoreSecond: 1e6 / us };
}

export async function benchEdge(): Promise<EdgeResult | null> {
  for (const [tool, arg] of [
    ['h2load', '--version'],
    ['openssl', 'version'],
  ] as const) {
    if (spawnSync(tool, [arg]).status === 0) continue;
    note(`edge rows skipped: ${tool} is not installed (apt-get install nghttp2-client openssl)`);
    return null;
  }
  const streams = 8;
  const { certFile, keyFile } = certificate();
  const tlsConfig = path.join(path.dirname(certFile), 'limits.yaml');
  writeFileSync(
    tlsConfig,
    `${readFileSync(BENCH_CONFIG, 'utf8')}\nserver:\n  tls: { certFile: ${certFile}, keyFile: ${keyFile} }\n`,
  );
  const result: EdgeResult = { rows: {}, handshakes: null, streamsPerConnection: streams };
  process.stdout.write(
    `\nedge (rategate memory, ${CONNECTIONS} requests in flight: HTTP/2 as ${streams} streams on each connection; h2load):\n`,
  );
  const plain = await startGateway('rategate-edge-plain', BENCH_CONFIG, 'memory');
  const secure = await startGateway('rategate-edge-tls', tlsConfig, 'memory');
  try {
    const plan: Array<[EdgeRowKey, Server, 'http' | 'https', boolean]> = [
      ['http1', plain, 'http', true],
      ['h2c', plain, 'http', false],
      ['http1-tls', secure, 'https', true],
      ['h2-tls', secure, 'https', false],
    ];
    for (const [key, server, scheme, h1] of plan) {
      process.stdout.write(`  ${EDGE_LABELS[key].padEnd(24)}`);
      try {
        const row = await h2load(server, scheme, h1, streams);
        result.rows[key] = row;
        process.stdout.write(
          `${fmtInt(row.rps).padStart(7)} req/s (${row.cpuUsPerRequest.toFixed(1)} µs CPU/req)${row.failed > 0 ? `, ${row.failed} failed` : ''}\n`,
        );
      } catch (err) {
        process.stdout.write('\n');
        note(`edge, ${EDGE_LABELS[key]}: ${(err as Error).message.slice(0, 300)}`);
      }
    }
    process.stdout.write(`  ${'TLS handshakes'.padEnd(24)}`);
    try {
      result.handshakes = await handshakes(secure);
      const h = result.handshakes!;
      process.stdout.write(
        `${fmtInt(h.count)} in ${DURATION} s: ${h.cpuUsPerHandshake.toFixed(0)} µs CPU each, ${fmtInt(h.perCoreSecond)} a second per core\n`,
      );
    } catch (err) {
      process.stdout.write('\n');
      note(`edge, TLS handshakes: ${(err as Error).message.slice(0, 300)}`);
    }
  } finally {
    await stopServer(plain);
    await stopServer(secure);
  }
  return result;
}
