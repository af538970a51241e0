/** The access log line: what an on-call engineer searches by (request id, the rejecting rule, a duration). */
import { describe, expect, it } from 'vitest';
import { capturingLogger, startTestGateway, gatewayFixture } from '../support/gateway.js';

const fx = gatewayFixture({ graceMs: 200 });

const TABLE = `limits:
  - { name: wide, match: /api/*, per: ip, limit: 100, period: 1h }
  - { name: narrow, match: POST /api/v1/statuses, per: ip, limit: 1, period: 1h }
  - { name: trial, match: POST /api/v1/statuses, per: ip, limit: 1, period: 1h, shadow: true }
`;

function accessLines(lines: Record<string, unknown>[]): Record<string, unknown>[] {
  return lines.filter((l) => l.msg === 'request');
}

describe('the access log', () => {
  it("keeps the client's X-Request-Id, logs it and forwards it upstream", async () => {
    const { logger, lines } = capturingLogger();
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url, logger });
    const res = await fetch(`${fx.gw.url}/api/v1/timelines/home`, { headers: { 'X-Request-Id': 'req-abc.123' } });
    expect(res.status).toBe(200);
    expect(accessLines(lines).at(-1)!.id).toBe('req-abc.123');
    expect(fx.upstream.forwarded().at(-1)!.headers['x-request-id']).toBe('req-abc.123');
  });

  it('makes a request id when the client sent none (or an unusable one) and forwards that one', async () => {
    const { logger, lines } = capturingLogger();
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url, logger });
    await fetch(`${fx.gw.url}/api/v1/timelines/home`);
    await fetch(`${fx.gw.url}/api/v1/timelines/home`, { headers: { 'X-Request-Id': 'has spaces in it' } });
    const [first, second] = accessLines(lines).slice(-2);
    const seen = fx.upstream.forwarded().slice(-2);
    for (const [line, up] of [
      [first!, seen[0]!],
      [second!, seen[1]!],
    ] as const) {
      expect(line.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(up.headers['x-request-id']).toBe(line.id);
    }
    expect(first!.id).not.toBe(second!.id);
  });

  it('names, on a 429, the rule that rejected the request, and only that one', async () => {
    const { logger, lines } = capturingLogger();
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url, logger });
    expect((await fetch(`${fx.gw.url}/api/v1/statuses`, { method: 'POST' })).status).toBe(200);
    expect((await fetch(`${fx.gw.url}/api/v1/statuses`, { method: 'POST' })).status).toBe(429);
    const [ok, limited] = accessLines(lines).slice(-2);
    expect(ok!.rule).toBeUndefined();
    expect(limited!.status).toBe(429);
    expect(limited!.decision).toBe('limited');
    expect(limited!.rule).toBe('narrow'); // not the shadow rule, not the rule with room
    expect(limited!.rules).toEqual(['wide', 'narrow', 'trial']);
  });

  it('prints durations in milliseconds to the microsecond, not as long floats', async () => {
    const { logger, lines } = capturingLogger();
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url, logger });
    for (let i = 0; i < 5; i++) await fetch(`${fx.gw.url}/api/v1/timelines/home`);
    for (const line of accessLines(lines)) {
      expect(typeof line.ms).toBe('number');
      expect(String(line.ms)).toMatch(/^\d+(\.\d{1,3})?$/);
    }
  });
});
