/** @module Builds the Store that `store.url` names: memory, or Redis / Redis Cluster behind the fault policy. */
import type { Config } from '../config/types.js';
import type { Metrics } from '../metrics.js';
import { MemoryStore } from './memory.js';
import type { Store } from './types.js';

export interface StoreHandle {
  readonly store: Store;
  /** `memory`, `redis` or `redis-cluster`, for the startup line and /readyz. */
  readonly kind: 'memory' | 'redis' | 'redis-cluster';
  /** True when decisions can be made (Redis reachable, or its fallback in force). */
  ready(): Promise<boolean>;
}

export async function createStoreFor(storeConfig: Config["store"], _metrics?: Metrics): Promise<StoreHandle> {
  if (storeConfig.url === 'memory') {
    const store = new MemoryStore();
    return { store, kind: 'memory', ready: async () => true };
  }
  throw new Error(`store.url ${storeConfig.url.split('@').pop()}: Redis stores are not available in this build yet`);
}
