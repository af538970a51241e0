/**
 * @module Which Redis master decides a key, and when that changes: the node names the fault policy
 * keeps a breaker per (resilient.ts), the promotions it is told of, and the slot-map refreshes that make
 * a failover noticed within a bound.
 *
 * Cluster: a key's master is the first node of its slot in ioredis's slot map. The map is refreshed
 * every second by ioredis, and here also at once after a failed call and then every 250 ms while calls
 * fail (at most one refresh in flight), so that a promotion is seen within about a refresh of Redis
 * making it, even when the dead master's keys send no call (their breaker is open). Each refresh is
 * compared with the last known owner of each slot: a master that owns no slot any more, its slots now
 * another node's (its promoted replica's), was replaced.
 *
 * Single Redis: one node, `host:port`. Sentinel: one node named by the master name; a promotion is
 * what the sentinels announce (+switch-master, sentinel-watch.ts) or a reconnection that lands on
 * another address, whichever comes first.
 */
import type { Cluster, Redis } from 'ioredis';
import type { SentinelWatch } from './sentinel-watch.js';
import { keySlot } from './slot.js';

/** How often the slot map is refreshed while calls fail. */
const TROUBLE_REFRESH_MS = 250;
/** How long after the last failure the fast refreshes go on. */
const TROUBLE_MS = 5_000;
const SLOTS = 16_384;

export type PromotionListener = (from: string, to: string, node: string) => void;

export interface Topology {
  /** The master deciding `key` (a full key, prefix included). */
  nodeOf(key: string): string;
  /** The masters deciding these buckets (keys `prefix + spec.key`): each slot's owner, once; usually one. */
  nodesOf(prefix: string, specs: readonly { readonly key: string }[]): readonly string[];
  /** A call failed: look for a new master soon. */
  troubled(): void;
  /** True when every key has a master to go to (cluster: all slots covered). */
  covered(): boolean;
  onPromotion(fn: PromotionListener): void;
  close(): void;
}

export function clusterTopology(client: Cluster, now: () => number = Date.now): Topology {
  const listeners: PromotionListener[] = [];
  let last: readonly (readonly string[] | undefined)[] = [];
  let troubleUntil = 0;
  let timer: NodeJS.Timeout | undefined;
  let lastRefresh = 0;

  const refresh = (): void => {
    lastRefresh = now();
    client.refreshSlotsCache();
  };
  client.on('refresh', () => {
    const slots = client.slots;
    for (const [from, to] of replacedMasters(last, slots)) for (const fn of listeners) fn(from, to, from);
    last = slots.map((s, i) => (s?.[0] === undefined ? last[i] : [...s]));
  });

  const nodeOf = (key: string): string => client.slots[keySlot(key)]?.[0] ?? 'unassigned';
  return {
    nodeOf,
    nodesOf(prefix, specs) {
      if (specs.length === 0) return ['unassigned'];
      const first = nodeOf(prefix + specs[0]!.key);
      let out: string[] | undefined;
      for (let i = 1; i < specs.length; i++) {
        const n = nodeOf(prefix + specs[i]!.key);
        if (n !== first && !(out ??= [first]).includes(n)) out.push(n);
      }
      return out ?? [first];
    },
    troubled() {
      troubleUntil = now() + TROUBLE_MS;
      if (now() - lastRefresh >= TROUBLE_REFRESH_MS / 2) refresh();
      if (timer !== undefined) return;
      timer = setInterval(() => {
        if (now() > troubleUntil) {
          clearInterval(timer);
          timer = undefined;
        } else refresh();
      }, TROUBLE_REFRESH_MS);
      timer.unref();
    },
    covered() {
      const slots = client.slots;
      for (let i = 0; i < SLOTS; i++) if (slots[i]?.[0] === undefined) return false;
      return true;
    },
    onPromotion: (fn) => void listeners.push(fn),
    close() {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
    },
  };
}

/**
 * Masters that own no slot any more, each with the master that took its first slot: owner changes from
 * the last known owner of each slot (a refresh that saw a slot without a master, between a master's
 * failure and its replica's promotion, does not forget who it was). Their breakers can go.
 */
function replacedMasters(
  last: readonly (readonly string[] | undefined)[],
  slots: readonly (readonly string[] | undefined)[],
): Array<[string, string]> {
  const moved = new Map<string, string>();
  const owners = new Set<string>();
  for (let i = 0; i < SLOTS; i++) {
    const to = slots[i]?.[0];
    if (to === undefined) continue;
    owners.add(to);
    const from = last[i]?.[0];
    if (from !== undefined && from !== to && !moved.has(from)) moved.set(from, to);
  }
  return [...moved].filter(([from]) => !owners.has(from));
}

/**
 * A single Redis (`node`: its `host:port`), or a Sentinel-managed master (`node`: its name; `watch`
 * follows the sentinels' announcements: a client still on a replaced master reconnects at once).
 */
export function singleTopology(client: Redis, node: string, watch?: SentinelWatch): Topology {
  const listeners: PromotionListener[] = [];
  let address: string | undefined;
  /** The last new master announced: the sentinels' message and the reconnection say it once between them. */
  let announced: string | undefined;
  const announce = (from: string, to: string): void => {
    if (to === announced) return;
    announced = to;
    for (const fn of listeners) fn(`${node} at ${from}`, `${node} at ${to}`, node);
  };
  if (watch !== undefined) {
    watch.follow(client, (to, from) => announce(from, to));
    client.on('ready', () => {
      const s = client.stream;
      const now = s?.remoteAddress === undefined ? undefined : `${s.remoteAddress}:${s.remotePort}`;
      if (address !== undefined && now !== undefined && now !== address) announce(address, now);
      address = now ?? address;
    });
  }
  const one = [node];
  return {
    nodeOf: () => node,
    nodesOf: () => one,
    troubled: () => {},
    covered: () => client.status === 'ready',
    onPromotion: (fn) => void listeners.push(fn),
    close: () => watch?.close(),
  };
}
