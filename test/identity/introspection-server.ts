/** @module A real node:http stand-in for verify_credentials on 127.0.0.1:0 that counts its calls. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import type { Introspect } from '../../src/identity/account.js';
import { createHttpIntrospector } from '../../src/identity/introspect.js';
import { blockFixture } from '../support/fixture.js';

export interface IntrospectionServer {
  readonly origin: string;
  /** Calls per bearer token. */
  readonly calls: Map<string, number>;
  /** Every request seen, for asserting method, path and headers. */
  readonly requests: IncomingMessage[];
  total(): number;
  close(): Promise<void>;
}

export const VERIFY_PATH = '/api/v1/accounts/verify_credentials';

/**
 * Token → behaviour: `user-<id>` 200 {id}, `num-<n>` 200 {id: n}, `app` 401, `forbidden` 403,
 * `unprocessable` 422, `boom` 500, `missing` 404, `badjson` 200 not JSON, `noid` 200 {}, `big` 200 with
 * a 1 MiB body, `slow` never answers.
 */
function answer(token: string, res: ServerResponse): void {
  const json = (status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  if (token.startsWith('user-')) return json(200, { id: token.slice(5), username: 'u' });
  if (token.length > 8000) return json(431, { error: 'Request Header Fields Too Large' });
  if (token.startsWith('num-')) return json(200, { id: Number(token.slice(4)) });
  switch (token) {
    case 'app':
      return json(401, { error: 'This method requires an authenticated user' });
    case 'forbidden':
      return json(403, { error: 'forbidden' });
    case 'unprocessable':
      return json(422, { error: 'Your login is missing a confirmed e-mail address' });
    case 'boom':
      return json(500, { error: 'oops' });
    case 'missing':
      return json(404, { error: 'Record not found' });
    case 'badjson':
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end('{"id": ');
    case 'noid':
      return json(200, { username: 'x' });
    case 'big':
      return json(200, { id: '1', pad: 'x'.repeat(1024 * 1024) });
    case 'slow':
      return; // never answers; the introspector's timeout must fire
    default:
      return json(401, { error: 'The access token is invalid' });
  }
}

export async function startIntrospectionServer(): Promise<IntrospectionServer> {
  const calls = new Map<string, number>();
  const requests: IncomingMessage[] = [];
  const server: Server = createServer((req, res) => {
    requests.push(req);
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    calls.set(token, (calls.get(token) ?? 0) + 1);
    // Answer a little later so concurrent misses really overlap.
    setTimeout(() => answer(token, res), 20);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    calls,
    requests,
    total: () => [...calls.values()].reduce((a, b) => a + b, 0),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An origin nothing listens on: a port that was just free. */
export async function refusedOrigin(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/**
 * The block's introspection server, and an HTTP introspector of verify_credentials on its own pool of
 * `connections` (300 ms timeout): started before the block's tests, closed after.
 */
export function introspectionFixture(connections: number): { server: IntrospectionServer; introspect: Introspect } {
  const parts = blockFixture(
    async () => {
      const server = await startIntrospectionServer();
      const pool = new Pool(server.origin, { connections });
      return {
        server,
        pool,
        introspect: createHttpIntrospector({
          dispatcher: pool,
          origin: server.origin,
          path: VERIFY_PATH,
          timeoutMs: 300,
        }),
      };
    },
    async ({ server, pool }) => {
      await pool.destroy();
      await server.close();
    },
    'introspection server',
  );
  return {
    get server() {
      return parts.server;
    },
    introspect: (token) => parts.introspect(token),
  };
}
