/**
 * @module `npm run bench` settings: the command line, the systems under test, and the results every scenario fills in.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { SystemResult } from './types.js';

export const { values: argv } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    duration: { type: 'string' },
    connections: { type: 'string' },
    rate: { type: 'string' },
    clients: { type: 'string' },
    rounds: { type: 'string' },
    render: { type: 'string' },
    only: { type: 'string' },
    skip: { type: 'string' },
    instructions: { type: 'boolean', default: false },
    'instr-runs': { type: 'string' },
    // Where the instructions scenario keeps its dumps (default bench/.build/callgrind): another build's runs beside the first's.
    'instr-dir': { type: 'string' },
    cli: { type: 'string' },
    // --replay: only `rategate replay`'s lines/s (bench/replay.ts), --lines of generated log.
    replay: { type: 'boolean', default: false },
    lines: { type: 'string' },
    // bench/refusal-cpu.ts: refused requests per system and round (it reads --rounds and --cli too).
    requests: { type: 'string' },
    // bench/refusal-cpu.ts: processes per system (the figure is the median over all their rounds).
    procs: { type: 'string' },
    // bench/refusal-cpu.ts: every answering process on CPU 0, everything else (load, Redis, upstream) on CPU 1.
    pin: { type: 'boolean', default: false },
  },
  strict: true,
});
export const QUICK = argv.quick === true;
export const DURATION = Number(argv.duration ?? (QUICK ? 2 : 5));
/** Rounds over all systems (interleaved); each figure is the best round's, which damps noise from other processes. */
export const ROUNDS = Number(argv.rounds ?? (QUICK ? 1 : 2));
export const WARMUP = QUICK ? 1 : 2;
export const CONNECTIONS = Number(argv.connections ?? 32);
export const RATE = Number(argv.rate ?? 2000);
export const CLIENTS = Number(argv.clients ?? (QUICK ? 100_000 : 1_000_000));
/** Distinct clients of the many-client scenario, each sending MANY_CLIENTS_EACH requests (spread: client i % N). */
export const MANY_CLIENTS = Number(argv.clients ?? 100_000);
export const MANY_CLIENTS_EACH = 3;
/** Callgrind runs per system (a fresh process each) of the instructions scenario. */
export const INSTR_RUNS = Math.max(1, Number(argv['instr-runs'] ?? 3));
export const INSTR_DIR = argv['instr-dir'] ?? path.join('bench', '.build', 'callgrind');
export const PROFILE_SEC = QUICK ? 3 : 8;
export const ONLY = argv.only ? new Set(argv.only.split(',')) : null;
export const SKIP = new Set((argv.skip ?? (QUICK ? 'profile,instructions' : '')).split(',').filter(Boolean));
if (argv.instructions === true) SKIP.delete('instructions');

export const BUILD = path.join('bench', '.build', 'dist');
export const RESULTS = path.join('bench', 'results');
export const BENCH_CONFIG = 'bench/limits.bench.yaml';
export const PROFILE_MARKER = '<!-- hand-written from here on: kept when the bench rewrites the profiles above -->';
export const SEED_CONFIG = 'config/limits.yaml';

export type SystemKey =
  | 'direct'
  | 'thin'
  | 'nginx'
  | 'haproxy'
  | 'fastify'
  | 'rategate-memory'
  | 'rategate-memory-log'
  | 'rategate-memory-deferred'
  | 'rategate-redis'
  | 'rategate-redis-unix';
export const LABELS: Record<SystemKey, string> = {
  direct: 'upstream (direct)',
  thin: 'thin forwarder',
  nginx: 'nginx limit_req (1 worker)',
  haproxy: 'HAProxy stick-table (1 thr)',
  fastify: 'fastify+rate-limit (Redis)',
  'rategate-memory': 'rategate memory',
  'rategate-memory-log': 'rategate memory, access log',
  'rategate-memory-deferred': 'rategate memory, deferred',
  'rategate-redis': 'rategate Redis',
  'rategate-redis-unix': 'rategate Redis, Unix socket',
};
export const ORDER: SystemKey[] = [
  'direct',
  'thin',
  'nginx',
  'haproxy',
  'fastify',
  'rategate-memory',
  'rategate-memory-log',
  'rategate-memory-deferred',
  'rategate-redis',
  'rategate-redis-unix',
];
/** Diagnostic systems: run only when named in --only. */
export const DIAGNOSTIC = new Set<SystemKey>(['rategate-memory-deferred', 'rategate-redis-unix']);
/** Systems whose requests reach Redis (their CPU table has a redis column). */
export const REDIS_SYSTEMS = new Set<SystemKey>(['fastify', 'rategate-redis', 'rategate-redis-unix']);
/** Debian installs haproxy in /usr/sbin, which is not on every user's PATH. */
export const HAPROXY =
  ['haproxy', '/usr/sbin/haproxy', '/usr/local/sbin/haproxy'].find((c) => !spawnSync(c, ['-v']).error) ?? null;

export const results: Partial<Record<SystemKey, SystemResult>> = {};
export const notes: string[] = [];
export const note = (s: string): void => {
  notes.push(s);
  console.log(`  note: ${s}`);
};

export const want = (k: SystemKey): boolean => (ONLY === null ? !DIAGNOSTIC.has(k) : ONLY.has(k));
