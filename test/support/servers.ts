/** @module Real servers on loopback port 0 for tests, closed with all their sockets. */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface Running {
  url: string;
  port: number;
  server: http.Server;
  close(): Promise<void>;
}

/** Starts `handler` on 127.0.0.1 at a free port. */
export async function serve(handler: http.RequestListener): Promise<Running> {
  return listen(http.createServer(handler));
}

/** Listens an existing server on 127.0.0.1:0 and returns its URL and a closer that also drops keep-alive sockets. */
export async function listen(server: http.Server): Promise<Running> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A TCP port that was free a moment ago (for processes that must be told their port up front). */
export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}
