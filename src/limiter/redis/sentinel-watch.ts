/**
 * @module Follows a Sentinel-managed master's promotions as the sentinels announce them, so that the
 * client never goes back to a master the sentinels have replaced.
 *
 * ioredis asks one sentinel for the master's address and believes it. After a failover the sentinels
 * learn the new configuration from each other within a few seconds, and until then a lagging one still
 * names the old master: a client reconnecting meanwhile goes back to it (dead: decisions stay on the
 * fault policy for seconds; restarted empty: it is a master by its own config until the sentinels demote
 * it, a split brain). So this subscribes to `+switch-master` on every sentinel, and maps an address
 * announced as replaced to its replacement (ioredis's `natMap` hook, applied to every address a
 * sentinel names); and when the client is on (or connecting to) the replaced master (frozen, so its
 * connection never breaks), it reconnects it at once, and a client waiting out its back-off goes now.
 *
 * ioredis's own `failoverDetector` does the same job badly and stays off (connection.ts): on
 * +switch-master it ends the connector even while the client is resolving the master from a sentinel
 * (status `connecting`, a window that comes back every reconnection attempt while the master is dead and
 * widens on a loaded machine), and the connect then fails with "Connection is closed." and ioredis sets
 * the client to `end`: it never reconnects, and that gateway's decisions stay on the fault policy for
 * good. So this never disconnects a client that has no stream yet, and a client that ends while it is
 * followed (not closed by its owner) is connected again.
 */
import { Redis, type RedisOptions } from 'ioredis';
import type { StoreNode, StoreUrl } from '../../config/store-url.js';

export class SentinelWatch {
  /** Replaced address → its replacement, as `host:port`. */
  private readonly replaced = new Map<string, string>();
  private readonly subscribers: Redis[] = [];
  private onSwitch: ((to: string, from: string) => void) | undefined;
  /** Closed by its owner: a client that ends now is meant to. */
  private closed = false;

  constructor(
    private readonly name: string,
    private readonly sentinels: readonly StoreNode[],
    private readonly options: Pick<RedisOptions, 'password' | 'tls'>,
  ) {}

  /** The natMap hook: where to go instead of an address a lagging sentinel may still give. */
  readonly map = (key: string): { host: string; port: number } | null => {
    const to = this.replaced.get(key);
    if (to === undefined) return null;
    const colon = to.lastIndexOf(':');
    return { host: to.slice(0, colon), port: Number(to.slice(colon + 1)) };
  };

  /**
   * Keeps `client` (a Sentinel-mode client of this master) on the master the sentinels announce, and
   * subscribes on every sentinel; `switched` is told the new master's address and the replaced one's.
   */
  follow(client: Redis, switched?: (to: string, from: string) => void): void {
    const remote = (): string | undefined => {
      const s = client.stream;
      return s?.remoteAddress === undefined ? undefined : `${s.remoteAddress}:${s.remotePort}`;
    };
    this.start((to, from) => {
      switched?.(to, from);
      const status = client.status;
      // 'connecting' has no stream yet: ending the connector now would end the client for good, and its
      // resolution goes through `map` anyway.
      if ((status === 'connect' || status === 'ready') && remote() !== to) client.disconnect(true);
      else if (status === 'reconnecting') {
        // Now, not after the back-off; its pending timer (an ioredis field) would start a second chain
        // of attempts, so it goes (were the field renamed, that chain is the only cost).
        const pending = client as unknown as { reconnectTimeout?: NodeJS.Timeout | null };
        if (pending.reconnectTimeout) clearTimeout(pending.reconnectTimeout);
        pending.reconnectTimeout = null;
        client.connect().catch(() => {});
      }
    });
    // A resolution made before the announcement (or by a lagging sentinel, before `map` knew) may land on
    // the replaced master, which accepts connections when frozen or restarted: leave it before using it.
    client.on('connect', () => {
      const at = remote();
      if (at !== undefined && this.replaced.has(at)) client.disconnect(true);
    });
    client.on('end', () => {
      if (!this.closed) setTimeout(() => this.closed || client.connect().catch(() => {}), 50).unref();
    });
  }

  /** Subscribes on every sentinel; `switched` is told the new master's address and the replaced one's. */
  private start(switched: (to: string, from: string) => void): void {
    this.onSwitch = switched;
    for (const s of this.sentinels) {
      const sub = new Redis({
        host: s.host,
        port: s.port,
        ...this.options,
        lazyConnect: true,
        enableOfflineQueue: true,
        maxRetriesPerRequest: null,
        retryStrategy: (times) => Math.min(times * 200, 2_000),
      });
      sub.on('error', () => {}); // a sentinel down: the others announce the switch
      sub.on('message', (channel: string, message: string) => this.message(channel, message));
      sub.connect().then(
        () => sub.subscribe('+switch-master'),
        () => {},
      );
      this.subscribers.push(sub);
    }
  }

  /** `+switch-master`: `NAME OLDIP OLDPORT NEWIP NEWPORT`. */
  private message(channel: string, message: string): void {
    if (channel !== '+switch-master') return;
    const [name, oldIp, oldPort, newIp, newPort] = message.split(' ');
    if (name !== this.name || newPort === undefined) return;
    const from = `${oldIp}:${oldPort}`;
    const to = `${newIp}:${newPort}`;
    if (this.replaced.get(from) === to) return;
    // The new master is nobody's replacement any more (a failover back to an old address).
    this.replaced.delete(to);
    for (const [k, v] of this.replaced) if (v === from) this.replaced.set(k, to);
    this.replaced.set(from, to);
    this.onSwitch?.(to, from);
  }

  close(): void {
    this.closed = true;
    for (const s of this.subscribers) s.disconnect();
    this.subscribers.length = 0;
  }
}

/** The watch a store URL needs: one for a Sentinel URL (with the sentinels' own password), none otherwise. */
export function sentinelWatchFor(
  url: StoreUrl,
  sentinelPassword: string | null | undefined,
): SentinelWatch | undefined {
  if (url.kind !== 'redis-sentinel') return undefined;
  return new SentinelWatch(url.name, url.sentinels, {
    ...(sentinelPassword != null ? { password: sentinelPassword } : {}),
    ...(url.tls ? { tls: {} } : {}),
  });
}
