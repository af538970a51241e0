/**
 * @module The Redis store's health probe: a breaker's recovery probe, and /readyz.
 */
import { StoreError } from '../errors.js';
import { isCluster, type RedisClient } from './connection.js';
import type { Topology } from './topology.js';

/**
 * One round trip to `node` (a master as `nodeOf` names it), or to every master, bounded by the
 * timeout (`bounded`). It checks what decisions need, not just that a server answers: on a cluster that
 * the node is a master in the slot map (and, for all, that every slot has one); on a single or
 * Sentinel-managed Redis that the server's role is master (a demoted master answers PING too).
 */
export async function pingStore(
  client: RedisClient,
  topology: Topology,
  bounded: <T>(p: Promise<T>, what: string) => Promise<T>,
  node?: string,
): Promise<void> {
  if (isCluster(client)) {
    const masters = client
      .nodes('master')
      .filter((m) => node === undefined || `${m.options.host}:${m.options.port}` === node);
    if (masters.length === 0)
      throw new StoreError(
        'connection',
        `store ping: ${node === undefined ? 'no cluster master' : `${node} is not a master`} in the slot map`,
      );
    if (node === undefined && !topology.covered())
      throw new StoreError('clusterdown', 'store ping: some slots have no master');
    await bounded(Promise.all(masters.map((m) => m.ping())), 'ping');
  } else {
    // ioredis writes ROLE (allowed while a server loads) before its ready check ends, when script
    // calls are still refused: a probe passing then would close the breaker too early.
    if (client.status !== 'ready')
      throw new StoreError('connection', `store ping: connection ${client.status}, not ready`);
    const role = await bounded(client.call('ROLE') as Promise<unknown[]>, 'ping');
    if (role[0] !== 'master')
      throw new StoreError('readonly', `store ping: the server is a ${String(role[0])}, not the master`);
  }
}
