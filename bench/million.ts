/**
 * @module N requests from N distinct clients (X-Forwarded-For) as fast as a raw-socket pipelined client
 * can send them (run as a child process by run.ts, which watches the gateway's memory meanwhile).
 *
 *   node --import tsx bench/million.ts '{"port":8080,"path":"/api/v1/statuses/1","n":1000000}'
 * Each of `connections` keep-alive sockets keeps `depth` requests in flight (HTTP/1.1 pipelining).
 * Client i is `a.b.c.9` with a = 40 + (i >> 16): public-looking, so a gateway that trusts loopback and
 * private ranges as proxies takes it as the client. Prints one JSON line: { n, seconds, rps, statuses, errors }.
 * With `durationSec`, no request is sent after that many seconds (`n` may then be left out): a flood of a
 * fixed length (scenarios/flood.ts); `n` in the output is what was answered.
 */
import net from 'node:net';
import { ResponseParser } from './lib/raw-http.js';

interface Spec {
  host?: string;
  port: number;
  path: string;
  /** Requests to send (default: no bound, with `durationSec`). */
  n?: number;
  /** Stop sending after this many seconds (in-flight requests are still answered). */
  durationSec?: number;
  offset?: number;
  /** Distinct clients to cycle through (default n: every request from a new client). */
  clients?: number;
  connections?: number;
  depth?: number;
  headers?: Record<string, string>;
}

const spec = JSON.parse(process.argv[2] ?? '{}') as Spec;
const host = spec.host ?? '127.0.0.1';
const offset = spec.offset ?? 0;
const total = spec.n ?? Number.MAX_SAFE_INTEGER;
const clients = spec.clients ?? total;
const started = performance.now();
const until = spec.durationSec === undefined ? Infinity : started + spec.durationSec * 1000;
let extra = '';
for (const [k, v] of Object.entries(spec.headers ?? {})) extra += `${k}: ${v}\r\n`;
const prefix = `GET ${spec.path} HTTP/1.1\r\nHost: ${host}:${spec.port}\r\n${extra}X-Forwarded-For: `;

function request(i: number): string {
  const k = (i % clients) + offset;
  return `${prefix}${40 + (k >>> 16)}.${(k >>> 8) & 255}.${k & 255}.9\r\n\r\n`;
}

let next = 0;
let done = 0;
let errors = 0;
const statuses: Record<string, number> = {};

function connection(depth: number): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port: spec.port, noDelay: true });
    let inFlight = 0;
    const fill = (): void => {
      let batch = '';
      // One clock read a batch: a request may be sent up to one batch past `until`.
      const more = performance.now() < until;
      while (more && inFlight < depth && next < total) {
        batch += request(next++);
        inFlight++;
      }
      if (batch !== '') socket.write(batch);
      else if (inFlight === 0) {
        socket.end();
        resolve();
      }
    };
    let pending = 0;
    const parser = new ResponseParser((status) => {
      statuses[status] = (statuses[status] ?? 0) + 1;
      inFlight--;
      done++;
      pending++;
    });
    socket.on('data', (d) => {
      pending = 0;
      parser.push(d);
      // Refill once per chunk, not per response: fewer, larger writes.
      if (pending > 0) fill();
    });
    socket.once('connect', fill);
    socket.on('error', () => {
      errors++;
      resolve();
    });
    socket.on('close', () => resolve());
  });
}

async function main(): Promise<void> {
  const progress = setInterval(
    () =>
      process.stderr.write(
        `  … ${done.toLocaleString('en')}${spec.n === undefined ? '' : ` / ${spec.n.toLocaleString('en')}`}\n`,
      ),
    15_000,
  );
  const all = Promise.all(Array.from({ length: spec.connections ?? 32 }, () => connection(spec.depth ?? 16)));
  // A fixed-length run tells its parent when it is sending (scenarios/flood.ts starts its other client then).
  if (spec.durationSec !== undefined) process.stderr.write('SENDING\n');
  await all;
  clearInterval(progress);
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(`${JSON.stringify({ n: done, seconds, rps: done / seconds, statuses, errors })}\n`);
}

main().catch((err: unknown) => {
  process.stdout.write(`${JSON.stringify({ error: String(err) })}\n`);
  process.exit(1);
});
