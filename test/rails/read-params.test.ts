/** readRequestParams over real sockets: the token, routed method and params a pipeline would use. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRequestParams } from '../../src/rails/read-params.js';
import { compileWantedParams, METHOD_PARAM, QueryParams, TOKEN_PARAMS } from '../../src/rails/request-params.js';
import { send } from '../support/http.js';

const wanted = compileWantedParams([...TOKEN_PARAMS, METHOD_PARAM, 'user[email]']);
let server: http.Server;
let url: string;
let syncAnswers = 0;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const [, rawQuery = ''] = (req.url ?? '').split('?', 2);
    const readBody = req.headers['x-read-body'] === '1';
    const r = readRequestParams(req, new QueryParams(rawQuery), { wanted, maxBytes: 1024, readBody }, req);
    if (!(r instanceof Promise)) syncAnswers++;
    void Promise.resolve(r).then(async (a) => {
      if (!a.ok) {
        res.writeHead(a.status, { connection: 'close' });
        return res.end(JSON.stringify({ error: a.message }));
      }
      let forwarded = 0;
      if (a.params.body !== null) for await (const c of a.params.body) forwarded += (c as Buffer).length;
      res.end(
        JSON.stringify({
          method: a.params.method,
          drop: a.params.dropOverrideHeader,
          token: a.params.token,
          email: a.params.param('user[email]'),
          forwarded,
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const form = { 'content-type': 'application/x-www-form-urlencoded', 'x-read-body': '1' };

describe('readRequestParams', () => {
  it('reads a query token without touching the body, synchronously', async () => {
    const before = syncAnswers;
    const a = (await send(url, { path: '/api/v1/timelines/home?access_token=q-tok' })).json();
    expect(a).toMatchObject({ method: 'GET', token: { kind: 'token', token: 'q-tok', from: 'param' }, forwarded: 0 });
    expect(syncAnswers).toBe(before + 1);
  });

  it('routes a form POST by _method and reads its token, handing on the whole body', async () => {
    const body = '_method=delete&access_token=b-tok';
    const a = (await send(url, { method: 'POST', path: '/api/v1/statuses/1', headers: form, body })).json();
    expect(a).toMatchObject({ method: 'DELETE', drop: false, token: { token: 'b-tok' }, forwarded: body.length });
  });

  it('lets the form field win over the header, and says to drop the header', async () => {
    const a = (
      await send(url, {
        method: 'POST',
        path: '/x',
        headers: { ...form, 'x-http-method-override': 'DELETE' },
        body: '_method=patch',
      })
    ).json();
    expect(a).toMatchObject({ method: 'PATCH', drop: true });
  });

  it('does not take _method from a JSON body, but does take its token and nested params', async () => {
    const body = JSON.stringify({ _method: 'delete', bearer_token: 'j-tok', user: { email: 'e@x.y' } });
    const a = (
      await send(url, {
        method: 'POST',
        path: '/x',
        headers: { 'content-type': 'application/json', 'x-read-body': '1' },
        body,
      })
    ).json();
    expect(a).toMatchObject({ method: 'POST', token: { token: 'j-tok' }, email: { kind: 'value', value: 'e@x.y' } });
  });

  it('routes by the header alone when the body is not read', async () => {
    const a = (await send(url, { method: 'POST', path: '/x', headers: { 'x-http-method-override': 'delete' } })).json();
    expect(a).toMatchObject({ method: 'DELETE', drop: false });
  });

  it('answers 400 for a token given twice differently, and for a body past the bound', async () => {
    const twice = await send(url, { method: 'POST', path: '/x?access_token=a', headers: form, body: 'access_token=b' });
    expect(twice.status).toBe(400);
    expect(twice.json<{ error: string }>().error).toMatch(/access_token is given twice/);
    const big = await send(url, {
      method: 'POST',
      path: '/x',
      headers: form,
      body: `a=${'x'.repeat(2000)}&access_token=z`,
    });
    expect(big.status).toBe(400);
    expect(big.json<{ error: string }>().error).toMatch(/1024 bytes/);
  });
});
