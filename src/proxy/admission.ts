/**
 * @module Admission to one upstream pool, in front of undici's (whose queue has no deadline and is
 * first come, first served whoever holds the connections): a request takes a connection at once or
 * waits in line for at most `server.upstreamQueueTimeout` (then 503); requests whose body is still
 * arriving hold at most half the connections, so slow uploads never take the connections every other
 * request needs; and one client (IP, or IPv6 network) has at most `server.maxUpstreamConnectionsPerIp`
 * exchanges waiting for or holding a connection. The pool is only ever given as many requests as it
 * has connections, so its own queue stays empty.
 */

/** The settings read per request (a reload applies to the next one). */
export interface AdmissionLimits {
  /** Milliseconds a request may wait for a connection. */
  readonly upstreamQueueTimeout: number;
  /** Exchanges one client may have waiting for or holding a connection; 0: no cap. */
  readonly maxUpstreamConnectionsPerIp: number;
}

/** The `reason` labels of `rategate_upstream_refused_total`, all known in advance (so they start at 0). */
export const ADMISSION_REFUSALS = ['queue_timeout', 'per_ip_cap'] as const;
export type AdmissionRefusal = (typeof ADMISSION_REFUSALS)[number];

/** What the admission reports, as metrics (proxy/ knows nothing of Prometheus). */
export interface AdmissionObserver {
  refused(reason: AdmissionRefusal): void;
  /** Requests waiting for a connection went up (+1) or down (-1). */
  waiting(delta: number): void;
}

/** One request in line for a connection: the exchange itself (no object made per wait). */
export interface Waiter {
  /** Its body is still arriving from the client: it counts against the uploads' share (until `bodyArrived`). */
  upload: boolean;
  /** Links of the wait list, owned by the admission. */
  prevWaiter: Waiter | null;
  nextWaiter: Waiter | null;
  waitTimer: NodeJS.Timeout | null;
  /** Its place in arrival order across both lines: the older head goes first. */
  waitOrder: number;
  /** A connection is its own now: dispatch. */
  admitted(): void;
  /** It waited `upstreamQueueTimeout` in vain: answer 503. */
  expired(): void;
}

/** A FIFO of waiters linked through themselves: leaving the line (a client gone) is O(1). */
class WaitList {
  head: Waiter | null = null;
  private tail: Waiter | null = null;
  push(w: Waiter): void {
    w.prevWaiter = this.tail;
    w.nextWaiter = null;
    if (this.tail === null) this.head = w;
    else this.tail.nextWaiter = w;
    this.tail = w;
  }

  /** Puts `w` among the others by arrival order (it moved from the other line: usually near the tail). */
  insert(w: Waiter): void {
    let before = this.tail;
    while (before !== null && before.waitOrder > w.waitOrder) before = before.prevWaiter;
    w.prevWaiter = before;
    w.nextWaiter = before === null ? this.head : before.nextWaiter;
    if (w.nextWaiter === null) this.tail = w;
    else w.nextWaiter.prevWaiter = w;
    if (before === null) this.head = w;
    else before.nextWaiter = w;
  }

  remove(w: Waiter): void {
    if (w.prevWaiter === null) this.head = w.nextWaiter;
    else w.prevWaiter.nextWaiter = w.nextWaiter;
    if (w.nextWaiter === null) this.tail = w.prevWaiter;
    else w.nextWaiter.prevWaiter = w.prevWaiter;
    w.prevWaiter = w.nextWaiter = null;
  }
}

const NO_CAP: AdmissionLimits = Object.freeze({ upstreamQueueTimeout: 5_000, maxUpstreamConnectionsPerIp: 0 });

export class UpstreamAdmission {
  private active = 0;
  private activeUploads = 0;
  /** How many waiters are in the lists (for `pump` and the gauge). */
  private queued = 0;
  private pumping = false;
  private readonly perClient = new Map<string, number>();
  private readonly plain = new WaitList();
  private readonly uploads = new WaitList();
  private arrivals = 0;
  readonly uploadShare: number;

  constructor(
    /** The pool's connections. */
    readonly connections: number,
    readonly limits: () => AdmissionLimits = () => NO_CAP,
    private readonly observer?: AdmissionObserver,
  ) {
    this.uploadShare = Math.max(1, Math.floor(connections / 2));
  }

  /**
   * Counts one more exchange for `client`: 'counted' (then exactly one `leave(client)` must follow),
   * 'uncapped' (no cap in force: nothing counted, nothing to give back) or 'refused' (its share is taken).
   */
  enter(client: string): 'counted' | 'uncapped' | 'refused' {
    const cap = this.limits().maxUpstreamConnectionsPerIp;
    if (cap === 0) return 'uncapped';
    const n = this.perClient.get(client) ?? 0;
    if (n >= cap) {
      this.observer?.refused('per_ip_cap');
      return 'refused';
    }
    this.perClient.set(client, n + 1);
    return 'counted';
  }

  leave(client: string): void {
    const n = this.perClient.get(client);
    if (n === undefined || n <= 1) this.perClient.delete(client);
    else this.perClient.set(client, n - 1);
  }

  /** A connection for `w` now (true), or `w` waits in line (false) until `admitted()` or `expired()`. */
  acquire(w: Waiter): boolean {
    const line = w.upload ? this.uploads : this.plain;
    if (line.head === null && this.hasRoom(w.upload)) {
      this.take(w.upload);
      return true;
    }
    line.push(w);
    w.waitOrder = this.arrivals++;
    this.queued++;
    this.observer?.waiting(1);
    w.waitTimer = setTimeout(expire, this.limits().upstreamQueueTimeout, this, w);
    return false;
  }

  /** The connection `acquire` gave (or `admitted()` announced) is free again. */
  release(upload: boolean): void {
    this.active--;
    if (upload) this.activeUploads--;
    if (this.queued > 0) this.pump();
  }

  /**
   * The client has sent all of `w`'s body: it is an upload no more. Waiting, it moves to the other line
   * (keeping its place and deadline); holding a connection, it frees its place in the uploads' share.
   * A small body that came a moment after its head (most clients send them apart) is not an upload.
   */
  bodyArrived(w: Waiter, holding: boolean): void {
    if (!w.upload) return;
    if (w.waitTimer !== null) {
      this.uploads.remove(w);
      w.upload = false;
      this.plain.insert(w);
    } else {
      w.upload = false;
      if (!holding) return;
      this.activeUploads--;
    }
    if (this.queued > 0) this.pump();
  }

  /** `w` leaves the line without a connection (its client went away, its body failed). */
  cancel(w: Waiter): void {
    if (w.waitTimer === null) return;
    this.unlink(w);
  }

  /** Exchanges waiting for a connection. */
  get waiting(): number {
    return this.queued;
  }

  /** Per-IP counts held (tests: every ending gave its count back). */
  get clientsHolding(): number {
    return this.perClient.size;
  }

  onExpired(w: Waiter): void {
    if (w.waitTimer === null) return;
    this.unlink(w);
    this.observer?.refused('queue_timeout');
    w.expired();
  }

  private hasRoom(upload: boolean): boolean {
    return this.active < this.connections && (!upload || this.activeUploads < this.uploadShare);
  }

  private take(upload: boolean): void {
    this.active++;
    if (upload) this.activeUploads++;
  }

  private unlink(w: Waiter): void {
    clearTimeout(w.waitTimer!);
    w.waitTimer = null;
    (w.upload ? this.uploads : this.plain).remove(w);
    this.queued--;
    this.observer?.waiting(-1);
  }

  /** Hands free connections to the oldest waiters that may take them. Re-entrant calls (an exchange that ends at once) only count. */
  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    try {
      for (;;) {
        const p = this.plain.head !== null && this.hasRoom(false) ? this.plain.head : null;
        const u = this.uploads.head !== null && this.hasRoom(true) ? this.uploads.head : null;
        const next = p === null ? u : u === null ? p : p.waitOrder < u.waitOrder ? p : u;
        if (next === null) return;
        this.unlink(next);
        this.take(next.upload);
        next.admitted();
      }
    } finally {
      this.pumping = false;
    }
  }
}

/** The wait timer's callback: a module function with arguments, so no closure is made per wait. */
function expire(admission: UpstreamAdmission, w: Waiter): void {
  admission.onExpired(w);
}
