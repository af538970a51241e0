/**
 * @module The counters' store and the guard on it, opened at start: the metrics they report to, the bucket
 * bound, the sentinels' password, surges, and the fleet when the store is shared.
 */
import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import { loadSentinelPassword } from '../config/secret-file.js';
import { createStoreFor, type StoreHandle } from '../limiter/factory.js';
import { effectiveMaxKeys } from '../limiter/memory/key-bound.js';
import { Metrics } from '../observability/metrics.js';
import { createGuard } from '../guard/index.js';
import { Surges } from '../surge/surges.js';
import { joinFleet } from '../fleet/join.js';
import type { GatewaySettings } from './settings.js';

/** The metrics, and the counters' store wired to them; the store settings returned are the guard's too. */
export async function openStore(cfg: Config, settings: GatewaySettings, log: Logger) {
  const metrics = new Metrics({ collectDefault: settings.defaultMetrics ?? true });
  metrics.configLoaded(true, false);
  // The bucket bound is settled once, before the store opens: the memory store and the Redis store's
  // local fallback get it. The sentinels' password may come from a file (a mounted Secret): read once,
  // for the counters and the guard alike.
  const bound = effectiveMaxKeys(cfg.store.maxKeys);
  if (bound.derived !== null) {
    log.info(
      { maxKeys: bound.maxKeys, memoryLimit: bound.derived.bytes, from: bound.derived.source },
      `store.maxKeys ${bound.maxKeys} from the memory limit (${bound.derived.source})`,
    );
  }
  metrics.storeMaxKeys.set(bound.maxKeys);
  const storeCfg = {
    ...cfg.store,
    maxKeys: bound.maxKeys,
    sentinelPassword: await loadSentinelPassword(cfg.store, settings.configPath),
  };
  const storeHandle = await createStoreFor(storeCfg, {
    observer: metrics.storeObserver(),
    log,
    ...(settings.now ? { now: settings.now } : {}),
  });
  metrics.storeKeysProbe = () => storeHandle.localKeys();
  return { metrics, storeCfg, storeHandle };
}

/** Runtime blocks, bans and triage; and, with a shared store, the fleet: how many gateways share it, their triage sketches and rates. */
export async function openGuard(
  storeCfg: Config['store'] & { readonly maxKeys: number },
  storeHandle: StoreHandle,
  metrics: Metrics,
  log: Logger,
  config: () => Config,
  rates: () => string | undefined,
  now?: () => number,
) {
  const guard = await createGuard({ store: storeCfg, registry: metrics.registry, log, config, now });
  // `surges:` run on the guard: their state is its (kind surge), their counts are in the counter store.
  guard.surges = new Surges({ state: guard.state, now: guard.now, store: storeHandle.store, log, config });
  guard.rulesInUse(followsStore(config()));
  return { guard, fleet: joinFleet({ store: storeCfg, handle: storeHandle, metrics, top: guard.top, rates }) };
}

/** A shared guard state follows the store's changes continuously while bans or surges are configured (within 1 s). */
export function followsStore(c: Config): boolean {
  return c.bans.length > 0 || c.surges.length > 0;
}
