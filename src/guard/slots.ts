/**
 * @module In-flight slots: at most `max` requests of one key at once. A process-scope slot is counted
 * here; a store-scope one is a lease in the replicated state, renewed while its request runs, so a dead
 * replica frees it by itself. A store that does not answer leaves the slot counted locally.
 */
import type { CompiledConcurrency } from './rules.js';
import type { GuardState } from './state.js';

/** A store-scope slot is leased this long and renewed while its request runs: a dead replica frees it by then. */
export const LEASE_MS = 15_000;

export type Release = () => void;

export class InFlightSlots {
  private readonly local = new Map<string, number>();
  /** Store-scope leases held by this process: lease id → slot key (renewed periodically while any is held). */
  private readonly leases = new Map<string, string>();
  private renewTimer: NodeJS.Timeout | undefined;

  constructor(private readonly state: GuardState) {}

  /**
   * Takes an in-flight slot for `key` (the rule's prefix included); the release to call when the
   * exchange ends (idempotent), or null when all `max` are taken.
   */
  async enter(c: CompiledConcurrency, key: string): Promise<Release | null> {
    if (c.scope === 'store' && this.state.scope === 'shared') {
      let lease: string | null;
      try {
        lease = await this.state.acquire(key, c.max, LEASE_MS);
      } catch {
        return this.enterLocal(c, key);
      }
      if (lease === null) return null;
      this.holdLease(lease, key);
      let done = false;
      return () => {
        if (done) return;
        done = true;
        this.leases.delete(lease);
        this.state.release(key, lease).catch(() => {}); // the lease expires by itself otherwise
      };
    }
    return this.enterLocal(c, key);
  }

  /** Slots held locally now, for tests and triage. */
  inFlight(key: string): number {
    return this.local.get(key) ?? 0;
  }

  close(): void {
    clearInterval(this.renewTimer);
  }

  /** Renewal runs only while a lease is held: no timer otherwise. */
  private holdLease(lease: string, key: string): void {
    this.leases.set(lease, key);
    if (this.renewTimer !== undefined) return;
    this.renewTimer = setInterval(() => {
      if (this.leases.size > 0) return void this.state.renew(this.leases, LEASE_MS).catch(() => {});
      clearInterval(this.renewTimer);
      this.renewTimer = undefined;
    }, LEASE_MS / 3);
    this.renewTimer.unref();
  }

  private enterLocal(c: CompiledConcurrency, key: string): Release | null {
    const n = this.local.get(key) ?? 0;
    if (n >= c.max) return null;
    this.local.set(key, n + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (this.local.get(key) ?? 1) - 1;
      if (left <= 0) this.local.delete(key);
      else this.local.set(key, left);
    };
  }
}
