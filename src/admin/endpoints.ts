/**
 * @module Every endpoint of the admin listener, as data: docs/operations.md's endpoint table is
 * generated from it (`npm run docs`), and a test sends each one to a real admin listener, so the router,
 * this list and the docs cannot drift apart.
 */

export interface AdminEndpoint {
  readonly method: 'GET' | 'POST' | 'DELETE';
  /** The path; `<…>` stands for one segment an operator fills in (URL-encoded). */
  readonly path: string;
  /** `open`: no token ever; `token`: the admin door (the token when one is set, loopback-only otherwise). */
  readonly door: 'open' | 'token';
  /** Served by single-process mode only (the cluster primary answers 404). */
  readonly singleProcess: boolean;
  /** One line: what it answers or does. */
  readonly what: string;
}

const open = (method: AdminEndpoint['method'], path: string, what: string): AdminEndpoint => ({
  method,
  path,
  door: 'open',
  singleProcess: false,
  what,
});
const api = (method: AdminEndpoint['method'], path: string, what: string): AdminEndpoint => ({
  method,
  path,
  door: 'token',
  singleProcess: true,
  what,
});

export const ADMIN_ENDPOINTS: readonly AdminEndpoint[] = Object.freeze([
  open('GET', '/metrics', 'Prometheus text (with `--workers`: summed over the workers)'),
  open('GET', '/healthz', 'alive: 200 `{"status":"ok"}`'),
  open('GET', '/readyz', "the gateway's own readiness: 200, or 503 with the failing check"),
  api('GET', '/', 'the status page (HTML)'),
  api('GET', '/status', 'the status page (HTML); `?login` asks the browser for the token'),
  api('GET', '/status.json', "the status page's data"),
  api('GET', '/admin/buckets', 'a bucket (`?rule=NAME&key=KEY`): limit, remaining, reset'),
  api('DELETE', '/admin/buckets', 'resets a bucket (`?rule=NAME&key=KEY`)'),
  api('GET', '/admin/blocks', 'blocks in force: config, runtime and IP bans'),
  api('POST', '/admin/blocks', 'adds a runtime block (`{"ip"|"cidr", "for", "reason"}`) → 201'),
  api('DELETE', '/admin/blocks/<ip-or-cidr>', 'lifts a runtime block (`?resetBuckets=true&reason=…`)'),
  api('GET', '/admin/exemptions', 'exemptions in force: config and runtime'),
  api('POST', '/admin/exemptions', 'adds a runtime exemption (`{"ip"|"cidr", "for", "reason"}`) → 201'),
  api('DELETE', '/admin/exemptions/<ip-or-cidr>', 'lifts a runtime exemption'),
  api('GET', '/admin/bans', 'live bans: ban, key, reason, start, expiry, who'),
  api('DELETE', '/admin/bans/<ban>/<key>', 'lifts a ban (`?resetBuckets=true&reason=…`)'),
  api(
    'GET',
    '/admin/surges',
    'every surge, on or off: since, until, reason, who, its trigger with its count, its rules',
  ),
  api(
    'POST',
    '/admin/surges/<name>/start',
    'starts (or extends) a surge on every replica (`?for=2h&reason=…`; default its `for`)',
  ),
  api(
    'POST',
    '/admin/surges/<name>/end',
    'ends a surge early on every replica and empties its count (`?reason=…`); 404 when it is not on',
  ),
  api(
    'GET',
    '/admin/limited',
    'the keys limited most for a rule by every replica sharing the store (`?rule=NAME&top=20`; `&scope=local`: this replica)',
  ),
]);
