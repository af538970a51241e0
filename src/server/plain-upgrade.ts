/**
 * @module Upgrades other than WebSocket (e.g. `h2c`, which `curl --http2` asks of an `http://` URL) are
 * served as ordinary HTTP/1.1 requests — a server may ignore an upgrade (RFC 9110 §7.8). node:http hands
 * every `Upgrade` request to the 'upgrade' listener and detaches its parser, so the request head is
 * written again without the upgrade and the socket is handed back to the server as a connection: the
 * request then takes the ordinary path (counted once, one access-log line, keep-alive, its body).
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { connectionListed } from '../proxy/hop-by-hop.js';

/** Whether an upgrade asks for WebSocket, the one protocol the gateway tunnels. */
export function isWebSocketUpgrade(req: http.IncomingMessage): boolean {
  const v = req.headers.upgrade;
  if (v === undefined) return false;
  for (const p of v.split(',')) if (p.trim().toLowerCase() === 'websocket') return true;
  return false;
}

/**
 * Re-feeds `req` (without `Upgrade`, `Connection` and the headers `Connection` names, such as
 * `HTTP2-Settings`) and `head` (bytes read past the head: the start of a body or the next request) to
 * `server` on the same socket.
 */
export function serveAsPlainRequest(server: http.Server, req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
  const listed = connectionListed(req.headers.connection);
  let text = `${req.method ?? 'GET'} ${req.url ?? '/'} HTTP/${req.httpVersion}\r\n`;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    if (lower === 'upgrade' || lower === 'connection' || (listed !== null && listed.has(lower))) continue;
    text += `${raw[i]}: ${raw[i + 1]}\r\n`;
  }
  // node:http decoded the head as latin1: encoding it back the same way gives the bytes the client sent.
  socket.unshift(Buffer.concat([Buffer.from(`${text}\r\n`, 'latin1'), head]));
  server.emit('connection', socket);
}
