/**
 * Writes one day of a Mastodon instance's nginx access log (`combined`) for `rategate replay`: ordinary
 * traffic from many addresses, a flood on the public timeline from one address (03:00–03:30), a sign-up
 * wave from a /24 (14:00–14:30), and a few bad lines. Deterministic (a seeded generator), in time order.
 *
 *   npx tsx scripts/gen-access-log.ts [--lines 1200000] [--out day.log|day.log.gz] [--seed 1]
 */
import { createWriteStream } from 'node:fs';
import { parseArgs } from 'node:util';
import { createGzip } from 'node:zlib';
import type { Writable } from 'node:stream';

const DAY = Date.UTC(2026, 10, 21);
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
export const FLOOD_IP = '203.0.113.50';
export const WAVE_NET = '198.51.100.';
/** Ordinary clients: a busy instance's day (each sends ~60 requests at 1.2M lines). */
const CLIENTS = 20_000;
const UA = '"Mozilla/5.0 (X11; Linux x86_64) Firefox/132.0"';

/** mulberry32: small, seeded, good enough to spread traffic. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pad = (n: number) => String(n).padStart(2, '0');
function timeLocal(ms: number): string {
  const d = new Date(ms);
  return `${pad(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} +0000`;
}

const line = (ip: string, ms: number, req: string, status: number) =>
  `${ip} - - [${timeLocal(ms)}] "${req} HTTP/1.1" ${status} 1234 "-" ${UA}\n`;

const ORDINARY: readonly [number, string][] = [
  [30, 'GET /api/v1/timelines/home'],
  [15, 'GET /api/v1/notifications'],
  [15, 'GET /api/v1/statuses/%'],
  [8, 'GET /api/v1/timelines/public?local=true'],
  [5, 'POST /api/v1/statuses'],
  [3, 'POST /api/v1/statuses/%/favourite'],
  [2, 'DELETE /api/v1/statuses/%'],
  [1, 'POST /api/v2/media'],
  [10, 'GET /@alice/%'],
  [8, 'GET /packs/js/app-%.js'],
  [3, 'GET /api/v2/search?q=cats'],
];
const WEIGHT = ORDINARY.reduce((s, [w]) => s + w, 0);

function ordinary(rand: () => number): string {
  let pick = rand() * WEIGHT;
  for (const [w, req] of ORDINARY)
    if ((pick -= w) < 0) return req.replace('%', String(100000 + Math.floor(rand() * 900000)));
  return ORDINARY[0]![1];
}

/** The lines of one second of the day, ordinary traffic first. */
function second(s: number, perSecond: number, rand: () => number): string {
  const ms = DAY + s * 1000;
  let out = '';
  const count = Math.floor(perSecond) + (rand() < perSecond % 1 ? 1 : 0);
  for (let i = 0; i < count; i++) {
    const client = Math.floor(rand() * CLIENTS);
    const ip = `10.${client >> 16}.${(client >> 8) & 255}.${client & 255}`;
    out += line(ip, ms, ordinary(rand), 200);
  }
  if (s >= 3 * 3600 && s < 3.5 * 3600)
    for (let i = 0; i < 3; i++) out += line(FLOOD_IP, ms, 'GET /api/v1/timelines/public', 200);
  if (s >= 14 * 3600 && s < 14.5 * 3600 && rand() < 0.4) {
    out += line(`${WAVE_NET}${1 + Math.floor(rand() * 60)}`, ms, 'POST /api/v1/accounts', 200);
  }
  if (s % 21_600 === 7) out += `${'\u0016\u0003\u0001'} garbage from a TLS client on the plain port\n`;
  return out;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { lines: { type: 'string' }, out: { type: 'string' }, seed: { type: 'string' } },
  });
  const total = Number(values.lines ?? 1_200_000);
  const rand = rng(Number(values.seed ?? 1));
  const extra = 1800 * 3 + 1800 * 0.4; // the flood's and the wave's lines
  const perSecond = Math.max(0, (total - extra) / 86_400);
  let out: Writable = process.stdout;
  if (values.out !== undefined) {
    const file = createWriteStream(values.out);
    if (values.out.endsWith('.gz')) {
      const gz = createGzip();
      gz.pipe(file);
      out = gz;
    } else out = file;
  }
  let buf = '';
  for (let s = 0; s < 86_400; s++) {
    buf += second(s, perSecond, rand);
    if (buf.length > 1 << 20) {
      if (!out.write(buf)) await new Promise((r) => out.once('drain', r));
      buf = '';
    }
  }
  out.end(buf);
  await new Promise((r) => (out === process.stdout ? r(null) : out.once('finish', r)));
}

await main();
