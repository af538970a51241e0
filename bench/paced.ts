/**
 * @module Open-loop fixed-rate load for latency (run as a child process by run.ts).
 *
 * autocannon's `overallRate` is not a steady rate: each connection sends its per-second budget back to
 * back at the start of every second and then idles, so its latencies are those of a burst at full
 * concurrency. This client instead sends request k at start + k/rate (checked every timer tick, ~1 ms),
 * each on an idle keep-alive connection of a fixed pool (one request in flight per connection). Latency
 * runs from the tick that found the request due to its last response byte; a request that finds no idle
 * connection waits in a queue and that wait counts (no coordinated omission).
 *
 *   node --import tsx bench/paced.ts '{"port":8080,"path":"/","rate":2000,"durationSec":10}'
 * Prints one JSON line: { sent, completed, achievedRate, p50, p90, p99, p999, max, statuses, errors }.
 */
import net from 'node:net';
import { percentile, rawRequest, ResponseParser } from './lib/raw-http.js';

interface Spec {
  host?: string;
  port: number;
  path: string;
  method?: string;
  headers?: Record<string, string>;
  rate: number;
  durationSec: number;
  warmupSec?: number;
  connections?: number;
}

const spec = JSON.parse(process.argv[2] ?? '{}') as Spec;
const host = spec.host ?? '127.0.0.1';
const payload = Buffer.from(rawRequest(spec.method ?? 'GET', spec.path, `${host}:${spec.port}`, spec.headers ?? {}));

interface Conn {
  socket: net.Socket;
  busy: boolean;
  dueAt: number;
  measured: boolean;
}

const idle: Conn[] = [];
const queue: Array<{ dueAt: number; measured: boolean }> = [];
const latencies: number[] = [];
const statuses: Record<string, number> = {};
let errors = 0;
let completed = 0;

function send(c: Conn, dueAt: number, measured: boolean): void {
  c.busy = true;
  c.dueAt = dueAt;
  c.measured = measured;
  c.socket.write(payload);
}

function open(): Promise<Conn> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port: spec.port, noDelay: true });
    const c: Conn = { socket, busy: false, dueAt: 0, measured: false };
    const parser = new ResponseParser((status) => {
      const now = performance.now();
      if (c.measured) {
        latencies.push(now - c.dueAt);
        statuses[status] = (statuses[status] ?? 0) + 1;
        completed++;
      }
      c.busy = false;
      const next = queue.shift();
      if (next !== undefined) send(c, next.dueAt, next.measured);
      else idle.push(c);
    });
    socket.on('data', (d) => parser.push(d));
    socket.once('connect', () => resolve(c));
    socket.on('error', (err) => {
      errors++;
      reject(err);
    });
    socket.on('close', () => {
      const i = idle.indexOf(c);
      if (i >= 0) idle.splice(i, 1);
    });
  });
}

async function main(): Promise<void> {
  const conns = await Promise.all(Array.from({ length: spec.connections ?? 64 }, open));
  idle.push(...conns);
  const warmupMs = (spec.warmupSec ?? 1) * 1000;
  const totalMs = warmupMs + spec.durationSec * 1000;
  const start = performance.now();
  let issued = 0;
  let sentMeasured = 0;
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const now = performance.now();
      const elapsed = now - start;
      if (elapsed >= totalMs) return resolve();
      const due = Math.floor((elapsed * spec.rate) / 1000);
      while (issued < due) {
        const measured = issued * (1000 / spec.rate) >= warmupMs;
        if (measured) sentMeasured++;
        issued++;
        const c = idle.pop();
        if (c !== undefined) send(c, now, measured);
        else queue.push({ dueAt: now, measured });
      }
      setTimeout(tick, 1);
    };
    tick();
  });
  // Let in-flight requests finish (bounded).
  const waitUntil = performance.now() + 5000;
  while ((queue.length > 0 || conns.some((c) => c.busy)) && performance.now() < waitUntil) {
    await new Promise((r) => setTimeout(r, 5));
  }
  for (const c of conns) c.socket.destroy();
  const sorted = Float64Array.from(latencies).sort();
  const out = {
    sent: sentMeasured,
    completed,
    targetRate: spec.rate,
    achievedRate: completed / spec.durationSec,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    p999: percentile(sorted, 99.9),
    max: sorted.length ? sorted[sorted.length - 1] : NaN,
    statuses,
    errors,
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().catch((err: unknown) => {
  process.stdout.write(`${JSON.stringify({ error: String(err) })}\n`);
  process.exit(1);
});
