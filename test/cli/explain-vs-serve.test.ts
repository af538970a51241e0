/**
 * `explain` says what `serve` does: generated requests (methods, overrides in a form or a header, tokens
 * in the header, the query or a body, JWTs, cookies, headers, paging and e-mail parameters, blocked and
 * exempt clients) go to a real gateway and to `explain`, and both must name the same counted rules, the
 * same headline (the X-RateLimit-* bucket) and the same kind of decision for every one. The gateway's
 * clock moves two hours between requests, so its buckets are as fresh as explain's.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig, type Snapshot } from '../../src/config/index.js';
import { explainRequest } from '../../src/cli/explain.js';
import { headlineBucket } from '../../src/pipeline/ratelimit-headers.js';
import { FakeClock } from '../support/clock.js';
import { send } from '../support/http.js';
import { accessLine, capturingLogger, startTestGateway, type LogLine, type TestGateway } from '../support/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { scaledMs } from '../support/speed.js';

const TABLE = `clients: { account: { from: introspect } }
block: { ips: [203.0.113.66] }
exempt: { ips: [192.0.2.99] }
limits:
  - { name: account-api, match: /api/*, per: account, limit: 50, period: 5m }
  - { name: token-api, match: /api/*, per: token, limit: 40, period: 5m }
  - { name: anon-api, match: /api/*, when: { authenticated: false }, per: ip, limit: 30, period: 5m }
  - { name: deletes, match: [DELETE /api/v1/statuses/:id, POST /api/v1/statuses/:id/unreblog], per: account, limit: 20, period: 30m }
  - { name: search-get, match: GET /api/v2/search, per: ip, limit: 25, period: 1m, overrides: [{ ips: [198.51.100.2], limit: 90 }] }
  - { name: paging, match: /*, when: { query: [page, max_id] }, per: ip, limit: 35, period: 15m }
  - { name: logins-ip, match: POST /auth/sign_in(.:format), per: ip, limit: 12, period: 5m }
  - { name: logins-email, match: POST /auth/sign_in(.:format), per: "param:user[email]", limit: 8, period: 1h }
  - { name: session, match: [PUT /*, PATCH /auth(.:format)], when: { authenticated: false }, per: "cookie:sid", limit: 9, period: 10m }
  - { name: apps, match: /api/*, per: "header:X-App-Id", limit: 45, period: 5m, shadow: true }
  - { name: tenants, match: /api/*, per: "jwt:tenant", limit: 15, period: 10m, overrides: [{ keys: [big], limit: 60 }] }
  - { name: everyone, match: /media_proxy/*, per: global, limit: 70, period: 1m }
bans:
  - { name: probing, match: DELETE /api/v1/statuses/:id, per: ip, on: { status: [404] }, limit: 1000, period: 10m, ban: 1h }
concurrency:
  - { name: searches, match: GET /api/v2/search, per: token, max: 100 }
`;

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const JWT = `${b64({ alg: 'HS256' })}.${b64({ tenant: 'big', sub: 'u9' })}.c2ln`;
const JWT_OTHER = `${b64({ alg: 'HS256' })}.${b64({ tenant: 'acme' })}.c2ln`;

/** Tokens and whose they are (the recording upstream: `user-N` owns account N; any other is unknown). */
const TOKENS = ['user-1', 'user-2', 'junk token', JWT, JWT_OTHER];
const accountOf = (token: string | null): string | null =>
  token !== null && token.startsWith('user-') ? token.slice(5) : null;

interface Generated {
  method: string;
  path: string;
  query: string[];
  auth: string | null;
  override: string | null;
  appId: string | null;
  cookie: string | null;
  body: { kind: 'form'; pairs: string[] } | { kind: 'json'; value: Record<string, unknown> } | null;
  ip: string;
}

const generated: fc.Arbitrary<Generated> = fc.record({
  method: fc.constantFrom('GET', 'POST', 'DELETE', 'PUT', 'PATCH'),
  path: fc.constantFrom(
    '/api/v1/statuses',
    '/api/v1/statuses/5',
    '/api/v1/statuses/5/unreblog',
    '/api/v2/search',
    '/auth/sign_in',
    '/auth/sign_in.json',
    '/auth',
    '/media_proxy/1',
    '/about',
  ),
  query: fc.uniqueArray(
    fc.constantFrom(
      'page=2',
      'max_id=3',
      'user%5Bemail%5D=A%40x.com',
      'access_token=user-2',
      `access_token=${JWT_OTHER}`,
      '_method=DELETE',
      'q=x',
    ),
    { maxLength: 2 },
  ),
  auth: fc.option(fc.constantFrom(...TOKENS), { nil: null }),
  override: fc.option(fc.constantFrom('DELETE', 'GET', 'put', 'BOGUS'), { nil: null }),
  appId: fc.option(fc.constantFrom('app-1', ' app-2 '), { nil: null }),
  cookie: fc.option(fc.constantFrom('sid=s1', 'theme=x; sid=s2'), { nil: null }),
  body: fc.option(
    fc.oneof(
      fc.record({
        kind: fc.constant('form' as const),
        pairs: fc.uniqueArray(
          fc.constantFrom(
            '_method=DELETE',
            '_method=GET',
            'access_token=user-1',
            'user%5Bemail%5D=b%40x.com',
            'page=1',
            'x=1',
          ),
          {
            minLength: 1,
            maxLength: 3,
          },
        ),
      }),
      fc.record({
        kind: fc.constant('json' as const),
        value: fc.constantFrom<Record<string, unknown>>(
          { user: { email: 'C@x.com' } },
          { access_token: 'user-2' },
          { _method: 'DELETE' },
        ),
      }),
    ),
    { nil: null },
  ),
  ip: fc.constantFrom('198.51.100.1', '198.51.100.2', '2001:db8::7', '203.0.113.66', '192.0.2.99'),
});

/**
 * The request as the wire carries it, and as explain is told it. Only POST, PUT and PATCH carry a body
 * here: the forwarder answers a GET or DELETE with a body 400 without rate-limit headers (the decision
 * is the same either way, but the headline could not be read from the answer).
 */
function wire(g: Generated, id: string) {
  const headers: Record<string, string> = { 'X-Request-Id': id };
  if (g.auth !== null) headers.Authorization = `Bearer ${g.auth}`;
  if (g.override !== null) headers['X-HTTP-Method-Override'] = g.override;
  if (g.appId !== null) headers['X-App-Id'] = g.appId;
  if (g.cookie !== null) headers.Cookie = g.cookie;
  let body: string | undefined;
  if (!carriesBody(g)) {
    // see above
  } else if (g.body?.kind === 'form') {
    body = g.body.pairs.join('&');
    headers['Content-Type'] = 'application/x-www-form-urlencoded';
  } else if (g.body?.kind === 'json') {
    body = JSON.stringify(g.body.value);
    headers['Content-Type'] = 'application/json';
  }
  const path = g.query.length > 0 ? `${g.path}?${g.query.join('&')}` : g.path;
  return { method: g.method, path, headers, body };
}

function carriesBody(g: Generated): boolean {
  return g.method === 'POST' || g.method === 'PUT' || g.method === 'PATCH';
}

/** The token Doorkeeper would read, for telling explain whose it is (as the recording upstream answers). */
function tokenOf(g: Generated): string | null {
  if (g.auth !== null) return g.auth;
  const fromQuery = g.query.find((q) => q.startsWith('access_token='));
  if (fromQuery !== undefined) return fromQuery.slice('access_token='.length);
  const body = carriesBody(g) ? g.body : null;
  const pair = body?.kind === 'form' ? body.pairs.find((p) => p.startsWith('access_token=')) : undefined;
  if (pair !== undefined) return pair.slice('access_token='.length);
  return body?.kind === 'json' && typeof body.value.access_token === 'string' ? body.value.access_token : null;
}

interface Verdict {
  kind: string;
  rules: string[];
  headline: string | null;
}

describe('explain and serve decide alike', () => {
  let upstream: RecordingUpstream;
  let gw: TestGateway;
  let lines: LogLine[];
  let snapshot: Snapshot;
  const clock = new FakeClock();

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    const cap = capturingLogger();
    lines = cap.lines;
    gw = await startTestGateway(TABLE, { upstream: upstream.url, now: clock.now, logger: cap.logger });
    snapshot = parseConfig(TABLE, 't.yaml');
  });
  afterAll(async () => {
    await gw.shutdown(200);
    await upstream.close();
  });

  async function served(g: Generated, id: string): Promise<Verdict> {
    clock.advance(2 * 3600_000); // every bucket fresh again, as explain's are
    const w = wire(g, id);
    const answer = await send(gw.url, {
      method: w.method,
      path: w.path,
      headers: { ...w.headers, 'X-Forwarded-For': g.ip },
      ...(w.body === undefined ? {} : { body: w.body }),
    });
    const line = await accessLine(lines, id);
    const policy = answer.headers['ratelimit-policy'];
    const headline = typeof policy === 'string' ? /^"([^"]+)"/.exec(policy)![1]! : null;
    return { kind: String(line.decision), rules: line.rules as string[], headline };
  }

  async function explained(g: Generated, id: string): Promise<Verdict> {
    const w = wire(g, id);
    const { screened } = await explainRequest(snapshot, {
      request: `${w.method} ${w.path}`,
      headers: Object.entries(w.headers).map(([k, v]) => `${k}: ${v}`),
      ip: g.ip,
      body: w.body,
      account: accountOf(tokenOf(g)),
    });
    const d = screened.decision;
    const head = d.outcome === undefined || !d.admit ? -1 : headlineBucket(d.rules, d.outcome);
    return { kind: d.kind, rules: d.rules.map((r) => r.name), headline: head < 0 ? null : d.rules[head]!.name };
  }

  it(
    'names the same counted rules, headline and decision for every generated request',
    async () => {
      let n = 0;
      const kinds = new Set<string>();
      await fc.assert(
        fc.asyncProperty(generated, async (g) => {
          const id = `diff-${++n}`;
          const [serve, explain] = [await served(g, id), await explained(g, id)];
          kinds.add(serve.kind);
          expect(explain, JSON.stringify(wire(g, id))).toEqual(serve);
        }),
        { numRuns: Number(process.env.RATEGATE_DIFF_RUNS ?? 300), seed: 2812 },
      );
      // The generator reached the decisions that matter.
      expect([...kinds].sort()).toEqual(expect.arrayContaining(['allowed', 'blocked', 'exempt', 'unmatched']));
    },
    scaledMs(180_000),
  );
});
