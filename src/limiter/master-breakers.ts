/**
 * @module The circuit breakers of a remote store's masters, one per master: which masters are failing,
 * and a promoted master's keys followed until the store decides for them again (resilient.ts).
 */
import { Breaker, type BreakerOptions, type CircuitState } from './breaker.js';
import type { Clock } from './clock.js';
import type { PrimaryStore, StoreEvent } from './types.js';

/** The node name of a store that has only one. */
export const ONE_NODE = 'store';

export class MasterBreakers {
  private readonly breakers = new Map<string, Breaker>();
  readonly failing = new Set<string>();
  /** Promoted in place of a failing master, no store decision yet: by the node names its keys may now go to. */
  readonly awaitingShared = new Map<string, { from: string; to: string; node: string }>();
  private closed = false;

  constructor(
    private readonly primary: PrimaryStore,
    private readonly opts: BreakerOptions,
    private readonly clock: Clock,
    private readonly emit: (e: StoreEvent) => void,
  ) {}

  /** The worst breaker state over the masters: open, else half-open, else closed. */
  get circuit(): CircuitState {
    let worst: CircuitState = 'closed';
    for (const b of this.breakers.values()) {
      if (b.circuit === 'open') return 'open';
      if (b.circuit === 'half-open') worst = 'half-open';
    }
    return worst;
  }

  /** Closes every breaker; breakers made after this one do not ping. */
  close(): void {
    this.closed = true;
    for (const b of this.breakers.values()) b.close();
  }

  breaker(node: string): Breaker {
    let b = this.breakers.get(node);
    if (b === undefined) {
      b = this.newBreaker(node);
      this.breakers.set(node, b);
    }
    return b;
  }

  private newBreaker(node: string): Breaker {
    const ping = this.primary.ping?.bind(this.primary);
    let breaker: Breaker | undefined = undefined;
    breaker = new Breaker({
      ...this.opts,
      clock: this.clock,
      ping: ping === undefined || this.closed ? undefined : () => ping(node === ONE_NODE ? undefined : node),
      listener: {
        error: (op, reason) => this.emit({ type: 'error', op, reason, node }),
        circuit: (state) => this.emit({ type: 'circuit', state, node }),
        failing: (on, cause) => this.nodeFailing(node, on, cause, breaker?.circuit ?? 'closed'),
      },
    });
    return breaker;
  }

  private nodeFailing(node: string, on: boolean, cause: unknown, circuit: CircuitState): void {
    const before = this.failing.size > 0;
    if (on) this.failing.add(node);
    else this.failing.delete(node);
    this.emit(
      cause === undefined
        ? { type: 'node', node, failing: on, circuit }
        : { type: 'node', node, failing: on, circuit, cause },
    );
    const after = this.failing.size > 0;
    if (before !== after)
      this.emit(
        cause === undefined || !after
          ? { type: 'fallback_active', active: after }
          : { type: 'fallback_active', active: after, cause },
      );
  }

  /** A replica took over `from`: its keys are the new master's now, so the old breaker goes. */
  promoted(from: string, to: string, node: string): void {
    const b = this.breakers.get(node);
    const wasFailing = this.failing.has(node);
    if (b !== undefined) {
      b.close();
      this.breakers.delete(node);
    }
    if (wasFailing) this.nodeFailing(node, false, undefined, 'closed');
    this.emit({ type: 'promotion', from, to, node, wasFailing });
    // Shared again at the first decision the store makes for these keys, not at the promotion: the new
    // master may take a while to answer. Its keys go to `node` (Sentinel: the master's name) or `to` (a cluster node).
    if (wasFailing) {
      const awaited = { from, to, node };
      this.awaitingShared.set(node, awaited);
      this.awaitingShared.set(to, awaited);
    }
  }

  /** The store decided for `node`'s keys: if they were waiting since a promotion, they are shared again. */
  decidedBy(node: string): void {
    const a = this.awaitingShared.get(node);
    if (a === undefined) return;
    this.awaitingShared.delete(a.node);
    this.awaitingShared.delete(a.to);
    this.emit({ type: 'shared', ...a });
  }
}
