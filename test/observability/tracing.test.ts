/**
 * OpenTelemetry traces through the real `rategate serve` process, exported to a local OTLP/HTTP receiver
 * (issue 40): one trace per request with the server span (child of the client's traceparent), the
 * introspection, the store and the upstream call, whose request carries the gateway's traceparent; a
 * 429 as the decision, not as an error; and with no OTEL_* variable, no span and the client's
 * traceparent passed through as before.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.js';
import { send } from '../support/http.js';
import { spawnServe, stop, type GatewayProcess } from '../support/process.js';
import { startRecordingUpstream, VERIFY, type RecordingUpstream, type Seen } from '../support/recording-upstream.js';
import { SPAN_KIND, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';

const TABLE = `
clients:
  account: { from: introspect }
limits:
  - name: per-account
    match: /api/*
    per: account
    limit: 2
    period: 1h
  - name: status-reads
    match: [GET /api/v1/statuses/:id, GET /api/v1/accounts/:id]
    per: ip
    limit: 100
    period: 1h
`;

const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';

let receiver: OtlpReceiver;
let upstream: RecordingUpstream;
let config: string;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  upstream = await startRecordingUpstream();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-tracing-'));
  config = path.join(dir, 'limits.yaml');
  writeFileSync(config, TABLE);
});
afterAll(async () => {
  await upstream?.close();
  await receiver?.close();
});

/** Exported within ~100 ms of a span's end (the batch's delay), not the default 5 s. */
function tracingEnv(protocol: string): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
    OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    OTEL_BSP_SCHEDULE_DELAY: '100',
    OTEL_SERVICE_NAME: 'rategate-under-test',
  };
}

function get(gw: GatewayProcess, p: string, headers: Record<string, string>) {
  return send(gw.url, { path: p, headers });
}

/** The spans of `traceId` once its server span and `more` other spans have arrived. */
async function traceOf(traceId: string, more: number): Promise<ReceivedSpan[]> {
  return found(
    () => {
      const spans = receiver.trace(traceId);
      return spans.some((s) => s.kind === SPAN_KIND.server) && spans.length >= 1 + more ? spans : false;
    },
    { what: `the spans of trace ${traceId}`, withinMs: 30_000 },
  );
}

/** `eventually` for a probe that answers false until it has its value. */
async function found<T>(probe: () => T | false, opts: { what: string; withinMs: number }): Promise<T> {
  return (await eventually(probe, opts)) as T;
}

function only(spans: ReceivedSpan[], pick: (s: ReceivedSpan) => boolean, what: string): ReceivedSpan {
  const found = spans.filter(pick);
  if (found.length !== 1)
    throw new Error(`expected one ${what}, got ${found.length}: ${JSON.stringify(spans.map((s) => s.name))}`);
  return found[0]!;
}

function forwardedTo(p: string): Seen[] {
  return upstream.forwarded().filter((s) => s.url.startsWith(p));
}

describe('traces exported over OTLP/HTTP (JSON)', () => {
  let gw: GatewayProcess;
  beforeAll(async () => {
    gw = await spawnServe(['--config', config, '--upstream', upstream.url], tracingEnv('http/json'));
  });
  afterAll(async () => {
    if (gw) await stop(gw);
  });

  it('makes one trace of a request: the server span under the client parent, introspection, store and upstream calls', async () => {
    const answer = await get(gw, '/api/v1/statuses/5?access_token=never-seen', {
      authorization: 'Bearer user-1',
      traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`,
      tracestate: 'vendor=kept',
    });
    expect(answer.status).toBe(200);
    // The server span, the peek of the per-IP bucket before the introspection, the introspection, the charge, the upstream call.
    const spans = await traceOf(CLIENT_TRACE, 4);
    const server = only(spans, (s) => s.kind === SPAN_KIND.server, 'server span');
    expect(server.parentSpanId).toBe(CLIENT_SPAN);
    expect(server.name).toBe('GET /api/v1/statuses/:id');
    expect(server.attributes).toMatchObject({
      'http.request.method': 'GET',
      'url.path': '/api/v1/statuses/5',
      'url.scheme': 'http',
      'http.route': '/api/v1/statuses/:id',
      'http.response.status_code': 200,
      'client.address': '127.0.0.1',
      'network.protocol.version': '1.1',
      'rategate.decision': 'allowed',
      'rategate.rule': ['per-account', 'status-reads'],
    });
    expect(JSON.stringify(server.attributes)).not.toContain('never-seen');
    expect(server.statusCode).toBe(0);
    expect(server.resource['service.name']).toBe('rategate-under-test');

    const introspection = only(spans, (s) => s.name === 'rategate.introspection', 'introspection span');
    expect(introspection.parentSpanId).toBe(server.spanId);
    expect(introspection.attributes['rategate.account.found']).toBe(true);
    const consume = only(spans, (s) => s.name === 'rategate.store consume', 'store consume span');
    expect(consume.parentSpanId).toBe(server.spanId);
    expect(consume.attributes).toMatchObject({
      'rategate.store.buckets': 2,
      'rategate.store.allowed': true,
      'rategate.store.decider': 'memory',
    });
    const peek = only(spans, (s) => s.name === 'rategate.store peek', 'store peek span');
    expect(peek.parentSpanId).toBe(server.spanId);
    // The charge comes after the account is known.
    expect(consume.startNs >= introspection.endNs).toBe(true);

    const call = only(spans, (s) => s.kind === SPAN_KIND.client, 'upstream span');
    expect(call.parentSpanId).toBe(server.spanId);
    expect(call.name).toBe('GET');
    expect(call.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.response.status_code': 200,
      'url.full': `${upstream.url}/api/v1/statuses/5`,
    });
    expect(call.startNs >= consume.endNs).toBe(true);
    expect(call.endNs <= server.endNs).toBe(true);

    // The upstream saw the gateway's span as its parent, in the client's trace, with the client's tracestate; one traceparent only.
    const seen = forwardedTo('/api/v1/statuses/5');
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers.traceparent).toBe(`00-${CLIENT_TRACE}-${call.spanId}-01`);
    expect(seen[0]!.headers.tracestate).toBe('vendor=kept');
    expect(seen[0]!.url).toBe('/api/v1/statuses/5?access_token=never-seen');
  });

  it('starts a trace of its own for a request with no traceparent (or an invalid one), and the upstream joins it', async () => {
    const before = receiver.spans.length;
    const answer = await get(gw, '/api/v1/accounts/7', {
      authorization: 'Bearer user-2',
      traceparent: '00-not-a-trace-01',
    });
    expect(answer.status).toBe(200);
    const server = await found(
      () =>
        receiver.spans
          .slice(before)
          .find((s) => s.kind === SPAN_KIND.server && s.attributes['url.path'] === '/api/v1/accounts/7') ?? false,
      { what: 'the server span of GET /api/v1/accounts/7', withinMs: 30_000 },
    );
    expect(server.parentSpanId).toBe('');
    const spans = await traceOf(server.traceId, 4);
    const call = only(spans, (s) => s.kind === SPAN_KIND.client, 'upstream span');
    expect(forwardedTo('/api/v1/accounts/7')[0]!.headers.traceparent).toBe(`00-${server.traceId}-${call.spanId}-01`);
  });

  it('survives a hostile tracestate: the request is served, what goes upstream is bounded, the process answers', async () => {
    const trace = 'ddddddddddddddddddddddddddddddd4';
    const junk = Array.from({ length: 1500 }, (_, i) => `k${i}=${'v'.repeat(i % 7)}`).join(',') + ',=,,==,\u00ff';
    const answer = await get(gw, '/api/v1/statuses/41', {
      authorization: 'Bearer user-7',
      traceparent: `00-${trace}-${CLIENT_SPAN}-01`,
      tracestate: junk,
    });
    expect(answer.status).toBe(200);
    const seen = forwardedTo('/api/v1/statuses/41')[0]!;
    expect(String(seen.headers.traceparent)).toContain(trace);
    // W3C bounds a tracestate at 32 members and 512 characters: the gateway's copy is not the client's 10 kB.
    expect(String(seen.headers.tracestate ?? '').length).toBeLessThanOrEqual(512);
    expect((await fetch(`${gw.adminUrl}/healthz`)).ok).toBe(true);
  });

  it('traces a WebSocket upgrade: the tunnel request carries the gateway traceparent', async () => {
    const trace = 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeee5';
    const upgrades: http.IncomingHttpHeaders[] = [];
    const onUpgrade = (req: http.IncomingMessage, socket: Duplex): void => {
      upgrades.push(req.headers);
      socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    };
    upstream.server.on('upgrade', onUpgrade);
    try {
      const u = new URL(gw.url);
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.request({
          host: u.hostname,
          port: Number(u.port),
          path: '/api/v1/streaming',
          agent: false,
          headers: {
            connection: 'Upgrade',
            upgrade: 'websocket',
            'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
            'sec-websocket-version': '13',
            authorization: 'Bearer user-8',
            traceparent: `00-${trace}-${CLIENT_SPAN}-01`,
          },
        });
        req.on('upgrade', (res, socket) => {
          socket.destroy();
          resolve(res.statusCode ?? 0);
        });
        req.on('response', (res) => resolve(res.statusCode ?? 0));
        req.on('error', reject);
        req.end();
      });
      expect(status).toBe(101);
      const spans = await traceOf(trace, 2);
      const call = only(spans, (s) => s.kind === SPAN_KIND.client, 'upstream span');
      expect(only(spans, (s) => s.kind === SPAN_KIND.server, 'server span').parentSpanId).toBe(CLIENT_SPAN);
      expect(call.attributes['http.response.status_code']).toBe(101);
      expect(upgrades).toHaveLength(1);
      expect(upgrades[0]!.traceparent).toBe(`00-${trace}-${call.spanId}-01`);
    } finally {
      upstream.server.off('upgrade', onUpgrade);
    }
  });

  it('records a 429 as the decision (limited, the rule), not as an error, and makes no upstream span', async () => {
    const trace = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1';
    // user-3's account bucket holds 2: the third request is refused.
    for (let i = 0; i < 2; i++)
      expect((await get(gw, '/api/v1/statuses/9', { authorization: 'Bearer user-3' })).status).toBe(200);
    const refused = await get(gw, '/api/v1/statuses/9', {
      authorization: 'Bearer user-3',
      traceparent: `00-${trace}-${CLIENT_SPAN}-01`,
    });
    expect(refused.status).toBe(429);
    const spans = await traceOf(trace, 1);
    const server = only(spans, (s) => s.kind === SPAN_KIND.server, 'server span');
    expect(server.attributes).toMatchObject({
      'http.response.status_code': 429,
      'rategate.decision': 'limited',
      'rategate.rejected_by': 'per-account',
      'http.route': '/api/v1/statuses/:id',
    });
    expect(server.statusCode).not.toBe(2);
    // The account was known from the first two: no introspection; the charge refused; nothing went upstream.
    expect(spans.filter((s) => s.kind === SPAN_KIND.client)).toEqual([]);
    expect(spans.filter((s) => s.name === 'rategate.introspection')).toEqual([]);
    expect(
      only(spans, (s) => s.name === 'rategate.store consume', 'store span').attributes['rategate.store.allowed'],
    ).toBe(false);
    // Still serving after it.
    expect((await fetch(`${gw.adminUrl}/healthz`)).ok).toBe(true);
  });

  it('follows an unsampled parent: nothing exported, the upstream told the trace is not sampled', async () => {
    const trace = 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2';
    const answer = await get(gw, '/api/v1/statuses/11', {
      authorization: 'Bearer user-4',
      traceparent: `00-${trace}-${CLIENT_SPAN}-00`,
    });
    expect(answer.status).toBe(200);
    const header = forwardedTo('/api/v1/statuses/11')[0]!.headers.traceparent as string;
    expect(header).toMatch(new RegExp(`^00-${trace}-[0-9a-f]{16}-00$`));
    expect(header).not.toContain(CLIENT_SPAN);
    // A sampled request after it is exported: the batch ran past this one's end.
    const after = 'ccccccccccccccccccccccccccccccc3';
    await get(gw, '/api/v1/statuses/12', {
      authorization: 'Bearer user-4',
      traceparent: `00-${after}-${CLIENT_SPAN}-01`,
    });
    await traceOf(after, 1);
    expect(receiver.trace(trace)).toEqual([]);
  });
});

describe('traces exported over OTLP/HTTP (protobuf, the default protocol)', () => {
  it('posts protobuf batches to /v1/traces', async () => {
    const env = tracingEnv('');
    delete env.OTEL_EXPORTER_OTLP_PROTOCOL;
    const gw = await spawnServe(['--config', config, '--upstream', upstream.url], env);
    try {
      expect((await get(gw, '/api/v1/statuses/21', { authorization: 'Bearer user-5' })).status).toBe(200);
      await eventually(
        () =>
          receiver.posts.some(
            (p) => p.contentType === 'application/x-protobuf' && p.path === '/v1/traces' && p.bytes > 0,
          ),
        {
          what: 'a protobuf export',
          withinMs: 30_000,
        },
      );
    } finally {
      await stop(gw);
    }
  });
});

describe('without OTEL_* variables', () => {
  it('makes no span and passes the client traceparent through unchanged', async () => {
    const posts = receiver.posts.length;
    const gw = await spawnServe(['--config', config, '--upstream', upstream.url], {
      OTEL_EXPORTER_OTLP_ENDPOINT: '',
      OTEL_TRACES_EXPORTER: '',
    });
    try {
      const parent = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;
      expect(
        (await get(gw, '/api/v1/statuses/31', { authorization: 'Bearer user-6', traceparent: parent })).status,
      ).toBe(200);
      expect(forwardedTo('/api/v1/statuses/31')[0]!.headers.traceparent).toBe(parent);
      expect(gw.output()).not.toContain('tracing on');
    } finally {
      await stop(gw);
    }
    expect(receiver.posts.length).toBe(posts);
  });

  it('refuses to start on an exporter it does not have', async () => {
    const gw = spawnServe(['--config', config, '--upstream', upstream.url], { OTEL_TRACES_EXPORTER: 'zipkin' }, 60_000);
    await expect(gw).rejects.toThrow(/OTEL_TRACES_EXPORTER: "zipkin"/);
  });
});

// The introspection call itself is the recording upstream's: it carries no traceparent (the span is the gateway's wait for the account).
it('keeps the introspection call free of trace headers', () => {
  const calls = upstream.seen.filter((s) => s.url === VERIFY);
  expect(calls.length).toBeGreaterThan(0);
  for (const c of calls) expect(c.headers.traceparent).toBeUndefined();
});
