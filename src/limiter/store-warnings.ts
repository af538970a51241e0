/**
 * @module The rate-limited warnings of store trouble below an outage: failed calls (timeouts…) and the
 * decisions the fault policy made, per Redis master, so the log explains what the metrics count.
 *
 * The first event after a quiet spell is written at once (with what came in the same turn); what follows within the interval is counted
 * and written as one line when it ends (and so on while events keep coming). A node writes at most one
 * line per interval, whatever the traffic; every event is in some line (but the last interval's at shutdown). The state log (state-log.ts)
 * still says when a node starts and stops failing; these lines say how much it cost meanwhile.
 */
import { systemClock, type Clock } from './clock.js';
import type { StoreErrorReason } from './errors.js';
import type { FallbackResult, StoreLog } from './types.js';

export interface StoreWarningsOptions {
  readonly log: StoreLog;
  /** Fields on every line (which store, its redacted URL). */
  readonly where: Readonly<Record<string, unknown>>;
  readonly clock?: Clock;
  /** At most one line per node per this many ms. Default 10 s. */
  readonly intervalMs?: number;
}

export const DEFAULT_WARNING_INTERVAL_MS = 10_000;

interface NodeCounts {
  errors: Partial<Record<StoreErrorReason, number>>;
  fallback: Record<FallbackResult, number>;
  pending: boolean;
  cancel: (() => void) | undefined;
}

export class StoreWarnings {
  private readonly nodes = new Map<string, NodeCounts>();
  private readonly clock: Clock;
  private readonly intervalMs: number;

  constructor(private readonly o: StoreWarningsOptions) {
    this.clock = o.clock ?? systemClock;
    this.intervalMs = Math.max(1, o.intervalMs ?? DEFAULT_WARNING_INTERVAL_MS);
  }

  /** A call to `node` failed (the breaker skipping a call is not a failure: its decision is counted instead). */
  error(node: string, reason: StoreErrorReason): void {
    const c = this.counts(node);
    c.errors[reason] = (c.errors[reason] ?? 0) + 1;
    this.noted(node, c);
  }

  /** The fault policy decided a request whose keys `node` owns. */
  decided(node: string, result: FallbackResult): void {
    const c = this.counts(node);
    c.fallback[result]++;
    this.noted(node, c);
  }

  private counts(node: string): NodeCounts {
    let c = this.nodes.get(node);
    if (c === undefined) {
      c = { errors: {}, fallback: { admitted: 0, refused: 0, unavailable: 0 }, pending: false, cancel: undefined };
      this.nodes.set(node, c);
    }
    return c;
  }

  private noted(node: string, c: NodeCounts): void {
    c.pending = true;
    if (c.cancel !== undefined) return;
    // Not in this call: the failure and the fallback decision it causes (a promise hop later) share the first line.
    c.cancel = this.clock.after(0, () => {
      this.write(node, c);
      this.schedule(node, c);
    });
  }

  /** At the interval's end: what came meanwhile, then another interval; a quiet one ends the node's timer. */
  private schedule(node: string, c: NodeCounts): void {
    c.cancel = this.clock.after(this.intervalMs, () => {
      c.cancel = undefined;
      if (!c.pending) {
        this.nodes.delete(node);
        return;
      }
      this.write(node, c);
      this.schedule(node, c);
    });
  }

  private write(node: string, c: NodeCounts): void {
    const { errors, fallback } = c;
    const decisions = fallback.admitted + fallback.refused + fallback.unavailable;
    const parts: string[] = [];
    for (const [reason, n] of Object.entries(errors))
      parts.push(`${n} ${reason === 'timeout' ? 'timeout' : `${reason} error`}${n === 1 ? '' : 's'}`);
    if (decisions > 0)
      parts.push(
        `${decisions} decision${decisions === 1 ? '' : 's'} by the fault policy (${fallback.admitted} admitted, ${fallback.refused} refused, ${fallback.unavailable} answered 503)`,
      );
    this.o.log.warn(
      { ...this.o.where, node, errors: { ...errors }, fallback: { ...fallback }, intervalMs: this.intervalMs },
      `store node ${node}: ${parts.join(', ')} (at most one such line per ${this.intervalMs / 1000} s)`,
    );
    c.errors = {};
    c.fallback = { admitted: 0, refused: 0, unavailable: 0 };
    c.pending = false;
  }
}
