/**
 * @module What the request's spans are told (tracing.ts), as the pipeline hands it over: the rules,
 * how the request ended, what the upstream exchange came to. Types only: the pipeline imports them
 * without loading OpenTelemetry.
 */

/** A rule as the span names it: `rategate.rule`, and its patterns for `http.route`. */
export interface TracedRule {
  readonly name: string;
  readonly patterns: readonly string[];
}

/** How the request ended, as `finish()` knows it. */
export interface TracedEnding {
  /** The status the client was answered with; 0: the client left first. */
  readonly status: number;
  /** The gateway error code or `CLIENT_ABORTED`; undefined: none. */
  readonly error: string | undefined;
  /** The decision (`allowed`, `limited`, …: DecisionKind). */
  readonly decision: string;
  /** The rules whose buckets counted the request. */
  readonly rules: readonly TracedRule[];
  readonly rejectedBy: TracedRule | undefined;
  /** The rules of the route (limits, bans, in-flight), for `http.route`. */
  readonly routeRules: readonly (readonly TracedRule[])[];
  /** The method the request was counted as and its normalized path. */
  readonly method: string;
  readonly path: string;
  /** The client behind the trusted proxies. */
  readonly client: string;
}

/** What an upstream exchange came to (ForwardResult's shape). */
export interface TracedUpstream {
  readonly status: number;
  readonly error: string | undefined;
}
