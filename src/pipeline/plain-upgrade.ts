/**
 * @module Upgrades other than WebSocket (e.g. `h2c`, which `curl --http2` asks of an `http://` URL) are
 * served as ordinary HTTP/1.1 requests — a server may ignore an upgrade (RFC 9110 §7.8). node:http hands
 * every `Upgrade` request to the 'upgrade' listener and detaches its parser, so the request head is
 * written again without the upgrade and the socket is handed back to the server as a connection: the
 * request then takes the ordinary path (counted once, one access-log line, keep-alive, its body).
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { connectionListed, namesFraming } from '../proxy/hop-by-hop.js';
import { ERROR_BODIES, GATEWAY_ERRORS, respondOnSocket } from '../http/errors.js';

/** Whether an upgrade asks for WebSocket, the one protocol the gateway tunnels. */
export function isWebSocketUpgrade(req: http.IncomingMessage): boolean {
  const v = req.headers.upgrade;
  if (v === undefined) return false;
  for (const p of v.split(',')) if (p.trim().toLowerCase() === 'websocket') return true;
  return false;
}

/** node:http's own field: the response being written on a connection (null when none is); a net.Socket's idle timer. */
type ServerSocket = Duplex & { _httpMessage?: http.ServerResponse | null; setTimeout?: (ms: number) => unknown };

/**
 * Re-feeds `req` (without `Upgrade`, `Connection` and the headers `Connection` names, such as
 * `HTTP2-Settings`) and `head` (bytes read past the head: the start of a body or the next request) to
 * `server` on the same socket, once the answers to requests pipelined before it on this connection
 * are written. A `Connection` that names `Content-Length`, `Transfer-Encoding` or `Host` is answered
 * 400 instead: without the header it names, the re-fed request would end elsewhere than where the
 * client's own framing ends it (one request read as two). `onRefused`: told the status of such an answer.
 */
export function serveAsPlainRequest(
  server: http.Server,
  req: http.IncomingMessage,
  socket: Duplex,
  head: Buffer,
  onRefused?: (status: number) => void,
): void {
  const listed = connectionListed(req.headers.connection);
  afterPendingAnswers(socket as ServerSocket, () => {
    if (namesFraming(listed)) {
      respondOnSocket(
        socket,
        GATEWAY_ERRORS.CONNECTION_NAMES_FRAMING.status,
        ERROR_BODIES.CONNECTION_NAMES_FRAMING,
        [],
      );
      onRefused?.(GATEWAY_ERRORS.CONNECTION_NAMES_FRAMING.status);
      return;
    }
    refeed(server, req, socket, head, listed);
  });
}

function refeed(
  server: http.Server,
  req: http.IncomingMessage,
  socket: Duplex,
  head: Buffer,
  listed: Set<string> | null,
): void {
  let text = `${req.method ?? 'GET'} ${req.url ?? '/'} HTTP/${req.httpVersion}\r\n`;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    if (lower === 'upgrade' || lower === 'connection' || (listed !== null && listed.has(lower))) continue;
    text += `${raw[i]}: ${raw[i + 1]}\r\n`;
  }
  // The client's wish to close after this request survives the rewrite (its other tokens are hop-by-hop).
  if (wantsClose(req.headers.connection)) text += 'Connection: close\r\n';
  // node:http decoded the head as latin1: encoding it back the same way gives the bytes the client sent.
  socket.unshift(Buffer.concat([Buffer.from(`${text}\r\n`, 'latin1'), head]));
  server.emit('connection', socket);
}

function wantsClose(connection: string | undefined): boolean {
  if (connection === undefined) return false;
  for (const token of connection.split(',')) if (token.trim().toLowerCase() === 'close') return true;
  return false;
}

/**
 * Runs `then` once no answer to an earlier request of this connection is still being written. node:http
 * hands over the socket of an upgrade pipelined behind other requests while their answers are in
 * flight, and their bookkeeping stays with the old parser: a connection handed back before they are done
 * would queue the new answer where nothing ever writes it. Meanwhile the socket has none of node:http's
 * listeners, so a reset is handled here; a connection that closes meanwhile is simply gone.
 */
function afterPendingAnswers(socket: ServerSocket, then: () => void): void {
  const pending = socket._httpMessage;
  if (pending === undefined || pending === null) return then();
  socket.on('error', destroySocket);
  const retry = (): void => {
    if (socket.destroyed || !socket.writable) {
      socket.destroy();
      return;
    }
    const next = socket._httpMessage;
    if (next !== undefined && next !== null) return void next.once('close', retry);
    socket.off('error', destroySocket);
    // The old parser's keep-alive timer would otherwise fire on the new connection's first request.
    socket.setTimeout?.(0);
    then();
  };
  pending.once('close', retry);
}

function destroySocket(this: Duplex): void {
  this.destroy();
}
