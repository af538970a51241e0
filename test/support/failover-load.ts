/**
 * @module Bounded open-loop load for failover tests: a fixed rate of requests per key over loopback,
 * alternating between gateways, each request's answer (or its absence within 5 s) recorded with the
 * window of its rate-limit bucket, so a test can count what was admitted per key and per window.
 */
import { Agent, request } from 'undici';
import { eventually } from './eventually.js';

export interface Sample {
  readonly ip: string;
  /** The first path segment: which rule (and so which failure policy) the request met. */
  readonly rule: string;
  readonly sentAt: number;
  readonly doneAt: number;
  /** 0: no answer within 5 s, or a transport error. */
  readonly status: number;
  /** X-RateLimit-Reset (ms): the end of the bucket's window. */
  readonly resetMs: number | undefined;
}

export interface Load {
  /** Stops sending, waits for every request in flight, returns every sample. */
  stop(): Promise<Sample[]>;
  /** Samples so far. */
  readonly samples: readonly Sample[];
  /**
   * Resolves once the load has been answered through `n` whole rate windows of `periodMs` begun at or
   * after `since` (default: the first request sent, which is where the reports' whole windows start;
   * the load's own start is up to one tick earlier): a phase of load measured in the windows the assertions
   * count, not in a fixed sleep. Fails if the decisions do not come within `withinMs`.
   */
  wholeWindows(n: number, o: { periodMs: number; since?: number; withinMs?: number }): Promise<void>;
}

/** Every `everyMs`, one request per (ip, rule), round-robin over `gateways`, until stopped. */
export function startLoad(opts: {
  gateways: readonly string[];
  ips: readonly string[];
  rules: readonly string[];
  everyMs: number;
}): Load {
  const agent = new Agent({ connections: 32, headersTimeout: 5_000, bodyTimeout: 5_000 });
  const samples: Sample[] = [];
  const inFlight = new Set<Promise<void>>();
  let n = 0;
  const one = (ip: string, rule: string): void => {
    const gw = opts.gateways[n++ % opts.gateways.length]!;
    const sentAt = Date.now();
    const p = request(`${gw}/${rule}/x`, {
      dispatcher: agent,
      headers: { 'x-forwarded-for': ip },
      signal: AbortSignal.timeout(5_000),
    })
      .then(async (r) => {
        await r.body.dump();
        const reset = r.headers['x-ratelimit-reset'];
        samples.push({
          ip,
          rule,
          sentAt,
          doneAt: Date.now(),
          status: r.statusCode,
          resetMs: typeof reset === 'string' ? Date.parse(reset) : undefined,
        });
      })
      .catch(() => void samples.push({ ip, rule, sentAt, doneAt: Date.now(), status: 0, resetMs: undefined }));
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  };
  const timer = setInterval(() => {
    for (const ip of opts.ips) for (const rule of opts.rules) one(ip, rule);
  }, opts.everyMs);
  return {
    samples,
    async wholeWindows(n, o) {
      // Read at every poll: until the first request is sent there is no start, and no window counts.
      const since = (): number => o.since ?? Math.min(...samples.map((s) => s.sentAt));
      await eventually(() => wholeWindowsAnswered(samples, since(), o.periodMs), {
        what: `${n} whole windows answered`,
        withinMs: o.withinMs ?? 20_000,
        everyMs: 50,
        until: (seen) => seen >= n,
      });
    },
    async stop() {
      clearInterval(timer);
      await Promise.all([...inFlight]);
      await agent.close();
      return samples;
    },
  };
}

/** Windows begun at or after `since` and over, by the limiter's own answers (200 or 429, with their window's end). */
function wholeWindowsAnswered(samples: readonly Sample[], since: number, periodMs: number): number {
  const decided = samples.filter((s) => (s.status === 200 || s.status === 429) && s.resetMs !== undefined);
  const lastSent = Math.max(0, ...decided.map((s) => s.sentAt));
  return new Set(decided.map((s) => s.resetMs!).filter((end) => end - periodMs >= since && end <= lastSent)).size;
}

/** `admittedPerWindow` as [window end, admitted] pairs, oldest window first. */
export function admittedWindows(samples: readonly Sample[], ip: string, rule: string): Array<[number, number]> {
  return [...admittedPerWindow(samples, ip, rule).entries()].sort((a, b) => a[0] - b[0]);
}

/** Admitted (200) requests per window for one ip and rule: window end (ms) → count. */
export function admittedPerWindow(samples: readonly Sample[], ip: string, rule: string): Map<number, number> {
  return countedPerWindow(samples, ip, rule, (status) => status === 200);
}

/** Requests per window for one ip and rule whose status `counts`, by the window their answer names. */
export function countedPerWindow(
  samples: readonly Sample[],
  ip: string,
  rule: string,
  counts: (status: number) => boolean,
): Map<number, number> {
  const out = new Map<number, number>();
  for (const s of samples) {
    if (s.ip !== ip || s.rule !== rule || !counts(s.status) || s.resetMs === undefined) continue;
    out.set(s.resetMs, (out.get(s.resetMs) ?? 0) + 1);
  }
  return out;
}

/** The share tests' table (sentinel-share, startup-share): 50 per 10 s per IP, two gateways configured. */
export const SHARE_LIMIT = 50;
export const SHARE_PERIOD_MS = 10_000;
export const SHARE_TABLE = `limits:
  - { name: loc, match: /loc/*, per: ip, limit: ${SHARE_LIMIT}, period: 10s }
store: { timeout: 250ms, gateways: 2 }
clients: { trustedProxies: [loopback] }
`;
