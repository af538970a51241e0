/**
 * One reading of a request for every stage (issue 27 item 3, DESIGN principle 10), through the real
 * gateway: what is read (the body for `_method` and `access_token`, the token, the method override) is
 * decided from every rule that may apply — limits, bans and in-flight limits — so a ban or in-flight
 * rule never decides on less than a limit rule would read. Each table here has no limit rule that would
 * force the read: the ban or in-flight rule alone must.
 */
import type http from 'node:http';
import { describe, expect, it } from 'vitest';
import { send, type Answer } from '../support/http.js';
import { gatewayFixture, startTestGateway } from '../support/gateway.js';
import { eventually } from '../support/eventually.js';

const fx = gatewayFixture({ graceMs: 200 });

const FORM = { 'Content-Type': 'application/x-www-form-urlencoded' };

describe('the body is read for every rule that may apply, not only the limit rules', () => {
  it('an in-flight limit on GET /api/v2/search holds POSTs overridden to GET by a form _method', async () => {
    const held: http.ServerResponse[] = [];
    fx.upstream.route('/api/v2/search', (req, res) => {
      req.resume();
      held.push(res);
    });
    fx.gw = await startTestGateway(`concurrency:\n  - { name: search, match: GET /api/v2/search, per: ip, max: 1 }\n`, {
      upstream: fx.upstream.url,
    });
    const post = () =>
      send(fx.gw!.url, {
        method: 'POST',
        path: '/api/v2/search',
        headers: { ...FORM, 'X-Forwarded-For': '203.0.113.7' },
        body: '_method=GET&q=x',
      });
    const answers: Answer[] = [];
    // A failed assertion shuts the gateway down under held requests: their hang-up is not this test's error.
    const all = Array.from({ length: 4 }, () =>
      post().then(
        (a) => void answers.push(a),
        () => {},
      ),
    );
    await eventually(() => answers.length === 3, { what: 'three answers while one search is held upstream' });
    expect(answers.map((a) => a.status)).toEqual([429, 429, 429]);
    expect(held).toHaveLength(1);
    for (const res of held) res.end('{}');
    await Promise.all(all);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 429, 429, 429]);
  });

  it('a ban on DELETE /api/v1/statuses/:id counts POSTs overridden to DELETE by a form _method', async () => {
    fx.upstream.route('/api/v1/statuses/', (req, res) => {
      req.resume();
      req.on('end', () =>
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Record not found"}'),
      );
    });
    fx.gw = await startTestGateway(
      `bans:\n  - { name: probing, match: DELETE /api/v1/statuses/:id, per: ip, on: { status: [404] }, limit: 2, period: 10m, ban: 1h }\n`,
      { upstream: fx.upstream.url },
    );
    const statuses: number[] = [];
    const del = async () => {
      const a = await send(fx.gw!.url, {
        method: 'POST',
        path: '/api/v1/statuses/5',
        headers: { ...FORM, 'X-Forwarded-For': '198.51.100.4' },
        body: '_method=DELETE',
      });
      statuses.push(a.status);
      return a.status;
    };
    await eventually(async () => (await del()) === 403 || statuses.length >= 8, { what: 'a 403 or eight answers' });
    expect(statuses).toContain(403);
    expect(statuses.filter((s) => s === 404).length).toBeLessThanOrEqual(3);
    // The ban refuses the same client on any route, and the process answers others.
    expect(
      (await send(fx.gw.url, { path: '/api/v1/timelines/home', headers: { 'X-Forwarded-For': '198.51.100.4' } }))
        .status,
    ).toBe(403);
    expect(
      (await send(fx.gw.url, { path: '/api/v1/timelines/home', headers: { 'X-Forwarded-For': '198.51.100.5' } }))
        .status,
    ).toBe(200);
  });

  it('a per: token ban counts a token sent as access_token in a form body, as it counts the Authorization header', async () => {
    fx.gw = await startTestGateway(
      `limits:
  - { name: per-ip, match: /api/*, per: ip, limit: 1000, period: 1h }
bans:
  - { name: token-posts, match: POST /api/v1/statuses, per: token, limit: 2, period: 10m, ban: 1h }
`,
      { upstream: fx.upstream.url },
    );
    const statuses: number[] = [];
    const post = async (ip: string) => {
      const a = await send(fx.gw!.url, {
        method: 'POST',
        path: '/api/v1/statuses',
        headers: { ...FORM, 'X-Forwarded-For': ip },
        body: 'access_token=form-token&status=x',
      });
      statuses.push(a.status);
      return a.status;
    };
    // From a new IP each time: only the token relates them.
    let n = 0;
    await eventually(async () => (await post(`192.0.2.${++n}`)) === 403 || statuses.length >= 8, {
      what: 'a 403 or eight answers',
    });
    expect(statuses).toContain(403);
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(3);
    // The same token in the Authorization header is the same key: banned too.
    const header = await send(fx.gw.url, {
      method: 'POST',
      path: '/api/v1/statuses',
      headers: { ...FORM, Authorization: 'Bearer form-token' },
      body: 'status=x',
    });
    expect(header.status).toBe(403);
  });
});

describe('routing follows the counted method', () => {
  it('a form _method=DELETE goes to the upstream a DELETE route names, as the DELETE it is counted as', async () => {
    const { startRecordingUpstream } = await import('../support/recording-upstream.js');
    const deletes = await startRecordingUpstream();
    try {
      fx.gw = await startTestGateway(
        `upstreams:
  deletes: { url: ${deletes.url} }
routes:
  - { match: DELETE /api/v1/lists/:id, upstream: deletes }
limits:
  - { name: list-delete, match: DELETE /api/v1/lists/:id, per: ip, limit: 5, period: 1h }
`,
        { upstream: fx.upstream.url },
      );
      const overridden = await send(fx.gw.url, {
        method: 'POST',
        path: '/api/v1/lists/9',
        headers: FORM,
        body: '_method=DELETE',
      });
      expect(overridden.status).toBe(200);
      expect(overridden.headers['x-ratelimit-remaining']).toBe('4');
      const real = await send(fx.gw.url, { method: 'DELETE', path: '/api/v1/lists/9' });
      expect(real.headers['x-ratelimit-remaining']).toBe('3');
      // Both went to the DELETE route's upstream; the form body reached it whole.
      expect(deletes.forwarded().map((s) => `${s.method} ${s.url} ${s.bodyBytes}`)).toEqual([
        'POST /api/v1/lists/9 14',
        'DELETE /api/v1/lists/9 0',
      ]);
      expect(fx.upstream.forwarded()).toEqual([]);
      // A POST without an override stays on the default upstream.
      expect(
        (await send(fx.gw.url, { method: 'POST', path: '/api/v1/lists/9', headers: FORM, body: 'x=1' })).status,
      ).toBe(200);
      expect(fx.upstream.forwarded().map((s) => s.method)).toEqual(['POST']);
    } finally {
      await deletes.close();
    }
  });
});
