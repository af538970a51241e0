/**
 * @module One hidden class for every accepted HTTP/1 socket in node's stream code. node:http gives a
 * socket its `timeout` property (setTimeout, for the keep-alive wait) after its first response, and
 * reading `remoteAddress` adds `_peername`: each a new class for the same socket, in an order that
 * differs between the proxy's sockets and the admin port's. With the upstream pool's sockets and
 * Redis's two, node's stream code (the `destroyed` getter, every `_readableState` load in Readable and
 * Writable) then meets five or more classes of socket and turns megamorphic for the life of the
 * process: ~8k instructions per forwarded request with the Redis store, ~3k with memory (callgrind).
 * Both properties given their values at the first request, in one order, before stream code reads the
 * socket again, leave one class: `timeout` the value it stands for when unset (0, what setTimeout(0)
 * writes: no timeout), `_peername` node's own cache of the address.
 */
import type http from 'node:http';

/** Called first thing by every request handler of the process: the proxy's, the admin port's, the built-in upstream's. */
export function settleSocketShape(req: http.IncomingMessage): void {
  // HTTP/2: req.socket is a proxy over the session's socket, made per stream; nothing to settle.
  if (req.httpVersionMajor !== 1) return;
  const socket = req.socket as { timeout?: number; readonly remoteAddress?: string } | null;
  if (socket === null || socket.timeout !== undefined) return;
  socket.timeout = 0;
  void socket.remoteAddress;
}
