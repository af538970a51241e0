/**
 * @module Per-stage micro-benchmarks of the request path: each stage's cost per call, as a table, so that a
 * regression in the instruction counts of `npm run bench -- --instructions` can be named by its stage.
 * Every stage is called through its module's public functions on the bench's own table
 * (bench/limits.bench.yaml: the forwarded request `GET /api/v1/statuses/:id` with a token, three rules).
 *
 *   npx tsx bench/stages.ts [--rounds 7] [--ms 60] [--only digest,headers]
 *
 * Each stage runs in rounds of about `ms` milliseconds after a warm-up; a round's figure is the process's
 * CPU time (user + system, not wall time: another process on the core does not count) over its calls; the
 * table gives the median round and the lowest, in ns per call.
 */
import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseConfig } from '../src/config/index.js';
import { requestId } from '../src/http/message.js';
import { createAccountResolver, tokenDigest } from '../src/identity/account.js';
import { createBlockedCacheStore } from '../src/limiter/blocked.js';
import { MemoryStore } from '../src/limiter/memory/store.js';
import { createLeaseStore } from '../src/limiter/redis/lease.js';
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from '../src/limiter/types.js';
import { recordOf } from '../src/pipeline/access-record.js';
import { admitted } from '../src/pipeline/decision.js';
import { bucketsFor, buildRequestPolicy, type RequestPolicy } from '../src/pipeline/policy.js';
import { knownClient } from '../src/pipeline/rule-inputs.js';
import { rateLimitHeaders } from '../src/pipeline/rate-limited.js';
import { RequestView } from '../src/pipeline/request-view.js';
import { normalizePath } from '../src/routing/index.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '7' },
    ms: { type: 'string', default: '60' },
    only: { type: 'string' },
  },
});
const ROUNDS = Number(values.rounds);
const ROUND_MS = Number(values.ms);
const ONLY = values.only?.split(',') ?? null;

const TOKEN = 'Zx3k9QwErTyUiOp1aSdFgHjKlZxCvBnM0qWeRtYuIo4';
const PATH = '/api/v1/statuses/113456789012345678';
const CLIENT = '40.0.1.9';

/** The bench table, with the IETF fields on (the default) or off. */
function policyOf(standardHeaders: boolean): RequestPolicy {
  const yaml = `${readFileSync('bench/limits.bench.yaml', 'utf8')}\nresponses:\n  standardHeaders: ${standardHeaders}\n`;
  return buildRequestPolicy(parseConfig(yaml, 'limits.bench.yaml'), () =>
    Promise.resolve({ kind: 'account', id: '42' }),
  );
}

/** A store that grants every lease asked for in full: the lease layer then decides from what it holds. */
class Granting implements Store {
  consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    const now = Date.now();
    return Promise.resolve({
      allowed: true,
      now,
      buckets: specs.map((s) => ({
        remaining: s.limit / 2,
        resetAt: now + s.periodMs,
        limited: false,
        retryAt: now,
        leased: s.lease ?? 0,
      })),
    });
  }
  peek(): Promise<BucketState> {
    return Promise.reject(new Error('not used'));
  }
  reset(): Promise<void> {
    return Promise.resolve();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Keeps results alive so that V8 cannot drop a stage's work. */
let sink = 0;
const keep = (x: unknown): void => {
  if (x === sink) sink++;
};

interface Stage {
  readonly name: string;
  readonly what: string;
  readonly run: () => unknown;
  /** Asynchronous stages: a call is awaited (its promise hops are part of its cost). */
  readonly async?: boolean;
}

async function measure(s: Stage): Promise<{ median: number; min: number }> {
  const call = async (n: number): Promise<void> => {
    if (s.async === true) for (let i = 0; i < n; i++) keep(await s.run());
    else for (let i = 0; i < n; i++) keep(s.run());
  };
  // Warm-up, and the number of calls that fills a round.
  await call(20_000);
  let n = 1000;
  for (;;) {
    const t0 = performance.now();
    await call(n);
    const ms = performance.now() - t0;
    if (ms >= ROUND_MS / 4) {
      n = Math.max(1000, Math.round((n * ROUND_MS) / ms));
      break;
    }
    n *= 4;
  }
  const per: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const c0 = process.cpuUsage();
    await call(n);
    const c = process.cpuUsage(c0);
    per.push(((c.user + c.system) * 1000) / n);
  }
  per.sort((a, b) => a - b);
  return { median: per[per.length >> 1]!, min: per[0]! };
}

async function stages(): Promise<Stage[]> {
  const ietf = policyOf(true);
  const plain = policyOf(false);
  const matched = ietf.snapshot.matcher.match('GET', PATH);
  const peer = ietf.resolveIp.peer('127.0.0.1');
  const client = ietf.resolveIp.behind(peer, CLIENT, undefined);
  const introspecting = createAccountResolver({
    from: 'introspect',
    introspect: () => Promise.resolve({ kind: 'account', id: '42' }),
    cacheTtlMs: 3_600_000,
  });
  await introspecting.resolve(TOKEN, undefined, false);
  const account = introspecting.known(TOKEN, undefined, false) ?? null;
  const who = knownClient(client, account);
  const { specs, rules } = bucketsFor(ietf, matched, who);
  const memory = new MemoryStore({ sweepIntervalMs: 0 });
  const leases = createLeaseStore(new Granting(), {
    giveBack: () => Promise.resolve(),
    maxAgeMs: 3_600_000,
    idleMs: 3_600_000,
  });
  // Two store calls on the same keys: the second asks for (and gets) leases.
  await leases.consume(specs);
  await leases.consume(specs);
  const cached = createBlockedCacheStore(leases);
  // The same stack seen through consume only (no consumeLocal): the cache's .then hop of before issue 30.
  const hopping = createBlockedCacheStore({
    consume: (x) => leases.consume(x),
    peek: (x) => leases.peek(x),
    reset: (x) => leases.reset(x),
    close: () => leases.close(),
  });
  const outcome = memory.consumeSync(specs);
  const req = {
    method: 'GET',
    url: PATH,
    headers: { host: 'gw', authorization: `Bearer ${TOKEN}`, 'x-forwarded-for': CLIENT },
  } as unknown as http.IncomingMessage;
  const view = new RequestView(req, ietf, peer);
  view.path = PATH;
  view.rules = ietf.routeRules.of('GET', PATH);
  const decision = admitted(rateLimitHeaders(ietf, rules, outcome), rules, true, 'allowed');
  const started = performance.now();
  return [
    {
      name: 'normalize',
      what: 'routing normalizePath (path and query of the target)',
      run: () => normalizePath(`${PATH}?x=1`),
    },
    {
      name: 'match',
      what: 'the matcher: the rules of (GET, path)',
      run: () => ietf.snapshot.matcher.match('GET', PATH),
    },
    {
      name: 'client-ip',
      what: 'resolveIp: the peer, then the client behind it (X-Forwarded-For)',
      run: () => ietf.resolveIp.behind(ietf.resolveIp.peer('127.0.0.1'), CLIENT, undefined),
    },
    { name: 'digest', what: 'tokenDigest: SHA-256 of the bearer token', run: () => tokenDigest(TOKEN) },
    {
      name: 'account',
      what: 'account known(): digest + introspection cache look-up (a hit)',
      run: () => introspecting.known(TOKEN, undefined, false),
    },
    { name: 'buckets', what: 'bucketsFor: the three bucket specs and keys', run: () => bucketsFor(ietf, matched, who) },
    { name: 'memory', what: 'MemoryStore.consumeSync of the three buckets', run: () => memory.consumeSync(specs) },
    {
      name: 'memory-await',
      what: 'MemoryStore.consume, awaited (what memory mode costs with its promise)',
      run: () => memory.consume(specs),
      async: true,
    },
    {
      name: 'lease-local',
      what: 'lease layer consumeLocal, every bucket leased',
      run: () => leases.consumeLocal(specs),
    },
    {
      name: 'lease-cached',
      what: 'blocked cache over the leases: consumeLocal (Redis mode, synchronous)',
      run: () => cached.consumeLocal(specs),
    },
    {
      name: 'lease-await',
      what: 'blocked cache over the leases: consume, awaited (the pipeline awaits it)',
      run: () => cached.consume(specs),
      async: true,
    },
    {
      name: 'lease-await-hop',
      what: 'the same without consumeLocal inside: the .then hop the cache took before',
      run: () => hopping.consume(specs),
      async: true,
    },
    {
      name: 'headers',
      what: 'rateLimitHeaders with the IETF RateLimit fields (the default)',
      run: () => rateLimitHeaders(ietf, rules, outcome),
    },
    {
      name: 'headers-plain',
      what: 'rateLimitHeaders, X-RateLimit-* only (standardHeaders: false)',
      run: () => rateLimitHeaders(plain, rules, outcome),
    },
    { name: 'request-id', what: 'requestId of a request without X-Request-Id', run: () => requestId(req) },
    {
      name: 'uuid',
      what: 'crypto.randomUUID (for comparison: the request id before issue 30)',
      run: () => randomUUID(),
    },
    {
      name: 'record',
      what: 'recordOf: the access-log record (log.client off)',
      run: () => recordOf(req, 'id', view, decision, { status: 200, error: undefined }, performance.now() - started),
    },
  ];
}

async function main(): Promise<void> {
  const all = await stages();
  console.log(
    `stage costs, ns per call (CPU time; median and lowest of ${ROUNDS} rounds of ~${ROUND_MS} ms), Node ${process.version}\n`,
  );
  console.log('| stage | ns/call | lowest | what it calls |\n|---|--:|--:|---|');
  for (const s of all) {
    if (ONLY !== null && !ONLY.includes(s.name)) continue;
    const m = await measure(s);
    console.log(`| ${s.name} | ${m.median.toFixed(0)} | ${m.min.toFixed(0)} | ${s.what} |`);
  }
  if (sink === -1) console.log(sink);
}

await main();
