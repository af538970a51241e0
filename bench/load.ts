/**
 * @module Fixed-concurrency load (run as a child process by run.ts, so the load generator never shares
 * an event loop with a server under test).
 *
 *   node --import tsx bench/load.ts '<json spec>'
 * Spec: { port, path, headers?, connections, durationSec, warmupSec?, mix? }. Prints one JSON line:
 * { requests, rps, p50, p90, p99, max, statuses, errors, timeouts, loadGeneratorCpuMs }, latencies in ms.
 *
 * Without `mix`: autocannon's programmatic API, latencies recorded per response (not from autocannon's
 * whole-millisecond histogram).
 *
 * With `mix` (the seed traffic): requests cycle through a fixed 20-request pattern, each with a client
 * IP from a pool via X-Forwarded-For, on a small closed-loop raw-socket client instead of autocannon.
 * Reason: a gateway closes the connection after a 429 to a request with a body, and autocannon 8 then
 * reconnects without dropping the request it had in flight from its queue, so every later latency on
 * that connection is measured from an older request (p50 of ~180 ms where the truth is ~10 ms). This
 * client honours `Connection: close` and reconnects cleanly.
 */
import net from 'node:net';
import autocannon from 'autocannon';
import { percentile, ResponseParser } from './lib/raw-http.js';

export interface MixSpec {
  statusId: string;
  /** An app token (client_credentials): sign-ups. */
  appToken: string;
  /** User tokens: reads with an account, media uploads, deletes. */
  userTokens: string[];
  /** A username (and its e-mail) that exists: sign-ups are refused 422 before the upstream hashes anything. */
  takenUsername: string;
  /** Distinct client IPs (X-Forwarded-For) the requests are spread over. */
  ipPool: number;
}

export interface LoadSpec {
  host?: string;
  port: number;
  path: string;
  method?: string;
  headers?: Record<string, string>;
  connections: number;
  durationSec: number;
  warmupSec?: number;
  mix?: MixSpec;
}

type Req = { method: string; path: string; headers: Record<string, string>; body?: string | Buffer };

/** A 1×1 PNG: the upstream sniffs it as an image. */
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
    '1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082',
  'hex',
);

function clientIp(n: number): string {
  // Public-looking addresses (not loopback/private, which the gateway trusts as proxies).
  return `${30 + ((n >>> 16) & 63)}.${(n >>> 8) & 255}.${n & 255}.7`;
}

/** The seed traffic: 20 requests, cycled. 12 anonymous reads, 3 reads with an account, 1 sign-up, 2 media uploads, 2 deletes. */
function seedRequests(mix: MixSpec): Req[] {
  const boundary = 'rategatebench';
  const multipart = Buffer.concat([
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="description"\r\n\r\nbench\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="p.png"\r\nContent-Type: image/png\r\n\r\n`,
    ),
    PNG,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  const read: Req = { method: 'GET', path: `/api/v1/statuses/${mix.statusId}`, headers: {} };
  const readAuth: Req = { method: 'GET', path: `/api/v1/statuses/${mix.statusId}`, headers: { authorization: 'USER' } };
  const form = new URLSearchParams({
    username: mix.takenUsername,
    email: `${mix.takenUsername}@example.com`,
    password: 'password123',
    agreement: 'true',
    locale: 'en',
  }).toString();
  const signUp: Req = {
    method: 'POST',
    path: '/api/v1/accounts',
    headers: { authorization: `Bearer ${mix.appToken}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: form,
  };
  const upload: Req = {
    method: 'POST',
    path: '/api/v1/media',
    headers: { authorization: 'USER', 'content-type': `multipart/form-data; boundary=${boundary}` },
    body: multipart,
  };
  // An id that does not exist: the upstream answers 404 (deletion is still counted by the gateway).
  const del: Req = { method: 'DELETE', path: '/api/v1/statuses/999999999', headers: { authorization: 'USER' } };
  const r = read;
  return [r, r, readAuth, r, upload, r, r, signUp, r, readAuth, r, del, r, r, upload, r, readAuth, r, del, r];
}

/**
 * One autocannon run of `amount` requests. A count, not a duration: a duration-bound run ends by
 * destroying its connections with requests still in flight, which is a burst of client aborts at
 * the end of every run; a count-bound connection stops after its last answer.
 */
function run(
  spec: LoadSpec,
  amount: number,
  record: boolean,
): Promise<{ result: autocannon.Result; latencies: number[]; seconds: number }> {
  const latencies: number[] = [];
  const opts: autocannon.Options = {
    // The path goes in the URL: autocannon ignores a top-level `path` option.
    url: `http://${spec.host ?? '127.0.0.1'}:${spec.port}${spec.path}`,
    connections: spec.connections,
    amount,
    pipelining: 1,
    method: (spec.method ?? 'GET') as 'GET',
    headers: spec.headers ?? {},
    timeout: 10,
  };
  const started = performance.now();
  let last = started;
  return new Promise((resolve, reject) => {
    // Elapsed time ends at the last answer: autocannon reports a count-bound run as finished only at
    // its next 1-second tick, which would understate the rate by up to a second's worth.
    const instance = autocannon(opts, (err, result) =>
      err ? reject(err) : resolve({ result, latencies, seconds: (last - started) / 1000 }),
    );
    instance.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => {
      last = performance.now();
      if (record) latencies.push(ms);
    });
  });
}

interface Outcome {
  latencies: number[];
  statuses: Record<string, number>;
  errors: number;
  timeouts: number;
  /** Wall time of the measured phase. */
  seconds: number;
}

/** Serialized seed-traffic requests, built on demand (fresh client IP and token each). */
function mixedRequestSource(spec: LoadSpec): () => Buffer {
  const mix = spec.mix!;
  const templates = seedRequests(mix);
  const hostHeader = `${spec.host ?? '127.0.0.1'}:${spec.port}`;
  let i = 0;
  let n = Math.floor(Math.random() * mix.ipPool);
  let t = 0;
  return () => {
    const tpl = templates[i++ % templates.length]!;
    n = (n + 7919) % mix.ipPool;
    let head = `${tpl.method} ${tpl.path} HTTP/1.1\r\nHost: ${hostHeader}\r\nX-Forwarded-For: ${clientIp(n)}\r\n`;
    for (const [k, v] of Object.entries(tpl.headers)) {
      head += `${k}: ${v === 'USER' ? `Bearer ${mix.userTokens[t++ % mix.userTokens.length]}` : v}\r\n`;
    }
    if (tpl.body === undefined) return Buffer.from(`${head}\r\n`);
    const body = typeof tpl.body === 'string' ? Buffer.from(tpl.body) : tpl.body;
    return Buffer.concat([Buffer.from(`${head}Content-Length: ${body.length}\r\n\r\n`), body]);
  };
}

/** Closed loop: each connection sends one request, waits for its answer, sends the next; reconnects on close. */
function runRaw(spec: LoadSpec, durationSec: number, next: () => Buffer): Promise<Outcome> {
  const out: Outcome = { latencies: [], statuses: {}, errors: 0, timeouts: 0, seconds: 0 };
  const started = performance.now();
  const until = started + durationSec * 1000;
  const conn = (): Promise<void> =>
    new Promise((resolve) => {
      let sentAt = 0;
      let waiting = false;
      let closing = false;
      const socket = net.connect({ host: spec.host ?? '127.0.0.1', port: spec.port, noDelay: true });
      const send = (): void => {
        if (performance.now() >= until) {
          socket.destroy();
          return;
        }
        sentAt = performance.now();
        waiting = true;
        socket.write(next());
      };
      const parser = new ResponseParser((status, close) => {
        waiting = false;
        out.latencies.push(performance.now() - sentAt);
        out.statuses[status] = (out.statuses[status] ?? 0) + 1;
        if (close) {
          closing = true;
          socket.destroy();
        } else send();
      });
      socket.on('data', (d) => parser.push(d));
      socket.once('connect', send);
      socket.on('error', () => {});
      socket.once('close', () => {
        if (waiting && !closing) out.errors++;
        resolve();
      });
    });
  const loop = async (): Promise<void> => {
    while (performance.now() < until) await conn();
  };
  return Promise.all(Array.from({ length: spec.connections }, loop)).then(() => {
    out.seconds = (performance.now() - started) / 1000;
    return out;
  });
}

/** Highest rate seen so far (warm-up included): sizes the next run to last about the time left. */
let rate = 0;

async function viaAutocannon(spec: LoadSpec, durationSec: number, record: boolean): Promise<Outcome> {
  const out: Outcome = { latencies: [], statuses: {}, errors: 0, timeouts: 0, seconds: 0 };
  const started = performance.now();
  // Warm-up: chunks of 200 requests per connection until the time is up. Measured phase: runs sized
  // from the rate seen so far, until 90 % of the time is used (usually one run, two when the guess was low).
  do {
    // Time left in load-seconds (autocannon's idle wait for its tick after each run does not count).
    const left = durationSec - out.seconds;
    const amount =
      record && rate > 0 ? Math.max(spec.connections * 100, Math.round(rate * left)) : spec.connections * 200;
    const { result, latencies, seconds } = await run(spec, amount, record);
    rate = Math.max(rate, result.requests.total / seconds);
    for (const l of latencies) out.latencies.push(l);
    for (const [code, v] of Object.entries(result.statusCodeStats ?? {}))
      out.statuses[code] = (out.statuses[code] ?? 0) + v.count;
    out.errors += result.errors;
    out.timeouts += result.timeouts;
    out.seconds += seconds;
  } while (record ? out.seconds < 0.9 * durationSec : performance.now() < started + durationSec * 1000);
  return out;
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as LoadSpec;
  const once = (seconds: number, record: boolean): Promise<Outcome> =>
    spec.mix !== undefined ? runRaw(spec, seconds, mixedRequestSource(spec)) : viaAutocannon(spec, seconds, record);
  if ((spec.warmupSec ?? 0) > 0) await once(spec.warmupSec!, false);
  // run.ts snapshots Redis command counts on this line, so only the measured phase is counted.
  process.stderr.write('MEASURE\n');
  const cpu0 = process.cpuUsage();
  const result = await once(spec.durationSec, true);
  const cpu = process.cpuUsage(cpu0);
  // run.ts reads the servers' CPU time on MEASURE and on this line: the measured phase only.
  process.stderr.write('MEASURED\n');
  const { latencies, statuses } = result;
  const sorted = Float64Array.from(latencies).sort();
  const completed = latencies.length;
  process.stdout.write(
    `${JSON.stringify({
      requests: completed,
      rps: completed / result.seconds,
      seconds: result.seconds,
      p50: percentile(sorted, 50),
      p90: percentile(sorted, 90),
      p99: percentile(sorted, 99),
      max: sorted.length ? sorted[sorted.length - 1] : NaN,
      statuses,
      errors: result.errors,
      timeouts: result.timeouts,
      loadGeneratorCpuMs: (cpu.user + cpu.system) / 1000,
    })}\n`,
  );
}

main().catch((err: unknown) => {
  process.stdout.write(`${JSON.stringify({ error: String(err) })}\n`);
  process.exit(1);
});
