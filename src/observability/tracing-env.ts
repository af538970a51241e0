/**
 * @module Whether the standard OpenTelemetry variables ask for traces, read once at start-up with no
 * OpenTelemetry code loaded: `serve` loads the SDK (tracing.ts) only when they do.
 */

/** Where spans go: `otlp` (OTLP over HTTP) and `console` (one object per span on stdout, for a look). */
export type TraceExporterName = 'otlp' | 'console';

/** The OTLP encodings this build ships (gRPC is not one: it would pull in a gRPC stack). */
export type OtlpProtocol = 'http/protobuf' | 'http/json';

export interface TracingSettings {
  readonly exporters: readonly TraceExporterName[];
  readonly protocol: OtlpProtocol;
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * The tracing the environment asks for; null: none (the gateway then creates no span and loads no SDK);
 * a string: the variable that cannot be honoured, for the start-up error.
 *
 * The OpenTelemetry default exporter is `otlp`, but a gateway started with no variable at all must not
 * begin exporting to localhost:4318: tracing is on when `OTEL_TRACES_EXPORTER` names an exporter, or when
 * an OTLP endpoint (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT`) is set and the
 * exporter is not `none`. `OTEL_SDK_DISABLED=true` turns it off whatever else is set. The endpoint,
 * headers, timeout, sampler (`OTEL_TRACES_SAMPLER`, `_ARG`), batch (`OTEL_BSP_*`) and resource
 * (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`) variables are read by the SDK itself.
 */
export function tracingFromEnv(env: Env): TracingSettings | null | string {
  if (nonEmpty(env.OTEL_SDK_DISABLED)?.toLowerCase() === 'true') return null;
  const listed = nonEmpty(env.OTEL_TRACES_EXPORTER);
  const endpoint = nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) ?? nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  if (listed === undefined && endpoint === undefined) return null;
  const names = (listed ?? 'otlp')
    .split(',')
    .map((n) => n.trim().toLowerCase())
    .filter((n) => n !== '');
  if (names.includes('none')) return null;
  const exporters: TraceExporterName[] = [];
  for (const n of names) {
    if (n !== 'otlp' && n !== 'console')
      return `OTEL_TRACES_EXPORTER: "${n}" is not an exporter this build has (otlp, console, none)`;
    if (!exporters.includes(n)) exporters.push(n);
  }
  const protocolVar =
    nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) !== undefined
      ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
      : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = nonEmpty(env[protocolVar]) ?? 'http/protobuf';
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    return `${protocolVar}: "${protocol}" is not supported (http/protobuf, the default, or http/json; an OpenTelemetry Collector takes both on port 4318)`;
  }
  return { exporters, protocol };
}

function nonEmpty(value: string | undefined): string | undefined {
  const v = value?.trim();
  return v === undefined || v === '' ? undefined : v;
}
