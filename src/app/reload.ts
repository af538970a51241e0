/**
 * @module Reload: a new limit table (file change, SIGHUP, `reload()`) is swapped in whole for new
 * requests when valid; an invalid one is logged and counted, and the table in force stays.
 */
import type { Logger } from 'pino';
import { ConfigError, parseConfig, type ConfigOverrides, type Snapshot } from '../config/index.js';
import { configChanges, ruleChanges } from '../config/changes.js';
import { ConfigWatcher } from '../config/watch.js';
import type { Introspect } from '../identity/account.js';
import { loadAdminCredentials, type AdminCredential } from '../admin/token.js';
import type { Metrics } from '../observability/metrics.js';
import type { ReloadOutcome } from '../admin/reloads.js';
import { buildRequestPolicy, type RequestPolicy } from '../pipeline/policy.js';

export interface ReloadTarget {
  readonly configPath: string;
  readonly overrides: ConfigOverrides;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly introspect: Introspect;
  /** Whether this process runs the admin listener (and so reads the admin tokens). */
  readonly runAdmin: boolean;
  /** Told every reload's outcome (the status page's history of reloads). */
  readonly onReload?: (outcome: ReloadOutcome) => void;
  policy(): RequestPolicy;
  /** Puts a new policy and admin tokens in force together. */
  swap(policy: RequestPolicy, adminTokens: readonly AdminCredential[]): void;
}

/** Applies a new file text: valid → swapped in whole for new requests; invalid → logged, counted, old kept. */
export async function applyConfig(t: ReloadTarget, text: string): Promise<boolean> {
  let next: Snapshot;
  let nextTokens: readonly AdminCredential[];
  try {
    next = parseConfig(text, t.configPath, t.overrides);
    nextTokens = t.runAdmin ? await loadAdminCredentials(next.config.admin, t.configPath) : [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    t.metrics.configLoaded(false);
    t.onReload?.({ ok: false, errors: err.errors });
    t.log.error(
      { errors: err.errors, source: t.configPath },
      'config reload refused; the previous limit table stays in force',
    );
    return false;
  }
  const previous = t.policy();
  const changes = configChanges(previous.snapshot.config, next.config);
  t.swap(buildRequestPolicy(next, t.introspect, previous), nextTokens);
  t.log.level = next.config.log.level;
  t.metrics.configLoaded(true);
  t.onReload?.({ ok: true, rules: next.rules.length, live: changes.live, atRestart: changes.atRestart });
  // Say exactly what happened: key names only (never values: admin.token is one of them).
  const applied =
    changes.live.length > 0
      ? `; in force now: ${changes.live.join(', ')}`
      : changes.atRestart.length > 0
        ? '; nothing in force changed'
        : '; nothing changed';
  t.log.info(
    { rules: next.rules.length, source: t.configPath, applied: changes.live },
    `config reloaded: ${next.rules.length} rules${applied}`,
  );
  for (const c of ruleChanges(previous.snapshot.config, next.config))
    t.log.info({ section: c.section, rule: c.name, change: c.change }, c.text);
  if (changes.atRestart.length > 0) {
    t.log.warn(
      { atRestart: changes.atRestart },
      `config reloaded, but these changes apply only at the next restart (the running values stay until then): ${changes.atRestart.join(', ')}`,
    );
  }
  return true;
}

/** The file watcher wired to applyConfig; `reload()` re-reads now and says whether the new table is in force. */
export function watchConfig(
  t: ReloadTarget,
  initialText: string,
  watch: boolean,
): { reload(): Promise<boolean>; stop(): void } {
  let lastApplied = true;
  const watcher = new ConfigWatcher({
    path: t.configPath,
    onChange: async (text) => {
      lastApplied = await applyConfig(t, text);
    },
    onError: (err) => t.log.warn({ err: err.message }, 'config watch error'),
  });
  if (watch) watcher.start(initialText);
  return {
    async reload() {
      await watcher.reloadNow();
      return lastApplied;
    },
    stop: () => watcher.stop(),
  };
}
