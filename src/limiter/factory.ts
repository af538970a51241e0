/**
 * @module Builds the Store that `store.url` names, through the backend its scheme names
 * (limiter/backends/: memory, or Redis / Redis Cluster / Sentinel-managed Redis and their Valkey
 * aliases). The one entry the composition root and the tests call.
 */
import { parseStoreUrl } from '../config/store-url.js';
import { backendFor, type StoreFactoryOptions, type StoreHandle, type StoreSettings } from './backends/index.js';

export type { BackendCapabilities, StoreFactoryOptions, StoreHandle, StoreSettings } from './backends/index.js';
export { refundReporter } from './backends/redis.js';

export async function createStoreFor(storeConfig: StoreSettings, opts: StoreFactoryOptions = {}): Promise<StoreHandle> {
  // Refused here with the one message (StoreUrlError) when the config was not validated first.
  parseStoreUrl(storeConfig.url);
  return backendFor(storeConfig.url).open(storeConfig, opts);
}
