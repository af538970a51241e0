/** When the OTEL_* variables turn tracing on (observability/tracing-env.ts), read without loading the SDK. */
import { describe, expect, it } from 'vitest';
import { tracingFromEnv } from '../../src/observability/tracing-env.js';

describe('tracingFromEnv', () => {
  it('is off with no variable, even though the OpenTelemetry default exporter is otlp', () => {
    expect(tracingFromEnv({})).toBeNull();
    expect(tracingFromEnv({ OTEL_SERVICE_NAME: 'rategate', OTEL_TRACES_SAMPLER: 'always_on' })).toBeNull();
  });

  it('is on with an OTLP endpoint (either variable), over protobuf unless the protocol says json', () => {
    expect(tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual({
      exporters: ['otlp'],
      protocol: 'http/protobuf',
    });
    expect(
      tracingFromEnv({
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      }),
    ).toEqual({
      exporters: ['otlp'],
      protocol: 'http/json',
    });
    // The traces-specific protocol wins over the general one.
    expect(
      tracingFromEnv({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
      }),
    ).toEqual({ exporters: ['otlp'], protocol: 'http/protobuf' });
  });

  it('is on when OTEL_TRACES_EXPORTER names exporters, and off for none or OTEL_SDK_DISABLED', () => {
    expect(tracingFromEnv({ OTEL_TRACES_EXPORTER: 'console, otlp,console' })).toEqual({
      exporters: ['console', 'otlp'],
      protocol: 'http/protobuf',
    });
    expect(tracingFromEnv({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBeNull();
    expect(tracingFromEnv({ OTEL_SDK_DISABLED: 'TRUE', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBeNull();
    expect(tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' })).toBeNull();
  });

  it('names the variable it cannot honour: an exporter or a protocol this build lacks', () => {
    expect(tracingFromEnv({ OTEL_TRACES_EXPORTER: 'jaeger' })).toMatch(/^OTEL_TRACES_EXPORTER: "jaeger"/);
    expect(
      tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }),
    ).toMatch(/^OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" is not supported/);
    expect(
      tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' }),
    ).toMatch(/^OTEL_EXPORTER_OTLP_TRACES_PROTOCOL/);
  });
});
