/**
 * @module The status page's routes on the admin listener: `GET /` and `GET /status` (HTML) and
 * `GET /status.json`. The same door as the admin API: the token whenever one is set, refused off
 * loopback while none is set (bans and blocks carry IPs). Reads also take the token as the password of
 * HTTP Basic credentials (`/status?login` asks the browser for them), so a browser without JavaScript can
 * read; writes stay with the admin API, which takes a bearer token only.
 */
import type http from 'node:http';
import { BEARER_CHALLENGE, doorCheck } from './door.js';
import type { AdminApi } from './api.js';
import { CONTENT_SECURITY_POLICY } from './status-assets.js';
import { statusData, type StatusData } from './status-data.js';
import { notice, statusPage } from './status-page.js';
import { statusView, type Section } from './status-view.js';

export const STATUS_PATHS: ReadonlySet<string> = new Set(['/', '/status', '/status.json']);

const BASIC_CHALLENGE = 'Basic realm="rategate status", charset="UTF-8"';

const SIGN_IN =
  'This gateway has an admin token: enter it above (kept in this tab only, sent as a bearer header). ' +
  'Without JavaScript, open /status?login and give the token as the password (any user name).';

/** Answers a GET on one of STATUS_PATHS. */
export async function serveStatus(
  api: AdminApi | undefined,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  path: string,
  query: string,
): Promise<void> {
  const asJson = path === '/status.json';
  if (api?.status === undefined) {
    const error = 'Not found (the status page is served by single-process mode only; /metrics is served here)';
    return asJson
      ? sendJson(res, 404, { error })
      : sendPage(res, 404, page(null, false, [notice('error', 'Not found', error)]));
  }
  const tokenRequired = api.credentials().length > 0;
  const refused = doorCheck(
    { credentials: api.credentials(), loopbackOnly: api.loopbackOnly },
    req.headers.authorization,
    { write: false, basic: true },
  );
  if (!refused.pass) {
    if (refused.status === 401)
      res.setHeader('WWW-Authenticate', new URLSearchParams(query).has('login') ? BASIC_CHALLENGE : BEARER_CHALLENGE);
    if (asJson) return sendJson(res, refused.status, { error: refused.error });
    const shown =
      refused.status === 401 ? notice('sign-in', 'Sign in', SIGN_IN) : notice('refused', 'Refused', refused.error);
    return sendPage(res, refused.status, page(null, tokenRequired, [shown]));
  }
  const data = await statusData(req, api.status, api.policy(), api.guard, tokenRequired, api.fleet);
  const view = statusView(data);
  if (asJson) return sendJson(res, 200, { ...data, view });
  sendPage(res, 200, page(data, tokenRequired, view));
}

function page(data: StatusData | null, tokenRequired: boolean, sections: readonly Section[]): string {
  const meta =
    data === null
      ? ''
      : `rategate ${data.version} · ${data.replica.host} (pid ${data.replica.pid}) · ${data.generatedAt}`;
  return statusPage({ meta, tokenRequired, sections, refresh: data !== null });
}

/** Headers of every answer here: nothing cached (IPs), nothing sniffed, no referrer, no framing. */
function common(res: http.ServerResponse): void {
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
}

function sendPage(res: http.ServerResponse, status: number, html: string): void {
  common(res);
  res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
  res.setHeader('X-Frame-Options', 'DENY');
  res.writeHead(status, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Length': Buffer.byteLength(html) });
  res.end(html);
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  common(res);
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}
