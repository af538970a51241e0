/**
 * @module The baseline: the thinnest Node forwarder that is still a correct streaming proxy. node:http
 * in, an undici Pool out (same pool settings as the gateway: 128 connections, no pipelining), bodies
 * streamed both ways, hop-by-hop headers dropped; no limits, no metrics, no logs.
 *
 * `pool.stream` writes the upstream body straight into the client response (no intermediate Readable,
 * no `stream.pipeline`, whose per-call AbortController costs a DOMException per request).
 *
 * `--gateway-headers`: the same forwarder adding the headers rategate adds to every forwarded request of
 * the bench, built per request the same way (X-Forwarded-For/-Proto/-Host/-Port/-Ssl and X-Request-Id upstream;
 * the X-RateLimit-* triple, RateLimit-Policy and RateLimit to the client). What node:http and undici
 * charge to validate and write them is a floor no Node gateway sending them goes below. `--dispatch`:
 * forwarding through a dispatch handler of its own, as rategate does, instead of `pool.stream`.
 *
 * `--reject`: no forwarding at all; every request is answered with the 429 rategate writes for the
 * bench's exhausted path (`GET /api/v1/exhausted` with a user token): the same eight headers, their
 * values built per request as the gateway builds them, the same body. No limiting: the floor under
 * any Node gateway's 429 (the `floor-429` row of the instructions table).
 *
 *   node --import tsx bench/thin-forwarder.ts --listen 127.0.0.1:8081 --upstream http://127.0.0.1:3000 [--gateway-headers] [--dispatch] [--reject]
 */
import http from 'node:http';
import { parseArgs } from 'node:util';
import { Pool, type Dispatcher } from 'undici';

const { values } = parseArgs({
  options: {
    listen: { type: 'string' },
    upstream: { type: 'string' },
    'gateway-headers': { type: 'boolean' },
    dispatch: { type: 'boolean' },
    reject: { type: 'boolean' },
  },
});
const [host, port] = (values.listen ?? '127.0.0.1:8081').split(':') as [string, string];
const pool = new Pool(values.upstream ?? 'http://127.0.0.1:3000', {
  connections: 128,
  pipelining: 1,
  keepAliveTimeout: 4_000,
});

const GATEWAY_HEADERS = values['gateway-headers'] === true;
const DISPATCH = values.dispatch === true;
const REJECT = values.reject === true;
const ID_PREFIX = `${process.pid.toString(16)}-`;
let ids = 0;
let remaining = 1_000_000_000;
/** The reset time and its text, made once per window as the gateway does. */
let resetAt = 0;
let resetText = '';

const HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-connection',
  'host',
]);

/** The client's headers for the upstream: hop-by-hop dropped (`--gateway-headers`: rategate's six added). */
function upstreamHeaders(req: http.IncomingMessage): string[] {
  const raw = req.rawHeaders;
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (!HOP.has(raw[i]!.toLowerCase())) headers.push(raw[i]!, raw[i + 1]!);
  if (GATEWAY_HEADERS) {
    const id = ID_PREFIX + (++ids).toString(16).padStart(12, '0');
    headers.push(
      'x-forwarded-for',
      req.socket.remoteAddress ?? '',
      'x-forwarded-proto',
      'http',
      'x-forwarded-host',
      req.headers.host ?? '',
      'x-forwarded-port',
      String(req.socket.localPort ?? 80),
      'x-forwarded-ssl',
      'off',
      'x-request-id',
      id,
    );
  }
  return headers;
}

/** The upstream's headers for the client: hop-by-hop dropped (`--gateway-headers`: rategate's five added). */
function clientHeaders(upHeaders: Record<string, string | string[] | undefined>): string[] {
  const out: string[] = [];
  for (const name in upHeaders) {
    const v = upHeaders[name];
    if (v === undefined || HOP.has(name)) continue;
    if (Array.isArray(v)) for (const x of v) out.push(name, x);
    else out.push(name, v);
  }
  if (GATEWAY_HEADERS) {
    const left = --remaining;
    const now = Date.now();
    const reset = now - (now % 3_600_000) + 3_600_000;
    if (reset !== resetAt) resetText = new Date((resetAt = reset)).toISOString().slice(0, -1) + '000Z';
    const t = Math.ceil((reset - now) / 1000);
    out.push('X-RateLimit-Limit', '1000000000', 'X-RateLimit-Remaining', String(left), 'X-RateLimit-Reset', resetText);
    out.push(
      'RateLimit-Policy',
      '"account-access";q=1000000000;w=3600, "ip-access";q=1000000000;w=3600, "status-read";q=1000000000;w=3600',
    );
    out.push(
      'RateLimit',
      '"account-access";r=' +
        left +
        ';t=' +
        t +
        ', "ip-access";r=' +
        left +
        ';t=' +
        t +
        ', "status-read";r=' +
        left +
        ';t=' +
        t,
    );
  }
  return out;
}

// rategate's default 429 body, byte for byte (responses.body).
const LIMITED_BODY = Buffer.from('{"error":"Too many requests"}');
const LIMITED_LENGTH = String(LIMITED_BODY.length);
const HOUR_MS = 3_600_000;

/**
 * `--reject`: rategate's 429 for the exhausted path (1 per hour; account-access and ip-access beside it
 * with their room), each value made per request as the gateway makes it: the reset text once per
 * window, Retry-After and the seconds left computed, the RateLimit field concatenated.
 */
function reject(res: http.ServerResponse): void {
  const now = Date.now();
  const reset = now - (now % HOUR_MS) + HOUR_MS;
  if (reset !== resetAt) resetText = new Date((resetAt = reset)).toISOString().slice(0, -1) + '000Z';
  const t = Math.ceil((reset - now) / 1000);
  const left = --remaining;
  res.writeHead(429, [
    'Content-Type',
    'application/json; charset=utf-8',
    'Content-Length',
    LIMITED_LENGTH,
    'X-RateLimit-Limit',
    '1',
    'X-RateLimit-Remaining',
    '0',
    'X-RateLimit-Reset',
    resetText,
    'Retry-After',
    String(t),
    'RateLimit-Policy',
    '"exhausted";q=1;w=3600, "account-access";q=1000000000;w=3600, "ip-access";q=1000000000;w=3600',
    'RateLimit',
    '"exhausted";r=0;t=' + t + ', "account-access";r=' + left + ';t=' + t + ', "ip-access";r=' + left + ';t=' + t,
  ]);
  res.end(LIMITED_BODY);
}

function unreachable(res: http.ServerResponse): void {
  if (res.headersSent) res.destroy();
  else {
    res.writeHead(502, { 'content-type': 'application/json' });
    res.end('{"error":"Upstream unreachable","code":"UPSTREAM_UNREACHABLE"}');
  }
}

/**
 * `--dispatch`: the exchange as its own undici dispatch handler, as rategate forwards (proxy/forward.ts),
 * without undici's stream API around it; the body written with backpressure, a failure answered once.
 */
class Exchange implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  private onDrain: (() => void) | null = null;
  private ended = false;

  constructor(private readonly res: http.ServerResponse) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
  }

  onResponseStart(
    _c: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    if (statusCode >= 200) this.res.writeHead(statusCode, clientHeaders(headers));
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.res.write(chunk)) return;
    controller.pause();
    if (this.onDrain === null) this.res.on('drain', (this.onDrain = () => this.controller?.resume()));
  }

  onResponseEnd(): void {
    if (this.ended) return;
    this.ended = true;
    this.res.end();
  }

  onResponseError(_c: Dispatcher.DispatchController, _err: Error): void {
    if (this.ended) return;
    this.ended = true;
    unreachable(this.res);
  }
}

const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  if (REJECT) return reject(res);
  const headers = upstreamHeaders(req);
  const hasBody = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
  if (DISPATCH) {
    pool.dispatch(
      { path: req.url ?? '/', method: req.method as 'GET', headers, body: hasBody ? req : null },
      new Exchange(res),
    );
    return;
  }
  pool.stream(
    { path: req.url ?? '/', method: req.method as 'GET', headers, body: hasBody ? req : null, opaque: res },
    ({ statusCode, headers: upHeaders, opaque }) => {
      const r = opaque as http.ServerResponse;
      r.writeHead(statusCode, clientHeaders(upHeaders));
      return r;
    },
    (err) => {
      if (err !== null) unreachable(res);
    },
  );
});
server.listen(Number(port), host, () => console.log(`thin forwarder on http://${host}:${port}`));
const stop = (): void => {
  server.close();
  server.closeAllConnections();
  void pool.close().then(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
