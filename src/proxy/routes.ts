/**
 * @module Several upstreams (SPEC §3.2): each named upstream gets its own pool (and tunnel) with its own
 * timeouts, built at start; `routes` pick one by method and normalized path, first match wins. Requests
 * no route names go to the default upstream. Rules are decided before and apart from the route.
 */
import type { Config } from '../config/index.js';
import { compileMatcher, type RuleMatcher } from '../routing/index.js';
import { Forwarder, type ForwarderOptions } from './forward.js';
import { Tunnel } from './tunnel.js';

/** What every proxy pool shares: the live limits of its admission (server.*) and where it reports. */
export type PoolAdmission = Pick<ForwarderOptions, 'admission' | 'observer'>;

export interface RoutedUpstream {
  readonly name: string;
  readonly forwarder: Forwarder;
  readonly tunnel: Tunnel;
}

interface Route {
  readonly patterns: readonly string[];
  /** null: the default upstream (`upstream: default`). */
  readonly to: RoutedUpstream | null;
}

export class UpstreamRoutes {
  private readonly matcher: RuleMatcher<Route>;
  readonly upstreams: readonly RoutedUpstream[];

  private constructor(upstreams: readonly RoutedUpstream[], routes: readonly Route[]) {
    this.upstreams = upstreams;
    this.matcher = compileMatcher(routes);
  }

  /** null when the config has no routes: the request path then never looks. */
  static build(cfg: Pick<Config, 'upstreams' | 'routes'>, admission: PoolAdmission = {}): UpstreamRoutes | null {
    if (cfg.routes.length === 0) return null;
    const byName = new Map<string, RoutedUpstream>();
    for (const [name, u] of Object.entries(cfg.upstreams)) {
      const origin = new URL(u.url).origin;
      byName.set(name, {
        name,
        // timeout 0: undici's 0 disables its headers and body timeouts (long-lived streams).
        forwarder: new Forwarder({
          origin,
          timeoutMs: u.timeout,
          connectTimeoutMs: u.connectTimeout,
          clientHost: u.host === 'client',
          ...admission,
        }),
        tunnel: new Tunnel(origin),
      });
    }
    const routes = cfg.routes.map((r) => ({
      patterns: r.match,
      to: r.upstream === 'default' ? null : byName.get(r.upstream)!,
    }));
    return new UpstreamRoutes([...byName.values()], routes);
  }

  /** The upstream a request goes to; null: the default one. */
  pick(method: string, path: string): RoutedUpstream | null {
    const hit = this.matcher.match(method, path);
    return hit.length > 0 ? hit[0]!.to : null;
  }

  closeTunnels(): void {
    for (const u of this.upstreams) u.tunnel.closeAll();
  }

  async close(): Promise<void> {
    await Promise.all(this.upstreams.map((u) => u.forwarder.close()));
  }
}
