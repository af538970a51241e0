/**
 * @module The stores a gateway test runs on, set up once per file: the recording upstream, and a Redis
 * and a Redis Cluster of the file's own (each skipped, with the reason, where its binary is missing).
 * `cases` names every store once, leases on and off where they apply, so per-store copies of a test
 * are rows of one table instead.
 */
import { afterAll, beforeAll } from 'vitest';
import { startRecordingUpstream, type RecordingUpstream } from './recording-upstream.js';
import {
  skipCluster,
  skipRedis,
  startRedis,
  startRedisCluster,
  type ClusterHandle,
  type RedisHandle,
} from './redis.js';
import { scaledMs } from './speed.js';

export interface StoreCase {
  readonly name: string;
  /** The gateway's `--store` (read once the file's servers are up). */
  readonly url: () => string;
  /** `store.lease` for the case (the memory store has none). */
  readonly lease: boolean;
  readonly skip: boolean;
}

export interface StoreMatrix {
  /** The recording upstream (once the file's set-up ran). */
  readonly upstream: () => RecordingUpstream;
  /** memory, Redis with and without leases, Redis Cluster with leases. */
  readonly cases: readonly StoreCase[];
}

/** Registers the file's set-up and tear-down; `what` names the tests in a skip's reason. */
export function storeMatrix(what: string): StoreMatrix {
  const noRedis = skipRedis(`${what} on Redis`);
  const noCluster = skipCluster(`${what} on Redis Cluster`);
  let upstream: RecordingUpstream | undefined;
  let redis: RedisHandle | undefined;
  let cluster: ClusterHandle | undefined;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    if (!noRedis) redis = await startRedis();
    if (!noCluster) cluster = await startRedisCluster();
  }, scaledMs(60_000));
  afterAll(async () => {
    await upstream?.close();
    await redis?.stop();
    await cluster?.stop();
  });
  return {
    upstream: () => upstream!,
    cases: [
      { name: 'memory', url: () => 'memory', lease: false, skip: false },
      { name: 'redis with leases', url: () => redis!.url, lease: true, skip: noRedis },
      { name: 'redis without leases', url: () => redis!.url, lease: false, skip: noRedis },
      { name: 'redis-cluster with leases', url: () => cluster!.url, lease: true, skip: noCluster },
    ],
  };
}
