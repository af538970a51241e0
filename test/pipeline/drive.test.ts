/**
 * The driver of the stages (pipeline/drive.ts) over the real list (screen.ts STAGES) and lists of its
 * own: a request decided without I/O is screened in the same turn with no promise made (counted with
 * a promise hook), a stage that waits resumes the list at the next stage, a stage's throw is the
 * ending's `failed` whether it came at once or after a wait, and a wrapped list runs as the list does.
 */
import { createHook } from 'node:async_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { MemoryStore } from '../../src/limiter/memory/store.js';
import { Metrics } from '../../src/observability/metrics.js';
import { refusal } from '../../src/pipeline/decision.js';
import { drive, GO_ON, type Stage } from '../../src/pipeline/drive.js';
import { buildRequestPolicy } from '../../src/pipeline/policy.js';
import { RequestView } from '../../src/pipeline/request-view.js';
import { screen, STAGES, type Ending, type Screened } from '../../src/pipeline/screen.js';
import { Screening } from '../../src/pipeline/screening.js';

const T0 = Date.UTC(2026, 11, 2, 3, 0, 0);
const policy = buildRequestPolicy(
  parseConfig(
    `limits:
  - { name: by-ip, match: /api/*, per: ip, limit: 2, period: 1m }
`,
    't.yaml',
  ),
  async () => ({ kind: 'anonymous' }),
);

const stores: MemoryStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

function context() {
  const store = new MemoryStore({ now: () => T0, sweepIntervalMs: 0 });
  stores.push(store);
  return { store, metrics: new Metrics({ collectDefault: false }), now: () => T0 };
}

const view = (url = '/api/v1/x'): RequestView =>
  new RequestView({ method: 'GET', url, headers: {}, rawHeaders: [] }, policy, policy.resolveIp.peer('198.51.100.7'));

/** An ending that keeps what it was told. */
function recording(): Ending & { told: Screened[]; errors: unknown[] } {
  const told: Screened[] = [];
  const errors: unknown[] = [];
  return { told, errors, screened: (s) => void told.push(s), failed: (e) => void errors.push(e), held: () => {} };
}

const ANSWER = refusal(418, Buffer.from('{"error":"teapot"}'));

describe('the driver of the stages', () => {
  it('screens a request that needs no I/O in the same turn, making no promise, then 429s the third', () => {
    const ctx = context();
    const kinds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const end = recording();
      let promises = 0;
      const hook = createHook({
        init: (_id, type) => {
          if (type === 'PROMISE') promises++;
        },
      }).enable();
      let returned: void | Promise<void>;
      try {
        returned = screen(ctx, view(), null, undefined, end);
      } finally {
        hook.disable();
      }
      expect(returned).toBeUndefined();
      expect(promises).toBe(0);
      expect(end.told).toHaveLength(1);
      kinds.push(end.told[0]!.decision.kind);
    }
    expect(kinds).toEqual(['allowed', 'allowed', 'limited']);
  });

  it('refuses at the stage that answers, and runs no stage after it', () => {
    const end = recording();
    void screen(context(), view('/api/v1/../../etc'), null, undefined, end);
    expect(end.told[0]!.decision.status).toBe(400);
    expect(end.told[0]!.view.rules.limits).toHaveLength(0); // the route was never matched
  });

  it('resumes at the next stage once a stage that waited settles', async () => {
    const ran: string[] = [];
    const stage = (name: string, verdict: () => ReturnType<Stage['run']>): Stage => ({
      name,
      run: () => (ran.push(name), verdict()),
    });
    const list = [
      stage('a', () => GO_ON),
      stage('b', () => Promise.resolve(GO_ON)),
      stage('c', () => GO_ON),
      stage('d', () => ANSWER),
      stage('e', () => GO_ON),
    ];
    const end = recording();
    const returned = drive(list, context(), new Screening(view(), null, undefined, end));
    expect(returned).toBeInstanceOf(Promise);
    expect(ran).toEqual(['a', 'b']);
    await returned;
    expect(ran).toEqual(['a', 'b', 'c', 'd']);
    expect(end.told.map((s) => s.decision)).toEqual([ANSWER]);
  });

  it("hands a stage's throw to the ending, at once or after a wait; the promise it returns never rejects", async () => {
    const boom = new Error('boom');
    const throwing: Stage = {
      name: 'x',
      run: () => {
        throw boom;
      },
    };
    const now = recording();
    expect(drive([throwing], context(), new Screening(view(), null, undefined, now))).toBeUndefined();
    expect(now.errors).toEqual([boom]);
    const later = recording();
    await drive(
      [{ name: 'w', run: () => Promise.resolve(GO_ON) }, throwing],
      context(),
      new Screening(view(), null, undefined, later),
    );
    await drive(
      [{ name: 'r', run: () => Promise.reject(boom) }],
      context(),
      new Screening(view(), null, undefined, later),
    );
    expect(later.errors).toEqual([boom, boom]);
    expect(later.told).toEqual([]);
  });

  it('runs a wrapped list as the list, each stage seen by name', () => {
    const seen: string[] = [];
    const wrapped = STAGES.map((s): Stage => ({ name: s.name, run: (ctx, x) => (seen.push(s.name), s.run(ctx, x)) }));
    const end = recording();
    void screen(context(), view(), null, undefined, end, wrapped);
    expect(end.told[0]!.decision.kind).toBe('allowed');
    expect(seen).toEqual(['blocks', 'head', 'read', 'account', 'bans', 'slots', 'limits-account', 'limits']);
  });
});
