/**
 * @module Builds the process's Guard for the store `store.url` names: shared through Redis, or local to
 * the process with the memory store (said at start), with its metrics on the gateway's registry.
 */
import type client from 'prom-client';
import type { Config } from '../config/schema.js';
import { backendFor } from '../limiter/backends/index.js';
import type { StoreLog } from '../limiter/types.js';
import { Guard } from './guard.js';
import { GuardMetrics } from './metrics.js';
import { RedisGuardState } from './redis-state.js';
import { MemoryGuardState } from './state.js';

export { Guard } from './guard.js';

export interface GuardSetup {
  readonly store: Pick<Config['store'], 'url' | 'prefix' | 'timeout' | 'sentinelPassword'>;
  readonly registry: client.Registry;
  readonly log: StoreLog;
  /** The config in force now (read at scrape time for the config-side gauges and ban names). */
  readonly config: () => Pick<Config, 'bans' | 'block' | 'exempt'>;
  /** Tests only: the memory store's clock, which its bans then follow too (a shared state keeps the store's time). */
  readonly now?: (() => number) | undefined;
}

export async function createGuard(s: GuardSetup): Promise<Guard> {
  // Shared through the store when the backend speaks the Redis protocol (scripts, streams); else this process's own.
  const shared = backendFor(s.store.url).can.redisProtocol;
  const now = shared ? Date.now : (s.now ?? Date.now);
  const state = shared
    ? new RedisGuardState({
        url: s.store.url,
        prefix: s.store.prefix,
        timeoutMs: s.store.timeout,
        sentinelPassword: s.store.sentinelPassword,
      })
    : new MemoryGuardState(now);
  const guard = new Guard(state, s.log, now);
  guard.metrics = new GuardMetrics(
    s.registry,
    () => ({
      bansActive: () => guard.bans.active(),
      blocksActive: () => ({ config: s.config().block.ips.length, runtime: guard.view.blocks.size }),
      exemptionsActive: () => ({ config: s.config().exempt.ips.length, runtime: guard.view.exempts.size }),
      surgesActive: () => new Map(guard.surges?.status().map((x) => [x.name, x.active]) ?? []),
    }),
    () => s.config().bans.map((b) => b.name),
  );
  if (state instanceof RedisGuardState) await state.ready(3_000);
  if (state.scope === 'memory') {
    s.log.info(
      { guard: 'memory' },
      'runtime blocks, exemptions and bans are local to this process (memory store): other replicas do not see them',
    );
  }
  guard.rulesInUse(s.config().bans.length > 0);
  await guard.sync();
  return guard;
}
