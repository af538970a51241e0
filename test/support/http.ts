/** @module A raw HTTP client for tests: sends the path byte for byte (fetch would normalize it). */
import http from 'node:http';
import { eventually } from './eventually.js';

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

/** The status a gateway answers the client `ip` names (X-Forwarded-For, from a trusted loopback peer); the body drained. */
export async function statusFor(url: string, ip: string, init: RequestInit = {}): Promise<number> {
  const r = await fetch(url, {
    ...init,
    headers: { 'x-forwarded-for': ip, ...(init.headers as Record<string, string> | undefined) },
  });
  await r.arrayBuffer();
  return r.status;
}

/** Polls until every URL has answered `want` to `ip` (replicas applying a shared change); the ms it took. */
export async function untilEveryAnswers(
  urls: readonly string[],
  ip: string,
  want: number,
  withinMs: number,
): Promise<number> {
  const t0 = Date.now();
  const pending = new Set(urls);
  await eventually(
    async () => {
      for (const u of [...pending]) if ((await statusFor(u, ip)) === want) pending.delete(u);
      return pending.size === 0 ? true : [...pending];
    },
    { what: `every replica answering ${want} to ${ip}`, withinMs, until: (v) => v === true },
  );
  return Date.now() - t0;
}
