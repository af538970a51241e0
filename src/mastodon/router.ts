/** @module The built-in upstream's route table and the request handler that runs it. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RouteContext, type Handler, type ResolvedOptions } from './context.js';
import { HttpError, notFound, sendJson } from './reply.js';
import { ParamError } from '../rails/rack-params.js';
import { signUp, updateCredentials, verifyCredentials } from './routes/accounts.js';
import { paranoidMail, signIn } from './routes/auth.js';
import { showMedia, uploadV1, uploadV2 } from './routes/media.js';
import { createApp, issueToken } from './routes/oauth.js';
import { createStatus, deleteStatus, reblogStatus, showStatus, unreblogStatus } from './routes/statuses.js';
import { Store } from './store.js';

type Methods = Readonly<Partial<Record<string, Handler>>>;

// Exact paths only. The gateway normalizes paths before counting and forwarding; an upstream that
// also answered `//api/v1/statuses` or `…/accounts.json` would make a normalization slip invisible.
const STATIC_ROUTES: ReadonlyMap<string, Methods> = new Map<string, Methods>([
  ['/api/v1/apps', { POST: createApp }],
  ['/oauth/token', { POST: issueToken }],
  ['/api/v1/accounts', { POST: signUp }],
  ['/api/v1/accounts/verify_credentials', { GET: verifyCredentials }],
  ['/api/v1/accounts/update_credentials', { PATCH: updateCredentials }],
  ['/api/v1/media', { POST: uploadV1 }],
  ['/api/v2/media', { POST: uploadV2 }],
  ['/api/v1/statuses', { POST: createStatus }],
  // Devise's routes, with and without Rails' `.json` format.
  ['/auth/sign_in', { POST: signIn }],
  ['/auth/sign_in.json', { POST: signIn }],
  ['/auth/password', { POST: paranoidMail }],
  ['/auth/password.json', { POST: paranoidMail }],
  ['/auth/confirmation', { POST: paranoidMail }],
  ['/auth/confirmation.json', { POST: paranoidMail }],
]);

/** Routes with a record id; ids are digits only, so `/api/v1/statuses/abc` is simply not a route. */
const ID_ROUTES: ReadonlyArray<{ readonly pattern: RegExp; readonly methods: Methods }> = [
  { pattern: /^\/api\/v1\/statuses\/(\d{1,20})$/, methods: { GET: showStatus, DELETE: deleteStatus } },
  { pattern: /^\/api\/v1\/statuses\/(\d{1,20})\/reblog$/, methods: { POST: reblogStatus } },
  { pattern: /^\/api\/v1\/statuses\/(\d{1,20})\/unreblog$/, methods: { POST: unreblogStatus } },
  { pattern: /^\/api\/v1\/media\/(\d{1,20})$/, methods: { GET: showMedia } },
];

function lookup(method: string, path: string): { handler: Handler; id: string } | undefined {
  // Rails answers HEAD with the GET route and no body; Node drops the body of a HEAD answer itself.
  const verb = method === 'HEAD' ? 'GET' : method;
  const fixed = STATIC_ROUTES.get(path);
  if (fixed !== undefined) {
    const handler = fixed[verb];
    return handler === undefined ? undefined : { handler, id: '' };
  }
  for (const { pattern, methods } of ID_ROUTES) {
    const match = pattern.exec(path);
    if (match === null) continue;
    const handler = methods[verb];
    return handler === undefined ? undefined : { handler, id: match[1] ?? '' };
  }
  return undefined;
}

/** Errors are logged outside tests only: a test run that provokes 500s on purpose stays readable. */
const QUIET = process.env['VITEST'] !== undefined || process.env['NODE_ENV'] === 'test';

function logError(err: unknown, req: IncomingMessage): void {
  if (QUIET) return;
  const detail = err instanceof Error ? (err.stack ?? err.message) : String(err);
  process.stderr.write(
    `rategate upstream: ${req.method ?? '?'} ${(req.url ?? '').split('?', 1)[0] ?? ''} failed: ${detail}\n`,
  );
}

function fail(res: ServerResponse, req: IncomingMessage, err: unknown): void {
  if (res.headersSent) {
    // Too late for an error body; cutting the connection is the only honest signal left.
    res.destroy();
    return;
  }
  if (err instanceof HttpError) {
    sendJson(res, err.status, err.body, err.closeConnection);
    return;
  }
  if (err instanceof ParamError) {
    // A 413 leaves the rest of the body unread: the connection cannot carry another request.
    sendJson(res, err.status, { error: err.message }, err.status === 413);
    return;
  }
  logError(err, req);
  sendJson(res, 500, { error: 'Internal server error' });
}

async function run(handler: Handler, ctx: RouteContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    const reply = await handler(ctx);
    sendJson(res, reply.status, reply.body);
  } catch (err) {
    fail(res, req, err);
  }
}

/**
 * A wrong method on a known path answers 404 `Record not found`, as Rails does for an unmatched
 * route; a 405 would tell a prober which paths exist and matches no Mastodon client's expectation.
 */
export function createHandler(opts: ResolvedOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const store = new Store();
  return (req, res) => {
    // A client that vanishes mid-body makes these emit 'error'; unheard, that would end the process.
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const rawQuery = q === -1 ? '' : url.slice(q + 1);
    const route = lookup(req.method ?? 'GET', path);
    if (route === undefined) {
      fail(res, req, notFound());
      return;
    }
    void run(route.handler, new RouteContext(req, store, opts, rawQuery, route.id), req, res).catch(() =>
      res.destroy(),
    );
  };
}
