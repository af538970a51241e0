/** @module The memory backend: buckets in this process only (one process, or tests), bounded by store.maxKeys. */
import { DEFAULT_MAX_KEYS, MemoryStore } from '../memory/store.js';
import { fullReporter } from '../memory/full-report.js';
import type { StoreBackend, StoreFactoryOptions, StoreSettings } from './types.js';

/** A memory store (the store, or a Redis store's local fallback) bounded by store.maxKeys, saying when full. */
export function boundedMemoryStore(storeConfig: StoreSettings, opts: StoreFactoryOptions, role: string): MemoryStore {
  return new MemoryStore({
    ...(opts.now ? { now: opts.now } : {}),
    ...(storeConfig.maxKeys !== undefined ? { maxKeys: storeConfig.maxKeys } : {}),
    onFull: fullReporter(opts.observer ?? {}, opts.log, storeConfig.maxKeys ?? DEFAULT_MAX_KEYS, role),
  });
}

const can = { shared: false, redisProtocol: false } as const;

export const memoryBackend: StoreBackend = {
  schemes: ['memory'],
  can,
  open: async (settings, opts) => {
    const store = boundedMemoryStore(settings, opts, 'memory store');
    return {
      store,
      kind: 'memory',
      can,
      reachable: async () => true,
      fallbackActive: () => false,
      localKeys: () => store.size,
    };
  },
};
