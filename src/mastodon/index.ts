/** @module The built-in, in-memory Mastodon-style API the gateway fronts by default (`upstream.url: builtin`). */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHandler } from './router.js';
import { settleSocketShape } from '../http/socket-shape.js';

export interface UpstreamOptions {
  /** Largest accepted media file in bytes (v1 and v2); larger uploads get 413 and are not read on. Default 16 MiB. */
  maxUploadBytes?: number;
  /** Prefix of the URLs inside entities (account, status, media). Default `http://localhost`. */
  baseUrl?: string;
  /** The clock accounts are created by (epoch ms; default Date.now): a test signs up an account "in the past". */
  now?: () => number;
}

export interface RunningUpstream {
  url: string;
  port: number;
  server: http.Server;
  close(): Promise<void>;
}

const DEFAULT_MAX_UPLOAD_BYTES = 16 * 1024 * 1024;

/** A request listener holding its own records: two handlers never share accounts or statuses. */
export function createUpstreamHandler(
  opts: UpstreamOptions = {},
): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  const maxUploadBytes = opts.maxUploadBytes ?? DEFAULT_MAX_UPLOAD_BYTES;
  if (!Number.isSafeInteger(maxUploadBytes) || maxUploadBytes <= 0) {
    throw new RangeError(`maxUploadBytes must be a positive integer, got ${String(opts.maxUploadBytes)}`);
  }
  const baseUrl = (opts.baseUrl ?? 'http://localhost').replace(/\/+$/, '');
  return createHandler({ maxUploadBytes, baseUrl, now: opts.now ?? Date.now });
}

/** Listens on `host` (default 127.0.0.1) and `port` (default 0: a free port). */
export async function startUpstream(
  opts: UpstreamOptions & { host?: string; port?: number } = {},
): Promise<RunningUpstream> {
  const { host = '127.0.0.1', port = 0, ...rest } = opts;
  const handle = createUpstreamHandler(rest);
  // In the gateway's process (`upstream.url: builtin`) its sockets meet the same stream code as the proxy's.
  const server = http.createServer((req, res) => {
    settleSocketShape(req);
    handle(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const hostPart = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${hostPart}:${address.port}`,
    port: address.port,
    server,
    close: () =>
      new Promise<void>((resolve, reject) => {
        // close() waits for open sockets, and an idle keep-alive one would hold it for the whole
        // keepAliveTimeout. A socket still busy with a request turns idle once it is answered, after
        // the first sweep has passed it by, so idle sockets are swept until the server has closed.
        const sweep = setInterval(() => server.closeIdleConnections(), 25);
        server.close((err) => {
          clearInterval(sweep);
          if (err) reject(err);
          else resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
