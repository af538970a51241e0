/**
 * @module The shared guard state's in-flight leases (redis-state.ts): sorted sets scored by expiry,
 * under their slot key's own hash tag, so a dead replica's slots free themselves when its leases run out.
 */
import { CALL_MS } from './redis-client.js';
import type { GuardClient } from './redis-scripts.js';
import { bounded } from './redis-resync.js';

export class RedisLeaseSlots {
  constructor(
    private readonly client: GuardClient,
    private readonly prefix: string,
    /** Bound of `acquire`, which is on the request path (the store timeout). */
    private readonly timeoutMs: number,
    private readonly now: () => number,
  ) {}

  /** Takes one of `max` slots of `key` as `lease` for `leaseMs`; true when taken. */
  async acquire(key: string, max: number, leaseMs: number, lease: string): Promise<boolean> {
    const ok = await bounded(
      this.client.rgAcquire(this.leaseKey(key), this.now(), max, leaseMs, lease),
      this.timeoutMs,
    );
    return ok === 1;
  }

  async release(key: string, lease: string): Promise<void> {
    await bounded(this.client.zrem(this.leaseKey(key), lease), CALL_MS);
  }

  /** Extends the leases held (lease → key) to `leaseMs` from now; a lease already gone stays gone. */
  async renew(leases: ReadonlyMap<string, string>, leaseMs: number): Promise<void> {
    if (leases.size === 0) return;
    const until = this.now() + leaseMs;
    await Promise.all(
      [...leases].map(([lease, key]) => this.client.zadd(this.leaseKey(key), 'XX', until, lease).catch(() => 0)),
    );
  }

  /** Each rule's key carries its own hash tag (the bucket's), so leases spread over a cluster. */
  private leaseKey(key: string): string {
    return `${this.prefix}:lease:${key}`;
  }
}
