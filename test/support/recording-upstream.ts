/**
 * @module An upstream for gateway tests that records every request it receives and answers the account
 * introspection call: bearer `user-<id>` owns account <id>, `app-…` is an app token (no owner), `write-…`
 * a token without a read scope (Mastodon answers verify_credentials 403 for it).
 */
import type http from 'node:http';
import { serve, type Running } from './servers.js';
import { PROBE_USER_AGENT } from '../../src/proxy/upstream-probe.js';

export interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  bodyBytes: number;
}

export interface RecordingUpstream extends Running {
  readonly seen: Seen[];
  /** Requests other than introspection calls. */
  readonly forwarded: () => Seen[];
  /** Set the answer for paths starting with a prefix: a status, or a custom handler. */
  route(prefix: string, handler: (req: http.IncomingMessage, res: http.ServerResponse) => void): void;
}

export const VERIFY = '/api/v1/accounts/verify_credentials';

export async function startRecordingUpstream(): Promise<RecordingUpstream> {
  const seen: Seen[] = [];
  const routes: Array<[string, (req: http.IncomingMessage, res: http.ServerResponse) => void]> = [];
  const running = await serve((req, res) => {
    // The gateway's upstream probe (rategate_upstream_up) is not a request a test sent: answered, not recorded.
    if (req.headers['user-agent'] === PROBE_USER_AGENT) return void res.writeHead(204).end();
    let bodyBytes = 0;
    const entry: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, bodyBytes: 0 };
    seen.push(entry);
    const custom = routes.find(([p]) => (req.url ?? '').startsWith(p));
    if (custom) return custom[1](req, res);
    req.on('data', (c: Buffer) => (bodyBytes += c.length));
    req.on('end', () => {
      entry.bodyBytes = bodyBytes;
      if (req.url === VERIFY) {
        const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
        if (token.startsWith('user-')) return reply(res, 200, { id: token.slice(5), username: `u${token.slice(5)}` });
        if (token.startsWith('app-')) return reply(res, 422, { error: 'This method requires an authenticated user' });
        if (token.startsWith('write-'))
          return reply(res, 403, { error: 'This action is outside the authorized scopes' });
        return reply(res, 401, { error: 'The access token is invalid' });
      }
      reply(res, 200, { method: req.method, url: req.url, bodyBytes });
    });
  });
  return {
    ...running,
    seen,
    forwarded: () => seen.filter((s) => s.url !== VERIFY),
    route: (prefix, handler) => void routes.unshift([prefix, handler]),
  };
}

function reply(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** Every sign-in attempt answered 401 once its body is read, as Devise answers a wrong password: what login bans count. */
export function refuseSignIns(upstream: Pick<RecordingUpstream, 'route'>): void {
  upstream.route('/auth/sign_in', (req, res) => {
    req.resume();
    req.on('end', () => reply(res, 401, { error: 'Invalid Email or password.' }));
  });
}
