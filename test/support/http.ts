/** @module A raw HTTP client for tests: sends the path byte for byte (fetch would normalize it). */
import http from 'node:http';

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  json<T = unknown>(): T;
}

export interface Send {
  method?: string;
  path: string;
  headers?: http.OutgoingHttpHeaders;
  body?: string | Buffer;
  /** Reuse connections (default: a fresh one per request, so tests do not share sockets). */
  agent?: http.Agent | false;
}

export function send(baseUrl: string, req: Send): Promise<Answer> {
  const u = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const r = http.request(
      {
        host: u.hostname,
        port: Number(u.port),
        method: req.method ?? 'GET',
        path: req.path,
        headers: req.headers,
        agent: req.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json: () => JSON.parse(body) });
        });
        res.on('error', reject);
      },
    );
    r.on('error', reject);
    r.end(req.body);
  });
}
