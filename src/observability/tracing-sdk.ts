/**
 * @module The OpenTelemetry SDK as the standard variables ask for it (tracing-env.ts): its exporters, the
 * resource, its own errors throttled into the log. Loaded only when tracing is on (a dynamic import in
 * cli/serve.ts), with the exporter of the configured protocol alone.
 */
import { setGlobalErrorHandler } from '@opentelemetry/core';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { RequestTracing } from './tracing.js';
import type { TracingSettings } from './tracing-env.js';
import { VERSION } from './version.js';

/** What start-up is told about the SDK's own failures (an export refused, the collector down). */
export type TracingWarn = (message: string) => void;

/**
 * Starts the SDK as `settings` ask: a batch span processor per exporter, the sampler from
 * `OTEL_TRACES_SAMPLER` (the SDK's default, `parentbased_always_on`, when unset), the resource from
 * `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` over `service.name=rategate` and the version. Only
 * the exporter of the configured protocol is loaded. The SDK's own errors (exports that fail) reach
 * `warn`, at most one a minute, with a count of those left out.
 */
export async function startTracing(settings: TracingSettings, warn: TracingWarn): Promise<RequestTracing> {
  const processors: SpanProcessor[] = [];
  for (const name of settings.exporters) processors.push(new BatchSpanProcessor(await exporterFor(name, settings)));
  const resource = defaultResource()
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: 'rategate', [ATTR_SERVICE_VERSION]: VERSION }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new BasicTracerProvider({ resource, spanProcessors: processors });
  setGlobalErrorHandler(throttled(warn));
  return new RequestTracing(provider.getTracer('rategate', VERSION), provider);
}

async function exporterFor(
  name: TracingSettings['exporters'][number],
  settings: TracingSettings,
): Promise<SpanExporter> {
  switch (name) {
    case 'console':
      return new ConsoleSpanExporter();
    case 'otlp':
      // The endpoint, headers, timeout and compression are read by the exporter (OTEL_EXPORTER_OTLP_*).
      return settings.protocol === 'http/json'
        ? new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter()
        : new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter();
  }
}

function throttled(warn: TracingWarn): (err: unknown) => void {
  let last = -Infinity;
  let skipped = 0;
  return (err) => {
    const now = Date.now();
    if (now - last < 60_000) {
      skipped++;
      return;
    }
    last = now;
    const more = skipped > 0 ? ` (${skipped} more since the last one)` : '';
    skipped = 0;
    warn(`tracing: ${err instanceof Error ? err.message : String(err)}${more}`);
  };
}
