/**
 * Issue 40: the RED view of the client side and the log an SRE reads. A real gateway on loopback in
 * front of a recording upstream: every answer (forwarded, 429, 5xx the gateway makes, the parser's
 * refusals) is counted once by code class and timed by decision; the access line carries the protocol
 * and the bytes; the parser's and the edge's refusals are logged, sampled under a flood with a count of
 * what was not logged, and the gateway still answers after it.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { capturingLogger, gatewayFixture, startTestGateway, type LogLine } from '../support/gateway.js';
import { eventually } from '../support/eventually.js';
import { REFUSALS_LOGGED_PER_SECOND } from '../../src/observability/refusal-log.js';

const fx = gatewayFixture({ graceMs: 200 });

const TABLE = `limits:
  - { name: narrow, match: POST /api/v1/statuses, per: ip, limit: 1, period: 1h }
`;

/** Sends raw bytes on a fresh connection; resolves with what came back before the server closed it. */
function raw(url: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(bytes));
    let got = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (got += d));
    socket.on('close', () => resolve(got));
    socket.on('error', reject);
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer in 10 s')));
  });
}

async function metricsText(adminUrl: string): Promise<string> {
  return (await fetch(`${adminUrl}/metrics`)).text();
}

/** The value of one sample line of the exposition, or 0 when absent. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

const accessLines = (lines: LogLine[]): LogLine[] => lines.filter((l) => l.msg === 'request');

describe('RED metrics', () => {
  it('counts every answer once by code class, and times parsed requests by code class and decision', async () => {
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url });
    const url = fx.gw.url;
    expect((await fetch(`${url}/api/v1/timelines/public`)).status).toBe(200);
    expect((await fetch(`${url}/api/v1/statuses`, { method: 'POST', body: 'a=1' })).status).toBe(200);
    expect((await fetch(`${url}/api/v1/statuses`, { method: 'POST', body: 'a=1' })).status).toBe(429);
    fx.upstream.route('/boom', (_req, res) => res.socket?.destroy());
    expect((await fetch(`${url}/boom`)).status).toBe(502);
    // The parser's refusals never reach the pipeline: counted as responses, not timed.
    expect(await raw(url, `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)).toMatch(
      /^HTTP\/1.1 431 /,
    );
    expect(await raw(url, 'BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n')).toMatch(/^HTTP\/1.1 400 /);

    const text = await metricsText(fx.gw.adminUrl);
    expect(sample(text, 'rategate_http_responses_total{code_class="2xx"}')).toBe(2);
    expect(sample(text, 'rategate_http_responses_total{code_class="4xx"}')).toBe(3);
    expect(sample(text, 'rategate_http_responses_total{code_class="5xx"}')).toBe(1);
    expect(sample(text, 'rategate_http_responses_total{code_class="3xx"}')).toBe(0);
    const count = (codeClass: string, decision: string): number =>
      sample(text, `rategate_http_request_duration_seconds_count{code_class="${codeClass}",decision="${decision}"}`);
    expect(count('2xx', 'unmatched')).toBe(1);
    expect(count('2xx', 'allowed')).toBe(1);
    expect(count('4xx', 'limited')).toBe(1);
    expect(count('5xx', 'unmatched')).toBe(1);
    // Nothing was timed for the parser's refusals; the +Inf bucket is the count.
    expect(count('4xx', 'rejected')).toBe(0);
    expect(
      sample(text, 'rategate_http_request_duration_seconds_bucket{le="+Inf",code_class="2xx",decision="allowed"}'),
    ).toBe(1);
    expect(
      sample(text, 'rategate_http_request_duration_seconds_sum{code_class="2xx",decision="allowed"}'),
    ).toBeGreaterThan(0);
  });
});

describe('the access line and the refusal log', () => {
  it('logs string levels, ISO times, the protocol and the bytes in and out', async () => {
    const { logger, lines } = capturingLogger();
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url, logger });
    const res = await fetch(`${fx.gw.url}/api/v1/statuses`, { method: 'POST', body: 'status=hello' });
    const body = await res.text();
    const limited = await fetch(`${fx.gw.url}/api/v1/statuses`, { method: 'POST', body: 'status=hello' });
    const limitedBody = await limited.text();
    const [ok, refused] = await eventually(() => accessLines(lines), {
      what: 'two access lines',
      until: (l) => l.length >= 2,
    });
    expect(ok).toMatchObject({
      level: 'info',
      protocol: 'http/1.1',
      status: 200,
      bytesIn: 12,
      bytesOut: Buffer.byteLength(body),
    });
    expect(ok!.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(refused).toMatchObject({ status: 429, bytesIn: 12, bytesOut: Buffer.byteLength(limitedBody) });
  });

  it('logs the parser refusals, at most N a second per reason, then says how many it did not log; the gateway still answers', async () => {
    const { logger, lines } = capturingLogger();
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url, logger });
    const flood = 3 * REFUSALS_LOGGED_PER_SECOND;
    const answers = await Promise.all(
      Array.from({ length: flood }, () => raw(fx.gw!.url, 'BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n')),
    );
    expect(answers.every((a) => a.startsWith('HTTP/1.1 400 '))).toBe(true);
    expect(await raw(fx.gw.url, `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)).toMatch(
      /^HTTP\/1.1 431 /,
    );

    const refusals = (reason: string): LogLine[] => lines.filter((l) => l.refused === reason);
    // The flood may straddle a second: the logged lines and the suppressed counts add up to it either way.
    await eventually(() => refusals('unknown_method').filter((l) => l.suppressed !== undefined), {
      what: 'the suppressed count',
      withinMs: 10_000,
      until: (l) => l.length > 0,
    });
    const logged = refusals('unknown_method').filter((l) => l.suppressed === undefined);
    const suppressed = refusals('unknown_method').reduce((n, l) => n + ((l.suppressed as number | undefined) ?? 0), 0);
    expect(logged.length + suppressed).toBe(flood);
    expect(logged.length).toBeLessThanOrEqual(2 * REFUSALS_LOGGED_PER_SECOND);
    expect(logged[0]).toMatchObject({
      level: 'warn',
      status: 400,
      code: 'HPE_INVALID_METHOD',
      msg: 'refused 400: unknown method',
    });
    expect(refusals('headers_too_large')[0]).toMatchObject({ level: 'warn', status: 431, code: 'HPE_HEADER_OVERFLOW' });
    // No client address in them (the access log's rule), and the gateway is alive and answering.
    expect(logged[0]).not.toHaveProperty('client');
    expect((await fetch(`${fx.gw.url}/api/v1/timelines/public`)).status).toBe(200);
  });
});
