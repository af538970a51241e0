/** @module Routing, robustness against hostile input, and the server lifecycle of the built-in upstream. */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createUpstreamHandler, startUpstream } from '../../src/mastodon/index.js';
import { appToken, call, newUser, useUpstream } from './support.js';

const server = useUpstream();

describe('routing', () => {
  it('answers an unknown path with 404 Record not found as JSON', async () => {
    const res = await call(server.url, 'GET', '/api/v1/nothing/here');
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({ error: 'Record not found' });
  });

  it('answers a wrong method on a known path with 404, as Rails does', async () => {
    expect((await call(server.url, 'GET', '/api/v1/accounts')).status).toBe(404);
    expect((await call(server.url, 'PUT', '/api/v1/statuses/1')).status).toBe(404);
    expect((await call(server.url, 'DELETE', '/oauth/token')).body).toEqual({ error: 'Record not found' });
  });

  it('routes exact paths only: no format suffix, trailing slash or doubled slash', async () => {
    const token = await appToken(server.url);
    for (const path of ['/api/v1/accounts.json', '/api/v1/accounts/', '//api/v1/accounts', '/api//v1/accounts']) {
      const res = await call(server.url, 'POST', path, { token, form: { username: 'x' } });
      expect(res.status, path).toBe(404);
    }
  });

  it('answers HEAD like GET without a body', async () => {
    const user = await newUser(server.url);
    const res = await fetch(`${server.url}/api/v1/accounts/verify_credentials`, {
      method: 'HEAD',
      headers: { authorization: `Bearer ${user.token}` },
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
  });

  it('ignores an unknown token on a route that does not need one', async () => {
    const user = await newUser(server.url);
    const posted = await call(server.url, 'POST', '/api/v1/statuses', { token: user.token, form: { status: 'hi' } });
    const res = await call(server.url, 'GET', `/api/v1/statuses/${posted.body.id as string}`, { token: 'stale' });
    expect(res.status).toBe(200);
  });
});

describe('robustness', () => {
  it('keeps serving after a client drops its connection halfway through an upload', async () => {
    const user = await newUser(server.url);
    const { port } = new URL(server.url);
    await new Promise<void>((resolve, reject) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => {
        socket.write(
          'POST /api/v1/media HTTP/1.1\r\nHost: x\r\n' +
            `Authorization: Bearer ${user.token}\r\n` +
            'Content-Type: multipart/form-data; boundary=B\r\nContent-Length: 100000\r\n\r\n' +
            '--B\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\n\r\n\x89PNG',
        );
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 50);
      });
      socket.on('error', reject);
    });
    const me = await call(server.url, 'GET', '/api/v1/accounts/verify_credentials', { token: user.token });
    expect(me.status).toBe(200);
  });

  it('never answers 5xx to arbitrary bodies on any route, and keeps running', async () => {
    const user = await newUser(server.url);
    const routes = [
      ['POST', '/api/v1/apps'],
      ['POST', '/oauth/token'],
      ['POST', '/api/v1/accounts'],
      ['POST', '/api/v1/media'],
      ['POST', '/api/v2/media'],
      ['POST', '/api/v1/statuses'],
      ['DELETE', '/api/v1/statuses/1'],
      ['POST', '/api/v1/statuses/1/reblog'],
    ] as const;
    const contentType = fc.constantFrom(
      'application/json',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=B',
      'multipart/form-data',
      'text/plain',
      'application/json; charset=latin1',
    );
    const jsonish = fc.oneof(
      fc.json(),
      fc.string(),
      fc
        .dictionary(
          fc.constantFrom('status', 'poll', 'media_ids', '__proto__', 'username', 'agreement', 'focus'),
          fc.jsonValue(),
        )
        .map((o) => JSON.stringify(o)),
      fc
        .array(
          fc.tuple(
            fc.constantFrom('status', 'poll[options][]', 'poll[expires_in]', 'a[', 'x[][y]', 'media_ids[]', '%zz'),
            fc.string(),
          ),
        )
        .map((pairs) => pairs.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&')),
      fc.string().map((s) => `--B\r\nContent-Disposition: form-data; name="status"\r\n\r\n${s}\r\n--B--\r\n`),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...routes),
        contentType,
        jsonish,
        fc.string({ maxLength: 30 }),
        async ([method, path], type, body, query) => {
          const res = await fetch(`${server.url}${path}?${encodeURI(query)}`, {
            method,
            headers: { 'content-type': type, authorization: `Bearer ${user.token}` },
            body,
          });
          await res.arrayBuffer();
          expect(res.status).toBeLessThan(500);
        },
      ),
      { numRuns: 150 },
    );
    expect((await call(server.url, 'GET', '/api/v1/accounts/verify_credentials', { token: user.token })).status).toBe(
      200,
    );
  });
});

describe('startUpstream and createUpstreamHandler', () => {
  it('listens on a free port of 127.0.0.1 by default and reports it', async () => {
    const up = await startUpstream();
    try {
      expect(up.port).toBeGreaterThan(0);
      expect(up.url).toBe(`http://127.0.0.1:${up.port}`);
      expect((up.server.address() as AddressInfo).port).toBe(up.port);
    } finally {
      await up.close();
    }
  });

  it('closes idle keep-alive connections on close()', async () => {
    const up = await startUpstream({ port: 0 });
    const agent = new http.Agent({ keepAlive: true });
    // Wrapped in an object: resolving with a bare promise would wait for it.
    const { closed } = await new Promise<{ closed: Promise<void> }>((resolve, reject) => {
      const req = http.get(`${up.url}/nowhere`, { agent }, (res) => {
        res.resume();
        res.on('end', () => {
          const socket = req.socket;
          if (socket === null) return reject(new Error('no socket'));
          resolve({ closed: new Promise<void>((done) => socket.once('close', () => done())) });
        });
      });
      req.on('error', reject);
    });
    // Without closing idle sockets, close() would wait out the keep-alive timeout (5 s).
    const started = Date.now();
    await up.close();
    await closed;
    expect(Date.now() - started).toBeLessThan(4000);
    agent.destroy();
  });

  it('lets a request in flight finish on close(), then closes its keep-alive connection too', async () => {
    const up = await startUpstream({ port: 0 });
    const user = await newUser(up.url);
    const inFlight = new Promise((r) => up.server.once('request', r));
    const agent = new http.Agent({ keepAlive: true });
    const req = http.request(`${up.url}/api/v1/statuses`, {
      method: 'POST',
      agent,
      headers: { authorization: `Bearer ${user.token}`, 'content-type': 'application/x-www-form-urlencoded' },
    });
    const answered = new Promise<{ status: number; closed: Promise<void> }>((resolve, reject) => {
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => {
          const socket = req.socket;
          if (socket === null) return reject(new Error('no socket'));
          resolve({
            status: res.statusCode ?? 0,
            closed: new Promise<void>((done) => socket.once('close', () => done())),
          });
        });
      });
      req.on('error', reject);
    });
    req.write('status=half');
    // The request in the server's hands (in flight) before close().
    await inFlight;
    const started = Date.now();
    const closing = up.close();
    req.end('way');
    const { status, closed } = await answered;
    expect(status).toBe(200);
    await closing;
    await closed;
    // Node alone would keep the now idle socket, and close() pending, for the keep-alive timeout.
    expect(Date.now() - started).toBeLessThan(4000);
    agent.destroy();
  });

  it('serves from a plain node:http server, each handler with its own records', async () => {
    const one = http.createServer(createUpstreamHandler({ baseUrl: 'https://one.example/' }));
    const two = http.createServer(createUpstreamHandler());
    await Promise.all([one, two].map((s) => new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))));
    const urlOf = (s: http.Server): string => `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
    try {
      const user = await newUser(urlOf(one));
      const mine = await call(urlOf(one), 'GET', '/api/v1/accounts/verify_credentials', { token: user.token });
      expect(mine.status).toBe(200);
      expect(mine.body.url).toBe(`https://one.example/@${user.username}`);
      expect((await call(urlOf(two), 'GET', '/api/v1/accounts/verify_credentials', { token: user.token })).status).toBe(
        401,
      );
    } finally {
      await Promise.all(
        [one, two].map(
          (s) =>
            new Promise<void>((resolve) => {
              s.close(() => resolve());
              s.closeAllConnections();
            }),
        ),
      );
    }
  });

  it('refuses a maxUploadBytes that is not a positive integer', () => {
    expect(() => createUpstreamHandler({ maxUploadBytes: 0 })).toThrow(RangeError);
    expect(() => createUpstreamHandler({ maxUploadBytes: 1.5 })).toThrow(RangeError);
  });
});
