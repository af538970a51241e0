/**
 * @module One surge trigger's share per client network: what each network (an IPv4 /24, an IPv6 /48 by
 * default) has added to the trigger's count, so that none adds more than `perNetwork` within `within`
 * and one home allocation or rented range cannot start a surge meant for a wave from many networks.
 */
import { BoundedMap } from '../identity/bounded-map.js';
import { Evaluation, evaluate, type State } from '../limiter/algorithms.js';
import type { BucketSpec } from '../limiter/types.js';

/**
 * Networks remembered per surge (measured ≈ 120 B each beside its name: under 2 MB per surge). Each one costs an attacker a
 * network the upstream answered as counted; past the bound the network seen longest ago is forgotten and
 * gets a fresh share, which takes 10 000 other counted networks, more than a trigger needs.
 */
export const MAX_NETWORKS = 10_000;

export class NetworkShares {
  /** Each network's count in the trigger's own algorithm and window (sliding), so its share of the count is bounded as the count is. */
  private readonly spec: BucketSpec;
  private readonly counted: BoundedMap<string, State>;
  /** Reused: weighing a share allocates nothing. */
  private readonly weighed = new Evaluation();

  constructor(
    readonly perNetwork: number,
    readonly withinMs: number,
    max = MAX_NETWORKS,
  ) {
    this.spec = {
      key: '',
      limit: perNetwork,
      periodMs: withinMs,
      algorithm: 'sliding-window',
      cost: 1,
      shadow: false,
      onError: 'local',
    };
    this.counted = new BoundedMap(max);
  }

  /** Whether `network` may add one more to the count at `now`; when it may, that one is taken from its share. */
  take(network: string, now: number): boolean {
    const e = evaluate(this.spec, this.counted.get(network), now, this.weighed);
    if (!e.ok) return false;
    this.counted.set(network, [e.nextA, e.nextB, e.nextC]);
    return true;
  }

  /** The count started again (the surge started or was ended): every network's share is whole again. */
  clear(): void {
    this.counted.clear();
  }

  /** Networks remembered now. */
  get size(): number {
    return this.counted.size;
  }
}
