/**
 * @module The log lines of the shared store's state, per Redis master: each change once, in the order it
 * happened, never a line per request, and never a "recovered" while decisions still fail.
 *
 * What is written, from the breakers' events (resilient.ts):
 *   - `store node N failing` (warn) when N's breaker opens: its keys follow the fault policy. A lone
 *     failed call that does not open the breaker is a metric (rategate_store_errors_total), not a line,
 *     so that ordinary hiccups neither fill the log nor hide the next real outage;
 *   - `store failover: M promoted in place of N` (warn) when a replica took over N's keys, and then
 *     `store node M: decisions for N's keys are shared again` (info) at the first decision the store
 *     makes for them (not before: the new master may not answer at once);
 *   - `store node N recovered` (info) once N's calls have succeeded for `holdMs` without failing again:
 *     a node that flaps writes one failing line and one recovered line per stable period, not a pair per
 *     flap;
 *   - `store unreachable at start` (warn) and `store connected` (info) around start-up.
 * Every line names the node (`node`) as well as the store and its redacted URL.
 */
import { systemClock, type Clock } from './clock.js';
import type { StoreLog } from './types.js';

export interface StoreStateLogOptions {
  readonly log: StoreLog;
  /** Fields on every line (which store, its redacted URL). */
  readonly where: Readonly<Record<string, unknown>>;
  /** What decides meanwhile, for the failure lines: e.g. `onError: local`. */
  readonly policy: string;
  readonly clock?: Clock;
  /** How long a node must have succeeded before it is said to have recovered. Default 2 s. */
  readonly holdMs?: number;
}

interface NodeState {
  /** What the log last said of this node. */
  reported: 'ok' | 'failing';
  failing: boolean;
  cause: string | undefined;
  cancelHold: (() => void) | undefined;
}

export class StoreStateLog {
  private readonly nodes = new Map<string, NodeState>();
  private startFailing = false;
  private readonly clock: Clock;
  private readonly holdMs: number;

  constructor(private readonly o: StoreStateLogOptions) {
    this.clock = o.clock ?? systemClock;
    this.holdMs = o.holdMs ?? 2_000;
  }

  /** Start-up gave up waiting for a first connection. */
  unreachableAtStart(cause: string | undefined): void {
    this.startFailing = true;
    this.o.log.warn(
      { ...this.o.where, err: cause },
      `store unreachable at start: serving under ${this.o.policy} until it connects`,
    );
  }

  /** The first connection was made after start-up went on without it. */
  connected(): void {
    if (!this.startFailing) return;
    this.startFailing = false;
    this.o.log.info(this.o.where, 'store connected');
  }

  /** `node`'s breaker opened: its keys follow the fault policy. */
  opened(node: string, cause: string | undefined): void {
    const s = this.state(node);
    s.failing = true;
    if (cause !== undefined) s.cause = cause;
    this.stopHold(s);
    if (s.reported === 'failing') return;
    s.reported = 'failing';
    this.o.log.warn(
      { ...this.o.where, node, err: s.cause },
      `store node ${node} failing: decisions for its keys follow ${this.o.policy} until it recovers or a replica is promoted`,
    );
  }

  /** A call to `node` failed (the breaker may not have opened): a recovery under way is off. */
  failed(node: string, cause: string | undefined): void {
    const s = this.state(node);
    s.failing = true;
    if (cause !== undefined) s.cause = cause;
    this.stopHold(s);
  }

  /** `node`'s calls succeed again: said once they have for the hold time. */
  succeeded(node: string): void {
    const s = this.state(node);
    s.failing = false;
    if (s.reported === 'ok' || s.cancelHold !== undefined) return;
    s.cancelHold = this.clock.after(this.holdMs, () => {
      s.cancelHold = undefined;
      if (s.failing || s.reported === 'ok') return;
      s.reported = 'ok';
      this.o.log.info(
        { ...this.o.where, node },
        `store node ${node} recovered: decisions for its keys are shared again`,
      );
    });
  }

  /** A replica took over `from` (the breaker named `node`): its keys are decided by `to` now. */
  promoted(from: string, to: string, node: string): void {
    const s = this.nodes.get(node);
    if (s !== undefined) this.stopHold(s);
    this.nodes.delete(node);
    this.o.log.warn(
      { ...this.o.where, node: from, promoted: to },
      `store failover: ${to} promoted in place of ${from}`,
    );
  }

  /** The first store decision for the keys of `from` since `to` took over. */
  shared(from: string, to: string): void {
    this.o.log.info(
      { ...this.o.where, node: to, replaced: from },
      `store node ${to}: decisions for the keys of ${from} are shared again`,
    );
  }

  private state(node: string): NodeState {
    let s = this.nodes.get(node);
    if (s === undefined) {
      s = { reported: 'ok', failing: false, cause: undefined, cancelHold: undefined };
      this.nodes.set(node, s);
    }
    return s;
  }

  private stopHold(s: NodeState): void {
    s.cancelHold?.();
    s.cancelHold = undefined;
  }
}
