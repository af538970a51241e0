/**
 * @module A replica's request rates as it publishes them to the store with its heartbeat, so that any
 * replica's status page shows every replica's: per rule, requests per second by decision over the last
 * minute and five minutes. Bounded like the sketch (MAX_RATES_BYTES: rules cut beyond, said so), and
 * read back defensively (another version's replica may publish another shape).
 */

/** Requests per second by decision (the metrics' decisions: allowed, limited, shadow_limited). */
export interface PublishedRates {
  readonly allowed: number;
  readonly limited: number;
  readonly shadowLimited: number;
}

export interface ReplicaRates {
  /** The host name (the pod's name in Kubernetes) and process id, as the page names a replica. */
  readonly host: string;
  readonly pid: number;
  /** When this was published (ms since the epoch, the replica's clock). */
  readonly at: number;
  /** Rule → [1 minute, 5 minutes]. */
  readonly rules: Record<string, readonly [PublishedRates, PublishedRates]>;
  /** Some rules were left out to stay within MAX_RATES_BYTES. */
  readonly partial?: true;
}

export const MAX_RATES_BYTES = 32 * 1024;

/** Rates as JSON: numbers rounded to what a page shows, rules cut at MAX_RATES_BYTES. */
export function encodeRates(r: ReplicaRates): string {
  const rules: Record<string, [number[], number[]]> = {};
  let size = 96;
  let partial = false;
  const round = (x: number): number => Math.round(x * 1000) / 1000;
  const row = (d: PublishedRates): number[] => [round(d.allowed), round(d.limited), round(d.shadowLimited)];
  for (const [rule, [m1, m5]] of Object.entries(r.rules)) {
    const entry: [number[], number[]] = [row(m1), row(m5)];
    const cost = JSON.stringify(rule).length + JSON.stringify(entry).length + 2;
    if (size + cost > MAX_RATES_BYTES) {
      partial = true;
      continue;
    }
    size += cost;
    rules[rule] = entry;
  }
  return JSON.stringify({ host: r.host, pid: r.pid, at: r.at, rules, ...(partial ? { partial: true } : {}) });
}

/** A published JSON read back, or undefined when it is not one (a replica of another version, a corrupt key). */
export function decodeRates(json: string): ReplicaRates | undefined {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (v === null || typeof v !== 'object') return undefined;
  const o = v as { host?: unknown; pid?: unknown; at?: unknown; rules?: unknown; partial?: unknown };
  if (
    typeof o.host !== 'string' ||
    typeof o.pid !== 'number' ||
    typeof o.at !== 'number' ||
    o.rules === null ||
    typeof o.rules !== 'object'
  )
    return undefined;
  const rules: Record<string, readonly [PublishedRates, PublishedRates]> = {};
  for (const [rule, entry] of Object.entries(o.rules as Record<string, unknown>)) {
    if (rule === '__proto__') continue; // an own key in parsed JSON, a prototype when assigned
    const m1 = ratesOf(Array.isArray(entry) ? entry[0] : undefined);
    const m5 = ratesOf(Array.isArray(entry) ? entry[1] : undefined);
    if (m1 !== undefined && m5 !== undefined) rules[rule] = [m1, m5];
  }
  return { host: o.host, pid: o.pid, at: o.at, rules, ...(o.partial === true ? { partial: true as const } : {}) };
}

function ratesOf(v: unknown): PublishedRates | undefined {
  if (!Array.isArray(v) || v.length !== 3 || !v.every((x) => typeof x === 'number' && Number.isFinite(x) && x >= 0))
    return undefined;
  const [allowed, limited, shadowLimited] = v as [number, number, number];
  return { allowed, limited, shadowLimited };
}
