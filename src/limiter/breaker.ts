/**
 * @module One circuit breaker, for one Redis master (a cluster has one per master; a single Redis or a
 * Sentinel-managed one has one), so that a dead master costs nothing and affects only its own keys.
 *
 * After `failureThreshold` consecutive failures it opens, and for `openMs` no call reaches its node.
 * Then it is half-open: exactly one call (a background ping of this node when the store has one, else
 * the next request) probes it; success closes the breaker, failure opens it again. A failure below the
 * threshold also schedules a background probe, so recovery is noticed without a request (the requests
 * that would notice may never come, e.g. clients the blocked cache answers locally).
 *
 * Time (the open period, the probe's timer) comes from an injected Clock, so tests move time by hand.
 */
import type { Clock } from './clock.js';
import { StoreError, type StoreErrorReason } from './errors.js';

export type CircuitState = 'closed' | 'open' | 'half-open';
export type StoreOp = 'consume' | 'peek' | 'reset';

export interface BreakerOptions {
  /** Consecutive failures that open the breaker. */
  readonly failureThreshold: number;
  /** How long it stays open before one probe is let through. */
  readonly openMs: number;
}

export const DEFAULT_BREAKER: BreakerOptions = { failureThreshold: 5, openMs: 1_000 };

/** What a breaker reports to its owner (the fault policy), which adds the node and turns it into events. */
export interface BreakerListener {
  error(op: StoreOp | 'ping', reason: StoreErrorReason): void;
  circuit(state: CircuitState): void;
  /** Calls for this node fail (true: `cause` is the failure) or succeed again (false). */
  failing(on: boolean, cause: unknown): void;
}

export class Breaker {
  private state: CircuitState = 'closed';
  private failures = 0;
  private openUntil = 0;
  /** A probe is in flight: other calls keep to the fault policy until it answers. */
  private probing = false;
  private cancelProbe: (() => void) | undefined;
  private failingOn = false;
  private closed = false;

  constructor(
    private readonly o: BreakerOptions & {
      readonly clock: Clock;
      /** Pings this node only (the half-open probe), when the store can. */
      readonly ping: (() => Promise<unknown>) | undefined;
      readonly listener: BreakerListener;
    },
  ) {}

  get circuit(): CircuitState {
    return this.state;
  }

  /** True while calls for this node fail or are kept from it. */
  get failing(): boolean {
    return this.failingOn;
  }

  /** May this call go to the node? Half-open lets exactly one through (the probe). */
  admit(): boolean {
    if (this.state === 'closed') return true;
    if (this.state === 'open') {
      if (this.o.clock.now() < this.openUntil) return false;
      this.setState('half-open');
    }
    if (this.probing) return false;
    this.probing = true;
    return true;
  }

  /** A call the breaker kept from the node: the fault policy decides it. */
  skipped(): void {
    this.setFailing(true, undefined);
  }

  succeeded(): void {
    this.failures = 0;
    this.probing = false;
    if (this.state !== 'closed') {
      this.stopProbe();
      this.setState('closed');
    }
    this.setFailing(false, undefined);
  }

  failed(op: StoreOp | 'ping', err: unknown): void {
    this.o.listener.error(op, err instanceof StoreError ? err.reason : 'connection');
    this.setFailing(true, err);
    this.failures++;
    this.probing = false;
    if (this.state === 'half-open' || this.failures >= this.o.failureThreshold) this.open();
    else this.scheduleProbe();
  }

  /** Stops the probe for good (the store closes, or the node is no longer a master). */
  close(): void {
    this.closed = true;
    this.stopProbe();
  }

  private open(): void {
    this.openUntil = this.o.clock.now() + this.o.openMs;
    this.setState('open');
    this.stopProbe();
    this.scheduleProbe();
  }

  /** Probes in the background, one openMs from now, so that recovery neither waits for nor costs a request. */
  private scheduleProbe(inMs = this.o.openMs): void {
    const ping = this.o.ping;
    if (ping === undefined || this.closed || this.cancelProbe !== undefined) return;
    this.cancelProbe = this.o.clock.after(inMs, () => {
      this.cancelProbe = undefined;
      if (this.closed) return;
      // A timer may fire a millisecond before the clock says the open period is over: wait that out.
      const early = this.openUntil - this.o.clock.now();
      if (this.state === 'open' && early > 0) return this.scheduleProbe(early);
      if (this.state === 'open' ? !this.admit() : this.state !== 'closed' || !this.failingOn) return;
      ping().then(
        () => {
          if (!this.closed) this.succeeded();
        },
        (err: unknown) => {
          if (!this.closed) this.failed('ping', err);
        },
      );
    });
  }

  private stopProbe(): void {
    this.cancelProbe?.();
    this.cancelProbe = undefined;
  }

  private setState(s: CircuitState): void {
    if (this.state === s) return;
    this.state = s;
    this.o.listener.circuit(s);
  }

  private setFailing(on: boolean, cause: unknown): void {
    if (this.failingOn === on) return;
    this.failingOn = on;
    this.o.listener.failing(on, cause);
  }
}
