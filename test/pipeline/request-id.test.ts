/**
 * One request id per request: the id the gateway forwards upstream is the one on the request's
 * access-log line, also when the exchange fails inside the gateway (the failure's line is written by
 * another path than a normal answer's).
 */
import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { MemoryStore } from '../../src/limiter/memory/store.js';
import { Metrics } from '../../src/observability/metrics.js';
import { Gateway, type RequestRecord } from '../../src/pipeline/gateway.js';
import { buildRequestPolicy } from '../../src/pipeline/policy.js';
import type { Forwarder } from '../../src/proxy/forward.js';
import { Tunnel } from '../../src/proxy/tunnel.js';
import { send } from '../support/http.js';
import { listen, type Running } from '../support/servers.js';

let running: Running | undefined;
afterEach(async () => running?.close());

describe('the request id', () => {
  it('is the same on the access-log line of a request that failed inside the gateway as the one sent upstream', async () => {
    const policy = buildRequestPolicy(
      parseConfig('limits: [{ name: api, match: /api/*, per: ip, limit: 5, period: 1m }]', 't.yaml'),
      async () => ({
        kind: 'error',
      }),
    );
    const sentUpstream: string[] = [];
    // A forwarder that hands the request id on and then fails: a bug on the forwarding path.
    const failing = {
      send: (_req: http.IncomingMessage, _res: http.ServerResponse, out: { forwarded: { requestId: string } }) => {
        sentUpstream.push(out.forwarded.requestId);
        throw new Error('forwarding broke');
      },
    } as unknown as Forwarder;
    const records: RequestRecord[] = [];
    const gateway = new Gateway({
      policy: () => policy,
      store: new MemoryStore({ sweepIntervalMs: 0 }),
      forwarder: failing,
      tunnel: new Tunnel('http://127.0.0.1:9'),
      metrics: new Metrics({ collectDefault: false }),
      now: Date.now,
      onRequest: (r) => void records.push(r),
    });
    running = await listen(http.createServer(gateway.handle));
    const answer = await send(running.url, { path: '/api/v1/x' });
    expect(answer.status).toBe(500);
    expect(sentUpstream).toHaveLength(1);
    expect(records.map((r) => [r.id, r.status, r.error])).toEqual([[sentUpstream[0], 500, 'forwarding broke']]);
    // A client's own usable id is kept end to end.
    await send(running.url, { path: '/api/v1/y', headers: { 'X-Request-Id': 'client-id-1' } });
    expect(sentUpstream[1]).toBe('client-id-1');
    expect(records[1]!.id).toBe('client-id-1');
  });
});
