/**
 * decide() answers synchronously when the store can (consumeLocal: the memory store, a held lease, a
 * blocked bucket), and that answer is the one the store's promise would have given: same admissions,
 * same 429s, same headers. A request decided locally creates no promise at all (counted with a promise
 * hook), so it costs no microtask hop. Pure logic over the real memory store: no socket needed.
 */
import { createHook } from 'node:async_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { MemoryStore } from '../../src/limiter/memory/store.js';
import type { BucketSpec, Store } from '../../src/limiter/types.js';
import { Metrics } from '../../src/observability/metrics.js';
import { decide, type Decision } from '../../src/pipeline/decide.js';
import { buildRequestPolicy } from '../../src/pipeline/policy.js';
import { RequestView } from '../../src/pipeline/request-view.js';

const T0 = Date.UTC(2026, 10, 27, 3, 0, 0);
const policy = buildRequestPolicy(
  parseConfig(
    `limits:
  - { name: by-ip, match: /api/*, per: ip, limit: 4, period: 1m }
  - { name: wide, match: /api/*, per: ip, limit: 100, period: 1h, algorithm: sliding-window }
  - { name: shadowed, match: /api/*, per: ip, limit: 2, period: 1m, shadow: true }
`,
    't.yaml',
  ),
  async () => ({ kind: 'anonymous' }),
);

function view(ip: string): RequestView {
  const v = new RequestView(
    { method: 'GET', url: '/api/v1/x', headers: {}, rawHeaders: [] },
    policy,
    policy.resolveIp.peer(ip),
  );
  v.rules = policy.routeRules.of(v.method, v.path);
  return v;
}

/** The memory store behind the Store contract's promise only (no consumeLocal): the async path. */
function promiseOnly(inner: MemoryStore): Store & { calls: number } {
  return {
    calls: 0,
    consume(specs: readonly BucketSpec[]) {
      this.calls++;
      return inner.consume(specs);
    },
    peek: (s) => inner.peek(s),
    reset: (s) => inner.reset(s),
    close: () => inner.close(),
  };
}

/** What the client sees of a decision. */
const seen = (d: Decision) => ({
  admit: d.admit,
  status: d.status,
  kind: d.kind,
  headers: d.headers,
  rejectedBy: d.rejectedBy?.name,
  body: d.body?.toString(),
});

const stores: MemoryStore[] = [];
const memory = (): MemoryStore => {
  const s = new MemoryStore({ now: () => T0, sweepIntervalMs: 0 });
  stores.push(s);
  return s;
};
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

describe('decide, synchronous when the store answers locally', () => {
  it('decides every request of a sequence exactly as the promise path does, 429s included', async () => {
    const sync = { store: memory(), metrics: new Metrics(), now: () => T0 };
    const viaPromise = promiseOnly(memory());
    const async_ = { store: viaPromise, metrics: new Metrics(), now: () => T0 };
    const statuses: number[] = [];
    for (let i = 0; i < 9; i++) {
      const ip = i % 2 === 0 ? '198.51.100.1' : '198.51.100.2';
      const a = decide(sync, view(ip));
      const b = decide(async_, view(ip));
      expect(a).not.toBeInstanceOf(Promise);
      expect(b).toBeInstanceOf(Promise);
      expect(seen(a as Decision)).toEqual(seen(await b));
      statuses.push((a as Decision).status);
    }
    expect(statuses).toContain(429);
    expect(viaPromise.calls).toBe(9);
    // Client 1 sent five (limit 4): the fifth was refused on both paths; the sixth is too.
    const last = decide(sync, view('198.51.100.1')) as Decision;
    expect(last.status).toBe(429);
    expect(last.headers.length).toBeGreaterThan(0);
    expect(await sync.metrics.registry.metrics()).toEqual(
      expect.stringContaining('rategate_store_duration_seconds_count 10'),
    );
  });

  it('creates no promise for a request the store decides locally', () => {
    const ctx = { store: memory(), metrics: new Metrics(), now: () => T0 };
    const v = view('203.0.113.9');
    expect(decide(ctx, view('203.0.113.9'))).not.toBeInstanceOf(Promise); // warm: the first call builds the rule set's cached state
    let promises = 0;
    const hook = createHook({
      init: (_id, type) => {
        if (type === 'PROMISE') promises++;
      },
    }).enable();
    let d: Decision | Promise<Decision>;
    try {
      d = decide(ctx, v);
    } finally {
      hook.disable();
    }
    expect(d).not.toBeInstanceOf(Promise);
    expect((d as Decision).admit).toBe(true);
    expect(promises).toBe(0);
  });

  it('refuses a flood with fresh tokens on a full bucket that needs no account synchronously: no promise, no introspection', async () => {
    let introspections = 0;
    const accounts = buildRequestPolicy(
      parseConfig(
        `limits:
  - { name: by-account, match: /api/*, per: account, limit: 100, period: 1m }
  - { name: by-ip, match: /api/*, per: ip, limit: 2, period: 1m }
`,
        't.yaml',
      ),
      async () => {
        introspections++;
        return { kind: 'anonymous' };
      },
    );
    const tokenView = (i: number): RequestView => {
      const headers = { authorization: `Bearer fresh-${i}` };
      const v = new RequestView(
        { method: 'GET', url: '/api/v1/x', headers, rawHeaders: ['Authorization', headers.authorization] },
        accounts,
        accounts.resolveIp.peer('203.0.113.20'),
      );
      v.rules = accounts.routeRules.of(v.method, v.path);
      v.token = `fresh-${i}`; // as the read stage finds it
      return v;
    };
    const ctx = { store: memory(), metrics: new Metrics(), now: () => T0 };
    for (let i = 0; i < 2; i++) expect((await decide(ctx, tokenView(i))).admit).toBe(true);
    expect(introspections).toBe(2); // a fresh token with room is looked up
    const before = introspections;
    expect(decide(ctx, tokenView(99))).not.toBeInstanceOf(Promise); // warm
    let promises = 0;
    const hook = createHook({
      init: (_id, type) => {
        if (type === 'PROMISE') promises++;
      },
    }).enable();
    let d: Decision | Promise<Decision>;
    try {
      d = decide(ctx, tokenView(100));
    } finally {
      hook.disable();
    }
    expect(d).not.toBeInstanceOf(Promise);
    expect((d as Decision).status).toBe(429);
    expect((d as Decision).rejectedBy?.name).toBe('by-ip');
    expect(promises).toBe(0);
    expect(introspections).toBe(before);
  });
});
