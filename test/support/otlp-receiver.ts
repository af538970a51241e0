/**
 * @module A local OTLP/HTTP trace receiver for tests, as an OpenTelemetry Collector's `otlp` receiver
 * takes them on port 4318: `POST /v1/traces`, answered 200 `{}`. JSON bodies (`http/json`) are decoded
 * into spans; protobuf bodies (`http/protobuf`) are kept as bytes with their content type.
 */
import { serve, type Running } from './servers.js';

/** One attribute value as OTLP/JSON writes it, flattened. */
export type AttributeValue = string | number | boolean | AttributeValue[] | undefined;

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP's numbering: 1 internal, 2 server, 3 client. */
  readonly kind: number;
  readonly attributes: Readonly<Record<string, AttributeValue>>;
  /** 0 unset, 1 ok, 2 error. */
  readonly statusCode: number;
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly resource: Readonly<Record<string, AttributeValue>>;
}

export interface OtlpReceiver extends Running {
  readonly spans: ReceivedSpan[];
  /** Every export received: its content type and size. */
  readonly posts: { contentType: string; bytes: number; path: string }[];
  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[];
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3 } as const;

interface JsonKeyValue {
  key: string;
  value?: JsonAnyValue;
}
interface JsonAnyValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: JsonAnyValue[] };
}
interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: JsonKeyValue[];
  status?: { code?: number };
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
}
interface JsonExport {
  resourceSpans?: { resource?: { attributes?: JsonKeyValue[] }; scopeSpans?: { spans?: JsonSpan[] }[] }[];
}

function valueOf(v: JsonAnyValue | undefined): AttributeValue {
  if (v === undefined) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(valueOf);
  return undefined;
}

function attributesOf(kvs: JsonKeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const kv of kvs ?? []) out[kv.key] = valueOf(kv.value);
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const posts: OtlpReceiver['posts'] = [];
  const running = await serve((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const contentType = req.headers['content-type'] ?? '';
      posts.push({ contentType, bytes: body.length, path: req.url ?? '' });
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      if (contentType.startsWith('application/json')) {
        const doc = JSON.parse(body.toString('utf8')) as JsonExport;
        for (const rs of doc.resourceSpans ?? []) {
          const resource = attributesOf(rs.resource?.attributes);
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              spans.push({
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId ?? '',
                name: s.name,
                kind: s.kind,
                attributes: attributesOf(s.attributes),
                statusCode: s.status?.code ?? 0,
                startNs: BigInt(s.startTimeUnixNano),
                endNs: BigInt(s.endTimeUnixNano),
                resource,
              });
            }
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        return;
      }
      // http/protobuf: an empty ExportTraceServiceResponse is zero bytes.
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  return { ...running, spans, posts, trace: (traceId) => spans.filter((s) => s.traceId === traceId) };
}
