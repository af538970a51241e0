/**
 * The store's ping (a breaker's recovery probe, /readyz) passes only when decisions can be made: on a
 * connection that finished its ready check. ioredis writes ROLE (a command allowed while a server
 * loads) on a connection still in its handshake, and the server may answer it before the ready check's
 * INFO; a probe that passed then closed the breaker while every script call was still refused ("Stream
 * isn't writeable"), so the first decisions after a Redis restart went to the fault policy again.
 *
 * The server here is a few lines of RESP on a real socket: it answers the handshake and ROLE at once
 * and holds INFO, which keeps the connection in that handshake for as long as the test needs.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createRedisStore, type RedisStore } from '../../src/limiter/redis/store.js';
import { eventually } from '../support/eventually.js';

/** A server that answers CLIENT and ROLE (as a master) and never answers INFO; records the commands it read. */
async function handshakeOnlyServer(): Promise<{ url: string; seen: string[]; close(): Promise<void> }> {
  const seen: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('data', (chunk) => {
      // Each command is an array of bulk strings; its name is the first bulk string after the `*n` line.
      for (const m of chunk.toString('latin1').matchAll(/\*\d+\r\n\$\d+\r\n([A-Za-z]+)\r\n/g)) {
        const name = m[1]!.toLowerCase();
        seen.push(name);
        if (name === 'role') socket.write('*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n');
        else if (name !== 'info') socket.write('+OK\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('the Redis store ping', () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0)) await c();
  });

  it('fails while the connection has not finished its ready check, though the server answers ROLE', async () => {
    const server = await handshakeOnlyServer();
    const store: RedisStore = createRedisStore({ url: server.url, prefix: 'p', timeoutMs: 500 });
    cleanup.push(
      () => store.close(),
      () => server.close(),
    );
    store.ready(2_000).catch(() => undefined); // starts the connection; it never becomes ready here
    await eventually(() => server.seen.includes('info'), { what: 'the ready check (INFO) sent', withinMs: 5_000 });
    await expect(store.ping()).rejects.toThrow(/not ready/);
    expect(server.seen).not.toContain('role'); // refused before asking the server anything
  });
});
