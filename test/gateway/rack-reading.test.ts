/**
 * Fields the upstream (Rack, Rails) reads and the gateway must read too, or refuse: part headers of a
 * multipart body, a Content-Type with a comma, repeated headers, e-mail keys, paging in a form body.
 * Each runs through the real gateway against a recording upstream; after a hostile request the gateway
 * must still answer.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { startTestGateway, gatewayFixture } from '../support/gateway.js';

const fx = gatewayFixture({ graceMs: 200 });

/** Sends `head` lines (no trailing blank line) and `body` byte for byte; the status of the answer. */
async function raw(url: string, head: string[], body = ''): Promise<number> {
  const { port } = new URL(url);
  const socket = net.connect(Number(port), '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  const bytes = Buffer.from(body, 'latin1');
  socket.write(`${head.join('\r\n')}\r\nHost: x\r\nContent-Length: ${bytes.length}\r\nConnection: close\r\n\r\n`);
  socket.write(bytes);
  let text = '';
  socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
  await new Promise((r) => socket.once('close', r));
  const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
  if (m === null) throw new Error(`no answer: ${JSON.stringify(text.slice(0, 200))}`);
  return Number(m[1]);
}

async function alive(): Promise<void> {
  const res = await fetch(`${fx.gw!.url}/healthz-probe`);
  expect(res.status).toBeLessThan(500);
}

const DELETION = `limits:\n  - { name: deletion, match: DELETE /api/v1/statuses/:id, per: ip, limit: 1, period: 30m }\n`;

describe('duplicate Content-Type or Authorization headers are refused, never forwarded', () => {
  it('two Content-Type headers (Rack would read the last boundary): 400, nothing forwarded', async () => {
    fx.gw = await startTestGateway(DELETION, { upstream: fx.upstream.url });
    const before = fx.upstream.forwarded().length;
    const body =
      '--A\r\nContent-Disposition: form-data; name="x"\r\n\r\n1\r\n--A--\r\n--B\r\nContent-Disposition: form-data; name="_method"\r\n\r\ndelete\r\n--B--\r\n';
    const status = await raw(
      fx.gw.url,
      [
        'POST /api/v1/statuses/1 HTTP/1.1',
        'Content-Type: multipart/form-data; boundary=A',
        'content-type: multipart/form-data; boundary=B',
      ],
      body,
    );
    expect(status).toBe(400);
    expect(fx.upstream.forwarded().length).toBe(before);
    await alive();
  });

  it('two Authorization headers: 400, nothing forwarded', async () => {
    fx.gw = await startTestGateway(`limits:\n  - { name: acct, match: /api/*, per: account, limit: 5, period: 5m }\n`, {
      upstream: fx.upstream.url,
    });
    const before = fx.upstream.forwarded().length;
    expect(
      await raw(fx.gw.url, [
        'GET /api/v1/timelines/home HTTP/1.1',
        'Authorization: Bearer user-1',
        'Authorization: Bearer user-2',
      ]),
    ).toBe(400);
    expect(fx.upstream.forwarded().length).toBe(before);
    // One of each is fine.
    expect(
      await raw(fx.gw.url, [
        'GET /api/v1/timelines/home HTTP/1.1',
        'Authorization: Bearer user-1',
        'Content-Type: text/plain',
      ]),
    ).toBe(200);
  });
});

describe('a Content-Type with a comma is read as Rack ([;,]) and Rails (/^([^,;]*)/) read it', () => {
  it.each([
    ['application/x-www-form-urlencoded, x', '_method=delete'],
    ['application/x-www-form-urlencoded,x;charset=utf-8', '_method=delete'],
    [
      'multipart/form-data, x; boundary=B',
      '--B\r\nContent-Disposition: form-data; name="_method"\r\n\r\ndelete\r\n--B--\r\n',
    ],
  ])('%s: the _method=delete POST counts against the deletion rule', async (type, body) => {
    fx.gw = await startTestGateway(DELETION, { upstream: fx.upstream.url });
    const send = () => raw(fx.gw!.url, ['POST /api/v1/statuses/1 HTTP/1.1', `Content-Type: ${type}`], body);
    expect(await send()).toBe(200);
    expect(await send()).toBe(429);
  });

  it('application/json, x: a token in the JSON body counts for its account', async () => {
    fx.gw = await startTestGateway(`limits:\n  - { name: acct, match: /api/*, per: account, limit: 1, period: 5m }\n`, {
      upstream: fx.upstream.url,
    });
    const send = () =>
      raw(
        fx.gw!.url,
        ['POST /api/v1/statuses HTTP/1.1', 'Content-Type: application/json, x'],
        '{"access_token":"user-5"}',
      );
    expect(await send()).toBe(200);
    expect(await send()).toBe(429);
  });
});

describe('param: keys are normalized as Rack::Attack and Devise read them (strip, NUL included, and downcase)', () => {
  const LOGIN = `limits:\n  - { name: login-email, match: POST /auth/sign_in, per: "param:user[email]", limit: 2, period: 5m }\n`;
  it('Victim@Example.COM, victim@example.com, " victim@example.com\\0" share one bucket', async () => {
    fx.gw = await startTestGateway(LOGIN, { upstream: fx.upstream.url });
    const statuses: number[] = [];
    for (const email of [
      'Victim@Example.COM',
      'victim@example.com',
      ' victim@example.com%00',
      '%00VICTIM@example.com\t',
    ]) {
      statuses.push(
        await raw(
          fx.gw.url,
          ['POST /auth/sign_in HTTP/1.1', 'Content-Type: application/x-www-form-urlencoded'],
          `user[email]=${email.replace(/\t/g, '%09').replace(/ /g, '+')}`,
        ),
      );
    }
    expect(statuses).toEqual([200, 200, 429, 429]);
    // Another address has its own bucket.
    expect(
      await raw(
        fx.gw.url,
        ['POST /auth/sign_in HTTP/1.1', 'Content-Type: application/x-www-form-urlencoded'],
        'user[email]=other@example.com',
      ),
    ).toBe(200);
  });
});

describe('override keys of a param: rule are normalized like the request value', () => {
  it('an override naming VIP@Example.com applies to " vip@example.COM\\0"', async () => {
    fx.gw = await startTestGateway(
      `limits:\n  - name: login\n    match: POST /auth/sign_in\n    per: "param:user[email]"\n    limit: 1\n    period: 5m\n    overrides: [{ keys: ["VIP@Example.com"], limit: 3 }]\n`,
      { upstream: fx.upstream.url },
    );
    const send = () =>
      raw(
        fx.gw!.url,
        ['POST /auth/sign_in HTTP/1.1', 'Content-Type: application/x-www-form-urlencoded'],
        'user[email]=+vip%40example.COM%00',
      );
    expect([await send(), await send(), await send(), await send()]).toEqual([200, 200, 200, 429]);
  });
});

describe('when.query reads the query and a form body, as Rack params (GET merged with POST)', () => {
  const PAGING = `limits:\n  - { name: paging, match: GET /api/v1/timelines/*, per: ip, limit: 1, period: 5m, when: { query: [max_id, min_id] } }\n`;
  it('a GET with max_id in its form body is counted by the paging rule', async () => {
    fx.gw = await startTestGateway(PAGING, { upstream: fx.upstream.url });
    const send = () =>
      raw(
        fx.gw!.url,
        ['GET /api/v1/timelines/public HTTP/1.1', 'Content-Type: application/x-www-form-urlencoded'],
        'max_id=100',
      );
    expect(await send()).toBe(200);
    expect(await send()).toBe(429);
    // Without paging parameters the rule does not apply.
    expect(await raw(fx.gw.url, ['GET /api/v1/timelines/public HTTP/1.1'])).toBe(200);
    expect(
      await raw(
        fx.gw.url,
        ['GET /api/v1/timelines/public HTTP/1.1', 'Content-Type: application/x-www-form-urlencoded'],
        'local=1',
      ),
    ).toBe(200);
  });
});

describe('multipart part headers are read as Rack reads them', () => {
  const part = (disposition: string, value: string, extra = '') =>
    `--B\r\nContent-Disposition: ${disposition}\r\n${extra}\r\n${value}\r\n`;
  const close = '--B--\r\n';
  const post = (path: string, body: string, auth?: string) =>
    raw(
      fx.gw!.url,
      [
        `POST ${path} HTTP/1.1`,
        'Content-Type: multipart/form-data; boundary=B',
        ...(auth ? [`Authorization: ${auth}`] : []),
      ],
      body,
    );

  it.each([
    ['attachment; name="_method"'],
    ['; name=_method'],
    ['"form-data"; name=_method'],
    ['form-data=x; name=_method'],
    ['form-data; name="x"; name="_method"'],
    ['form-data; name="_met\\hod"'],
  ])('Content-Disposition: %s — the DELETE counts against the deletion rule', async (disposition) => {
    fx.gw = await startTestGateway(DELETION, { upstream: fx.upstream.url });
    const body = part(disposition, 'delete') + close;
    expect(await post('/api/v1/statuses/1', body)).toBe(200);
    expect(await post('/api/v1/statuses/1', body)).toBe(429);
    await alive();
  });

  it('a named part with Content-Type application/octet-stream and no filename is a field: its access_token counts for the account', async () => {
    fx.gw = await startTestGateway(
      `limits:\n  - { name: media, match: POST /api/v1/media, per: account, limit: 1, period: 30m }\n`,
      {
        upstream: fx.upstream.url,
      },
    );
    const body =
      part('form-data; name="access_token"', 'user-31', 'Content-Type: application/octet-stream\r\n') +
      part('form-data; name="file"; filename="a.png"', 'PNG', 'Content-Type: image/png\r\n') +
      close;
    expect(await post('/api/v1/media', body)).toBe(200);
    expect(await post('/api/v1/media', body)).toBe(429);
  });

  it('an attachment-typed user[email] part counts against the per-e-mail login limit', async () => {
    fx.gw = await startTestGateway(
      `limits:\n  - { name: login, match: POST /auth/sign_in, per: "param:user[email]", limit: 1, period: 5m }\n`,
      {
        upstream: fx.upstream.url,
      },
    );
    const body = part('attachment; name="user[email]"', 'Victim@example.com') + close;
    expect(await post('/auth/sign_in', body)).toBe(200);
    expect(await post('/auth/sign_in', body)).toBe(429);
  });

  it.each([
    ['a name only Rack 2 reads (NAME=)', part('form-data; NAME="_method"', 'delete') + close],
    [
      'a boundary inside a part without the CRLF before it (Rack 2 splits there)',
      part('form-data; name="x"', 'a--B\r\nContent-Disposition: form-data; name="_method"\r\n\r\ndelete') + close,
    ],
    [
      'a part after a broken closing line (Rack 2 reads on)',
      part('form-data; name="x"', '1') + '--B--junk\r\n' + part('form-data; name="_method"', 'delete') + close,
    ],
    ['a counted field sent as a file', part('form-data; name="_method"; filename="m.txt"', 'delete') + close],
    ['a name in brackets ([_method] is _method to Rack 2)', part('form-data; name="[_method]"', 'delete') + close],
  ])('%s: refused with 400, never forwarded', async (_what, body) => {
    fx.gw = await startTestGateway(DELETION, { upstream: fx.upstream.url });
    const before = fx.upstream.forwarded().length;
    expect(await post('/api/v1/statuses/1', body)).toBe(400);
    expect(fx.upstream.forwarded().length).toBe(before);
    await alive();
  });

  it('a URL-encoded [access_token] (Rack 2 reads access_token) is refused with 400', async () => {
    fx.gw = await startTestGateway(`limits:\n  - { name: acct, match: /api/*, per: account, limit: 5, period: 5m }\n`, {
      upstream: fx.upstream.url,
    });
    const before = fx.upstream.forwarded().length;
    expect(
      await raw(
        fx.gw.url,
        ['POST /api/v1/statuses HTTP/1.1', 'Content-Type: application/x-www-form-urlencoded'],
        '%5Baccess_token%5D=user-9',
      ),
    ).toBe(400);
    expect(await raw(fx.gw.url, ['GET /api/v1/timelines/home?[access_token]=user-9 HTTP/1.1'])).toBe(400);
    expect(fx.upstream.forwarded().length).toBe(before);
  });
});
