/**
 * A TCP proxy in front of a real server that cuts every connection soon after it opens: after its first
 * few replies (at once, a turn later, or with a FIN) or 30–80 ms in, whichever comes first. What a
 * Redis behind a flapping network or a restarting balancer looks like to its clients: connect, ready,
 * gone, again and again.
 */
import net from 'node:net';

export interface FlappingProxy {
  readonly port: number;
  /** Connections cut so far. */
  readonly cuts: () => number;
  /** Stops cutting: connections opened from now on stay up. */
  calm(): void;
  close(): Promise<void>;
}

export async function startFlappingProxy(target: { host: string; port: number }): Promise<FlappingProxy> {
  let cuts = 0;
  let flapping = true;
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const server = net.connect(target.port, target.host);
    for (const s of [client, server]) {
      open.add(s);
      s.on('error', () => {});
      s.on('close', () => open.delete(s));
    }
    client.pipe(server);
    if (!flapping) {
      server.pipe(client);
      return;
    }
    const cut = (how: number): void => {
      cuts++;
      if (how < 0.3) client.destroy();
      else if (how < 0.6) setImmediate(() => client.destroy());
      else client.end();
      server.destroy();
    };
    let replies = 0;
    const after = 1 + Math.floor(Math.random() * 6);
    server.on('data', (d: Buffer) => {
      client.write(d);
      if (++replies === after) cut(Math.random());
    });
    const timer = setTimeout(() => cut(0), 30 + Math.random() * 50);
    client.on('close', () => clearTimeout(timer));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    cuts: () => cuts,
    calm: () => {
      flapping = false;
      for (const s of open) s.destroy();
    },
    close: async () => {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
