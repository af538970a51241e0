/**
 * Triage and runtime entries through a real gateway (memory store): `/admin/limited` names the top
 * abuser of a flood; `/admin/buckets` answers missing parameters with 400 and reaches override buckets;
 * runtime exemptions; bans on a token refuse every request carrying it and can be lifted; the access
 * log's opt-in client field.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { capturingLogger, startTestGateway, type LogLine, type TestGateway } from '../support/gateway.js';

let upstream: RecordingUpstream;
let gw: TestGateway;
let lines: LogLine[];

const TABLE = `limits:
  - name: ip-access
    match: /api/*
    per: ip
    limit: 3
    period: 1h
    overrides: [{ ips: [192.0.2.200], limit: 50 }]
bans:
  - { name: bad-posts, match: POST /api/v1/statuses, per: token, on: { status: [422] }, limit: 2, period: 10m, ban: 1h }
log: { client: digest }
`;

beforeAll(async () => {
  upstream = await startRecordingUpstream();
  upstream.route('/api/v1/statuses', (req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(422, { 'content-type': 'application/json' });
      res.end('{"error":"Validation failed"}');
    });
  });
  const cap = capturingLogger();
  lines = cap.lines;
  gw = await startTestGateway(TABLE, { upstream: upstream.url, logger: cap.logger });
});
afterAll(async () => {
  await gw.shutdown(100);
  await upstream.close();
});

async function get(path: string, ip: string, headers: Record<string, string> = {}): Promise<number> {
  const r = await fetch(`${gw.url}${path}`, { headers: { 'x-forwarded-for': ip, ...headers } });
  await r.arrayBuffer();
  return r.status;
}

async function admin(path: string, init: RequestInit = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${gw.adminUrl}${path}`, init);
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

describe('triage', () => {
  it('/admin/limited names the top abuser of a flood, with counts', async () => {
    for (let i = 0; i < 30; i++) await get('/api/v1/timelines/public', '203.0.113.50');
    for (let i = 0; i < 5; i++) await get('/api/v1/timelines/public', '198.51.100.60');
    const a = await admin('/admin/limited?rule=ip-access&top=2');
    expect(a.status).toBe(200);
    expect(a.body.top).toEqual([
      { key: '203.0.113.50', count: 27, error: 0 },
      { key: '198.51.100.60', count: 2, error: 0 },
    ]);
    expect((await admin('/admin/limited')).status).toBe(400);
    expect((await admin('/admin/limited?rule=nope')).status).toBe(404);
  });

  it('/admin/buckets without parameters answers 400 with the rules; without a key, with the recently limited', async () => {
    const none = await admin('/admin/buckets');
    expect(none.status).toBe(400);
    expect(none.body.error).toMatch(/missing rule/);
    expect(none.body.rules).toEqual([{ name: 'ip-access', per: 'ip', limit: 3, period: '1h', overrides: 1 }]);
    const noKey = await admin('/admin/buckets?rule=ip-access');
    expect(noKey.status).toBe(400);
    expect(noKey.body.error).toMatch(/missing key/);
    expect((noKey.body.recentlyLimited as { key: string }[])[0]!.key).toBe('203.0.113.50');
  });

  it('an override bucket is reachable by its key, or by override=N', async () => {
    for (let i = 0; i < 7; i++) expect(await get('/api/v1/x', '192.0.2.200')).toBe(200);
    const byKey = await admin('/admin/buckets?rule=ip-access&key=192.0.2.200');
    expect(byKey.body).toMatchObject({ override: 0, limit: 50, remaining: 43, key: 'ip-access:o0:{ip:192.0.2.200}' });
    const named = await admin('/admin/buckets?rule=ip-access&key=192.0.2.200&override=0');
    expect(named.body).toMatchObject({ override: 0, remaining: 43 });
    expect((await admin('/admin/buckets?rule=ip-access&key=192.0.2.200&override=3')).status).toBe(400);
    const reset = await admin('/admin/buckets?rule=ip-access&key=192.0.2.200', { method: 'DELETE' });
    expect(reset.body).toMatchObject({ reset: true, key: 'ip-access:o0:{ip:192.0.2.200}' });
    expect((await admin('/admin/buckets?rule=ip-access&key=192.0.2.200')).body).toMatchObject({ remaining: 50 });
  });

  it('log.client: digest puts a stable digest of the client IP in the access log, never the IP', async () => {
    await get('/api/v1/logged', '198.51.100.99');
    const line = lines.find((l) => l.msg === 'request' && l.path === '/api/v1/logged')!;
    expect(line.client).toBe(createHash('sha256').update('198.51.100.99').digest('hex').slice(0, 16));
    expect(JSON.stringify(line)).not.toContain('198.51.100.99');
  });
});

describe('runtime exemptions and token bans (memory store: this process)', () => {
  it('a runtime exemption lifts limits for its client until removed', async () => {
    const ip = '203.0.113.50'; // limited by the flood above
    expect(await get('/api/v1/y', ip)).toBe(429);
    const add = await admin('/admin/exemptions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ip, for: '10m', reason: 'office' }),
    });
    expect(add.status).toBe(201);
    expect(add.body).toMatchObject({ source: 'runtime', ip, reason: 'office', scope: 'memory' });
    expect(await get('/api/v1/y', ip)).toBe(200);
    const list = await admin('/admin/exemptions');
    expect(list.body.entries).toEqual([expect.objectContaining({ source: 'runtime', ip, reason: 'office' })]);
    expect((await admin(`/admin/exemptions/${ip}`, { method: 'DELETE' })).status).toBe(200);
    expect(await get('/api/v1/y', ip)).toBe(429);
    expect((await admin(`/admin/exemptions/${ip}`, { method: 'DELETE' })).status).toBe(404);
    const bad = await admin('/admin/blocks', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ip, for: 'soon' }),
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/"for" must be a duration/);
  });

  it('a token banned after two 422s is refused on every route, lifted by DELETE /admin/bans/<ban>/<key>', async () => {
    const auth = { authorization: 'Bearer spammer-token', 'content-type': 'application/json' };
    const ip = '192.0.2.201';
    const post = () =>
      fetch(`${gw.url}/api/v1/statuses`, {
        method: 'POST',
        headers: { ...auth, 'x-forwarded-for': ip },
        body: '{"status":"x"}',
      }).then((r) => r.status);
    expect(await post()).toBe(422);
    expect(await post()).toBe(422);
    // The ban is written before the next request is read (memory store: at once).
    await new Promise((r) => setImmediate(r));
    expect(await post()).toBe(403);
    expect(await get('/other/route', ip, auth)).toBe(403);
    // The same IP without the token is not banned.
    expect(await get('/other/route', ip)).toBe(200);
    const bans = await admin('/admin/bans');
    const digest = createHash('sha256').update('spammer-token').digest('hex');
    expect(bans.body.bans).toEqual([expect.objectContaining({ ban: 'bad-posts', key: `tok:${digest}` })]);
    const blocks = await admin('/admin/blocks');
    expect(blocks.body.entries).toEqual([
      expect.objectContaining({ source: 'ban', ban: 'bad-posts', key: `tok:${digest}` }),
    ]);
    expect((await admin(`/admin/bans/bad-posts/tok:${digest}`, { method: 'DELETE' })).status).toBe(200);
    expect(await get('/other/route', ip, auth)).toBe(200);
  });
});
