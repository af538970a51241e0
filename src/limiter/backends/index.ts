/**
 * @module The store backends by URL scheme: each backend (its own file) says which schemes of
 * `store.url` it opens and what it can do. A backend that speaks the Redis protocol (Valkey, KeyDB,
 * Dragonfly) needs only its scheme here and a test; one that does not needs its own file and an entry.
 */
import { storeScheme } from '../../config/store-url.js';
import { memoryBackend } from './memory.js';
import { redisBackends } from './redis.js';
import type { StoreBackend } from './types.js';

const BACKENDS: readonly StoreBackend[] = [memoryBackend, ...redisBackends];

/** Every scheme `store.url` may start with, and the backend that opens it. */
export const STORE_BACKENDS: ReadonlyMap<string, StoreBackend> = new Map(
  BACKENDS.flatMap((b) => b.schemes.map((s) => [s, b] as const)),
);

/** The backend of a `store.url` (checked by the config already: an unknown scheme is a StoreUrlError there). */
export function backendFor(url: string): StoreBackend {
  const scheme = storeScheme(url);
  const backend = STORE_BACKENDS.get(scheme);
  if (backend === undefined) throw new Error(`no store backend for the scheme ${JSON.stringify(scheme)}`);
  return backend;
}

export type { BackendCapabilities, StoreBackend, StoreFactoryOptions, StoreHandle, StoreSettings } from './types.js';
