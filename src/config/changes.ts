/**
 * @module What a reload changed, split by when it takes effect. Keys read once at start (listeners,
 * the upstream client, the store connection, the proxy server's limits, the introspection path) apply
 * at the next restart; everything else is read through the request policy or the snapshot and applies
 * at once. Keep RESTART_ONLY in step with app/start.ts when a setting moves from one side to the other.
 */
import { formatDuration } from './fields/duration.js';
import type { Config } from './schema.js';

/** Dotted key paths (a section name covers all its keys) that take effect only at the next restart. */
export const RESTART_ONLY: readonly string[] = [
  'listen',
  'admin.listen',
  'upstream',
  'upstreams',
  'routes',
  'store.url',
  'store.prefix',
  'store.timeout',
  'store.lease',
  'store.gateways',
  'store.sentinelPassword',
  'store.sentinelPasswordFile',
  'clients.account.path',
  'clients.account.connections',
  'server.maxHeaderSize',
  'server.headersTimeout',
  'server.requestTimeout',
  'server.keepAliveTimeout',
  'server.maxConnections',
  'server.proxyProtocol',
  'server.tls',
  'server.http2',
];

/** Values compared whole (lists and free-form mappings), not key by key. */
const WHOLE = new Set([
  'limits',
  'routes',
  'responses.body',
  'server.bodyLimits',
  'clients.trustedProxies',
  'exempt.ips',
  'exempt.accounts',
]);

export interface ConfigChanges {
  /** Changed keys now in force, e.g. `admin.token`, `store.onError`, `limits`. */
  readonly live: string[];
  /** Changed keys that apply at the next restart; until then the old values stay in force. */
  readonly atRestart: string[];
}

function isPlain(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function changedKeys(a: unknown, b: unknown, path: string, out: string[]): void {
  if (isPlain(a) && isPlain(b) && !WHOLE.has(path)) {
    for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
      changedKeys(a[key], b[key], path === '' ? key : `${path}.${key}`, out);
    }
  } else if (JSON.stringify(a) !== JSON.stringify(b)) {
    out.push(path);
  }
}

function restartOnly(key: string): boolean {
  return RESTART_ONLY.some((r) => key === r || key.startsWith(`${r}.`));
}

export function configChanges(before: Config, after: Config): ConfigChanges {
  const keys: string[] = [];
  changedKeys(before, after, '', keys);
  return { live: keys.filter((k) => !restartOnly(k)), atRestart: keys.filter(restartOnly) };
}

/** One rule (a limit, a ban, an in-flight limit) added, removed or changed by a reload, in words. */
export interface RuleChange {
  /** `limits`, `bans` or `concurrency`. */
  readonly section: string;
  readonly name: string;
  readonly change: 'added' | 'removed' | 'changed';
  /** `rule sign-up changed: limit 5 → 6, period 30m → 1h`. */
  readonly text: string;
}

/** The named-rule lists a reload compares rule by rule, and how a line names an item of each. */
const RULE_LISTS: Readonly<Record<string, string>> = { limits: 'rule', bans: 'ban', concurrency: 'in-flight limit' };
/** Keys held in milliseconds, shown as the table writes them (30m, 1h). */
const DURATION_KEYS = new Set(['period', 'ban']);

function shown(key: string, value: unknown): string {
  if (DURATION_KEYS.has(key) && typeof value === 'number') return formatDuration(value);
  if (Array.isArray(value) && value.every((v) => typeof v === 'string'))
    return value.length === 1 ? String(value[0]) : `[${value.join(', ')}]`;
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** `key value, key value…` of the keys given (undefined ones left out). */
function describeKeys(rule: Record<string, unknown>, keys: Iterable<string>): string {
  return [...keys]
    .filter((k) => k !== 'name' && rule[k] !== undefined)
    .map((k) => `${k} ${shown(k, rule[k])}`)
    .join(', ');
}

function named(list: unknown): Map<string, Record<string, unknown>> {
  const out = new Map<string, Record<string, unknown>>();
  if (Array.isArray(list))
    for (const item of list) if (isPlain(item) && typeof item.name === 'string') out.set(item.name, item);
  return out;
}

/**
 * Each rule a reload added, removed or changed (old → new per changed key), in the new table's order,
 * then the removed ones. So an operator reading the log sees what an edit did, not only "19 rules".
 * Rule fields are policy, never secrets, so values are shown.
 */
export function ruleChanges(before: Config, after: Config): RuleChange[] {
  const out: RuleChange[] = [];
  for (const [section, noun] of Object.entries(RULE_LISTS)) {
    const old = named((before as Record<string, unknown>)[section]);
    const now = named((after as Record<string, unknown>)[section]);
    for (const [name, rule] of now) {
      const was = old.get(name);
      if (was === undefined) {
        out.push({
          section,
          name,
          change: 'added',
          text: `${noun} ${name} added: ${describeKeys(rule, Object.keys(rule))}`,
        });
        continue;
      }
      const keys = [...new Set([...Object.keys(was), ...Object.keys(rule)])].filter(
        (k) => JSON.stringify(was[k]) !== JSON.stringify(rule[k]),
      );
      if (keys.length === 0) continue;
      const diff = keys.map(
        (k) =>
          `${k} ${was[k] === undefined ? '(none)' : shown(k, was[k])} → ${rule[k] === undefined ? '(none)' : shown(k, rule[k])}`,
      );
      out.push({ section, name, change: 'changed', text: `${noun} ${name} changed: ${diff.join(', ')}` });
    }
    for (const name of old.keys())
      if (!now.has(name)) out.push({ section, name, change: 'removed', text: `${noun} ${name} removed` });
  }
  return out;
}
