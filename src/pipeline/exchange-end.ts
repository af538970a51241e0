/**
 * @module How an exchange ended, as the gateway's `finish()` records it: the outcome, the error it is
 * logged with (the drain's cut told from a client that left), and what the server span is told.
 */
import type { ForwardResult } from '../proxy/forward.js';
import type { TracedEnding } from '../observability/tracing.js';
import type { GatewayOptions } from './gateway-options.js';
import type { Screened } from './screen.js';

/** How an exchange ended, for `finish()`: a gateway answer carries no `result`. */
export interface Outcome {
  readonly status: number;
  readonly result: ForwardResult | undefined;
  /** The gateway's own answer's body, when it wrote one (the access log's `bytesOut`). */
  readonly body?: Buffer | undefined;
}

/** What the server span tells of the answer (tracing on only). */
export function tracedEnding(s: Screened, status: number, error: string | undefined): TracedEnding {
  const { view, decision } = s;
  const r = view.rules;
  return {
    status,
    error,
    decision: decision.kind,
    rules: decision.rules,
    rejectedBy: decision.rejectedBy,
    routeRules: [r.limits, r.bans, r.slots],
    method: view.method,
    path: view.path,
    client: view.client.address,
  };
}

/**
 * The error an exchange is logged with. A socket closed under a request is the client's doing, but for
 * the connections the drain closes itself when server.drainGrace runs out: those are the gateway's cut.
 */
export function endingError(r: ForwardResult | undefined, drain: GatewayOptions['drain']): string | undefined {
  if (r?.error === 'CLIENT_ABORTED' && drain?.cut === true) return 'DRAIN_TIMEOUT';
  return r?.error;
}
