/**
 * @module The baseline: the thinnest Node forwarder that is still a correct streaming proxy. node:http
 * in, an undici Pool out (same pool settings as the gateway: 128 connections, no pipelining), bodies
 * streamed both ways, hop-by-hop headers dropped; no limits, no metrics, no logs.
 *
 * `pool.stream` writes the upstream body straight into the client response (no intermediate Readable,
 * no `stream.pipeline`, whose per-call AbortController costs a DOMException per request).
 *
 *   node --import tsx bench/thin-forwarder.ts --listen 127.0.0.1:8081 --upstream http://127.0.0.1:3000
 */
import http from 'node:http';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

const { values } = parseArgs({ options: { listen: { type: 'string' }, upstream: { type: 'string' } } });
const [host, port] = (values.listen ?? '127.0.0.1:8081').split(':') as [string, string];
const pool = new Pool(values.upstream ?? 'http://127.0.0.1:3000', { connections: 128, pipelining: 1, keepAliveTimeout: 4_000 });

const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-connection', 'host']);

const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  const raw = req.rawHeaders;
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (!HOP.has(raw[i]!.toLowerCase())) headers.push(raw[i]!, raw[i + 1]!);
  const hasBody = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
  pool.stream(
    { path: req.url ?? '/', method: req.method as 'GET', headers, body: hasBody ? req : null, opaque: res },
    ({ statusCode, headers: upHeaders, opaque }) => {
      const out: string[] = [];
      for (const name in upHeaders) {
        const v = upHeaders[name];
        if (v === undefined || HOP.has(name)) continue;
        if (Array.isArray(v)) for (const x of v) out.push(name, x);
        else out.push(name, v);
      }
      const r = opaque as http.ServerResponse;
      r.writeHead(statusCode, out);
      return r;
    },
    (err) => {
      if (err === null) return;
      if (res.headersSent) res.destroy();
      else {
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end('{"error":"Upstream unreachable"}');
      }
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
