/**
 * @module OpenTelemetry traces of the requests the gateway serves: the SDK with its OTLP/HTTP exporter,
 * started when the standard variables ask for it (tracing-env.ts, tracing-sdk.ts), and per request one
 * server span with children for the account's introspection, the store's answer and the upstream call,
 * whose request carries the gateway's `traceparent`.
 *
 * This module is loaded only when tracing is on (through tracing-sdk.ts, a dynamic import in cli/serve.ts):
 * the pipeline knows its types alone and checks one field (`RequestView.span`, null without tracing)
 * before anything here runs, so a gateway without tracing loads no OpenTelemetry code and makes no object
 * for it. No context manager is registered and nothing runs under `context.with()`: every parent is
 * passed by hand.
 */
import type http from 'node:http';
// The module's binding, not the global: globalThis.performance is a getter, called on every use.
import { performance } from 'node:perf_hooks';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  defaultTextMapGetter,
  defaultTextMapSetter,
  trace,
  type Context,
  type HrTime,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator, millisToHrTime } from '@opentelemetry/core';
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PEER_ADDRESS,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_URL_FULL,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
  ATTR_USER_AGENT_ORIGINAL,
} from '@opentelemetry/semantic-conventions';
import { routeOf } from './tracing-route.js';
import type { TracedEnding, TracedUpstream } from './tracing-types.js';

export type { TracedEnding, TracedRule, TracedUpstream } from './tracing-types.js';

/** The `serve` process's tracing: the SDK's provider and the tracer every request's spans come from. */
export class RequestTracing {
  private readonly propagator = new W3CTraceContextPropagator();

  constructor(
    private readonly tracer: Tracer,
    private readonly provider: { forceFlush(): Promise<void>; shutdown(): Promise<void> },
  ) {}

  /**
   * The server span of `req`, started at `at` (performance.now()), child of the client's `traceparent`
   * when it sent a valid one. An unsampled span records nothing, but its id still goes upstream (with
   * the sampled flag off), so the upstream follows the gateway's sampling decision.
   */
  start(req: http.IncomingMessage, at: number): RequestSpans {
    const parent = this.propagator.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter);
    const method = req.method ?? 'GET';
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const attributes: Record<string, string | number> = {
      [ATTR_HTTP_REQUEST_METHOD]: method,
      // The path without its query: a query can carry a token (Mastodon reads `access_token` there).
      [ATTR_URL_PATH]: q === -1 ? url : url.slice(0, q),
      [ATTR_URL_SCHEME]: (req.socket as { encrypted?: boolean } | undefined)?.encrypted === true ? 'https' : 'http',
      [ATTR_NETWORK_PROTOCOL_VERSION]: req.httpVersion,
    };
    const peer = req.socket?.remoteAddress;
    if (peer !== undefined) attributes[ATTR_NETWORK_PEER_ADDRESS] = peer;
    const agent = req.headers['user-agent'];
    if (agent !== undefined) attributes[ATTR_USER_AGENT_ORIGINAL] = agent;
    // One anchor per request: the SDK would take each span's offset from Date.now() (whole ms) anew,
    // and spans less than a millisecond apart could come out in the wrong order.
    const offset = Date.now() - performance.now();
    const span = this.tracer.startSpan(
      method,
      { kind: SpanKind.SERVER, startTime: millisToHrTime(at + offset), attributes },
      parent,
    );
    return new RequestSpans(this, span, trace.setSpan(parent, span), offset);
  }

  /** A child of `parent` started at `start`. */
  child(parent: Context, name: string, start: HrTime, kind: SpanKind = SpanKind.INTERNAL): Span {
    return this.tracer.startSpan(name, { kind, startTime: start }, parent);
  }

  /** The `traceparent` (and `tracestate`) naming `span` as the parent, as flat name/value pairs. */
  headersFor(parent: Context, span: Span): readonly string[] {
    const carrier: Record<string, string> = {};
    this.propagator.inject(trace.setSpan(parent, span), carrier, defaultTextMapSetter);
    const out: string[] = [];
    for (const name in carrier) out.push(name, carrier[name]!);
    return out;
  }

  /** Sends what is batched (the drain's end): spans of the last requests are not lost to a restart. */
  async shutdown(): Promise<void> {
    await this.provider.forceFlush().catch(() => undefined);
    await this.provider.shutdown().catch(() => undefined);
  }
}

/** One request's spans: the server span, and the upstream call's while it is open. */
export class RequestSpans {
  /** Whether the server span records (it was sampled): only then are children made. */
  readonly recording: boolean;
  private upstream: Span | null = null;

  constructor(
    private readonly tracing: RequestTracing,
    readonly server: Span,
    /** The context holding the server span: the children's parent. */
    private readonly ctx: Context,
    /** Epoch ms less performance.now() at the request's start: every time of the request is read through it. */
    private readonly offset: number,
  ) {
    this.recording = server.isRecording();
  }

  /** A performance.now() reading as the request's spans tell time. */
  private time(t: number): HrTime {
    return millisToHrTime(t + this.offset);
  }

  /**
   * The account's look-up, from `start` until now: the introspection call, or the wait for another
   * request's call for the same token (the calls are shared). `account`: what it found (null: none).
   */
  introspected(start: number, end: number, account: string | null): void {
    if (!this.recording) return;
    const span = this.tracing.child(this.ctx, 'rategate.introspection', this.time(start));
    span.setAttribute('rategate.account.found', account !== null);
    span.end(this.time(end));
  }

  /**
   * The store's answer to `operation` (`consume`, the all-or-nothing charge, or `peek`, the read before
   * an introspection) over `buckets` buckets, from `start` to `end`; `outcome.decider` says who answered
   * (`store`: the shared store was asked; `memory`, `lease`, `cache`: answered in the process, no I/O);
   * `error`: the store failed.
   */
  stored(
    operation: 'consume' | 'peek',
    start: number,
    end: number,
    buckets: number,
    outcome: { allowed: boolean; decider?: string } | null,
    error?: unknown,
  ): void {
    if (!this.recording) return;
    const span = this.tracing.child(this.ctx, `rategate.store ${operation}`, this.time(start));
    span.setAttribute('rategate.store.buckets', buckets);
    if (outcome !== null) {
      span.setAttribute('rategate.store.allowed', outcome.allowed);
      if (outcome.decider !== undefined) span.setAttribute('rategate.store.decider', outcome.decider);
    }
    if (error !== undefined) {
      span.setAttribute(ATTR_ERROR_TYPE, errorType(error));
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    }
    span.end(this.time(end));
  }

  /**
   * Starts the upstream call's client span (when recording) and returns the trace headers the upstream
   * request carries: the client span as their parent, or the server span when unsampled.
   */
  upstreamHeaders(method: string, origin: string, path: string, start: number): readonly string[] {
    if (!this.recording) return this.tracing.headersFor(this.ctx, this.server);
    const attributes: Record<string, string | number> = {
      [ATTR_HTTP_REQUEST_METHOD]: method,
      // Without the query, for the reason the server span's url.path has none.
      [ATTR_URL_FULL]: origin + path,
    };
    const at = originParts(origin);
    if (at !== null) {
      attributes[ATTR_SERVER_ADDRESS] = at.host;
      attributes[ATTR_SERVER_PORT] = at.port;
    }
    const span = this.tracing.child(this.ctx, method, this.time(start), SpanKind.CLIENT);
    span.setAttributes(attributes);
    this.upstream = span;
    return this.tracing.headersFor(this.ctx, span);
  }

  /**
   * The upstream's head arrived (or the exchange failed): the client span ends there, as the HTTP
   * conventions allow; the body streams on under the server span.
   */
  upstreamDone(r: TracedUpstream, end: number): void {
    const span = this.upstream;
    if (span === null) return;
    this.upstream = null;
    if (r.status !== 0) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, r.status);
    if (r.error !== undefined) {
      span.setAttribute(ATTR_ERROR_TYPE, r.error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: r.error });
    } else if (r.status >= 400) {
      // A client span's 4xx is an error of the call (HTTP conventions), unlike the server span's.
      span.setAttribute(ATTR_ERROR_TYPE, String(r.status));
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end(this.time(end));
  }

  /**
   * Ends the server span with the answer: the status, the decision and the rules. A 429 is the
   * client's doing, not the server's: no error status (HTTP conventions: only 5xx are server errors);
   * `rategate.decision=limited` and `rategate.rejected_by` tell it.
   */
  end(e: TracedEnding, end: number): void {
    const span = this.server;
    if (this.upstream !== null) this.upstreamDone({ status: e.status, error: e.error }, end);
    if (!this.recording) return;
    const route = routeOf(e.routeRules, e.method, e.path);
    if (route !== null) {
      span.setAttribute(ATTR_HTTP_ROUTE, route);
      span.updateName(`${e.method} ${route}`);
    }
    if (e.status !== 0) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, e.status);
    span.setAttribute(ATTR_CLIENT_ADDRESS, e.client);
    span.setAttribute('rategate.decision', e.decision);
    if (e.rules.length > 0)
      span.setAttribute(
        'rategate.rule',
        e.rules.map((r) => r.name),
      );
    if (e.rejectedBy !== undefined) span.setAttribute('rategate.rejected_by', e.rejectedBy.name);
    if (e.error !== undefined) span.setAttribute(ATTR_ERROR_TYPE, e.error);
    if (e.status >= 500)
      span.setStatus({ code: SpanStatusCode.ERROR, ...(e.error !== undefined ? { message: e.error } : {}) });
    span.end(this.time(end));
  }

  /** A bug ended the request (the gateway answered 500). */
  failed(err: unknown, end: number): void {
    if (this.upstream !== null) this.upstreamDone({ status: 0, error: 'INTERNAL' }, end);
    if (!this.recording) return;
    this.server.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, 500);
    this.server.setAttribute(ATTR_ERROR_TYPE, 'INTERNAL');
    this.server.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
    this.server.end(this.time(end));
  }
}

function errorType(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string') return code;
  return err instanceof Error ? err.constructor.name : 'Error';
}

function originParts(origin: string): { host: string; port: number } | null {
  try {
    const u = new URL(origin);
    return { host: u.hostname, port: u.port !== '' ? Number(u.port) : u.protocol === 'https:' ? 443 : 80 };
  } catch {
    return null;
  }
}
