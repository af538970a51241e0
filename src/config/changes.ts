/**
 * @module What a reload changed, split by when it takes effect. Keys read once at start (listeners,
 * the upstream client, the store connection, the proxy server's limits, the introspection path) apply
 * at the next restart; everything else is read through the request policy or the snapshot and applies
 * at once. Keep RESTART_ONLY in step with app/start.ts when a setting moves from one side to the other.
 */
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
];

/** Values compared whole (lists and free-form mappings), not key by key. */
const WHOLE = new Set(['limits', 'routes', 'responses.body', 'server.bodyLimits', 'clients.trustedProxies', 'exempt.ips', 'exempt.accounts']);

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
