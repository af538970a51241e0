/**
 * @module Which listener a connection goes to: ALPN `h2` on the TLS listener, the HTTP/2 preface (prior
 * knowledge, h2c) on the plain one, to the HTTP/2 edge (h2.ts); every other to node's HTTP/1.1 listener.
 */
import type http from 'node:http';
import type https from 'node:https';
import type net from 'node:net';
import type tls from 'node:tls';
import { readFirstBytes } from './first-bytes.js';
import type { H2Edge } from './h2.js';

/** The bytes every HTTP/2 connection with prior knowledge opens with (RFC 9113 §3.4). */
export const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/**
 * The TLS listener's connections by what ALPN chose: `h2` to the HTTP/2 server, the rest (`http/1.1`,
 * or a client that offered no ALPN) to node:https's own listener, as before.
 */
export function serveH2OnAlpn(server: https.Server, h2: H2Edge): void {
  const http1 = server.listeners('secureConnection') as Array<(socket: tls.TLSSocket) => void>;
  server.removeAllListeners('secureConnection');
  server.on('secureConnection', (socket: tls.TLSSocket) => {
    if (socket.alpnProtocol === 'h2') return void h2.server.emit('connection', socket);
    for (const listener of http1) listener.call(server, socket);
  });
}

/**
 * HTTP/2 with prior knowledge on the plain listener: a connection that opens with the preface goes to the
 * HTTP/2 server, any other to node:http's listener, as soon as a byte tells them apart (the first byte
 * for nearly every HTTP/1.1 request; `P` for POST, PUT and PATCH a few more). The bytes read are put
 * back for whoever reads the connection. A connection that sends nothing is closed after
 * `timeoutMs` (server.headersTimeout), as a head that does not come is.
 */
export function sniffH2Preface(server: http.Server, h2: H2Edge, timeoutMs: number): void {
  const http1 = server.listeners('connection') as Array<(socket: net.Socket) => void>;
  server.removeAllListeners('connection');
  const toHttp1 = (socket: net.Socket): void => {
    for (const listener of http1) listener.call(server, socket);
  };
  server.on('connection', (socket: net.Socket) => {
    readFirstBytes(
      socket,
      timeoutMs,
      () => socket.destroy(),
      (held, stop) => {
        const handTo = (to: (socket: net.Socket) => void, resume: boolean): void => {
          stop();
          socket.pause();
          socket.unshift(held);
          to(socket);
          // node:http2 reads what is buffered itself (on the next tick) and then the socket's handle: a
          // flowing socket would hand those bytes to nobody.
          if (resume) socket.resume();
        };
        const n = Math.min(held.length, H2_PREFACE.length);
        if (!held.subarray(0, n).equals(H2_PREFACE.subarray(0, n))) return handTo(toHttp1, true);
        if (held.length >= H2_PREFACE.length) handTo((s) => h2.server.emit('connection', s), false);
      },
    );
  });
}
