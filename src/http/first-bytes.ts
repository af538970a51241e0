/**
 * @module A connection's first bytes, read before anyone else reads the connection: the PROXY-protocol
 * header (proxy-protocol.ts) and the HTTP/2 preface (h2-handoff.ts) are told this way, then the
 * connection is handed to its parser with what was read put back. One reading for both: the bytes held
 * so far, a deadline for them, and every listener gone once the reader has decided.
 */
import type net from 'node:net';

/**
 * Reads `socket` until `onBytes` decides: it is given everything read so far and `stop`, which it calls
 * once it has what it needs (the listeners and the deadline are dropped; the socket is left flowing, to
 * be paused by whoever hands it on). No decision within `timeoutMs`: stopped, then `onTimeout`. A socket
 * error destroys it; a close stops the reading.
 */
export function readFirstBytes(
  socket: net.Socket,
  timeoutMs: number,
  onTimeout: () => void,
  onBytes: (held: Buffer, stop: () => void) => void,
): void {
  let held: Buffer = Buffer.alloc(0);
  const timer = setTimeout(() => {
    stop();
    onTimeout();
  }, timeoutMs);
  const stop = (): void => {
    clearTimeout(timer);
    socket.off('data', onData);
    socket.off('error', onError);
    socket.off('close', stop);
  };
  const onData = (chunk: Buffer): void => {
    held = held.length === 0 ? chunk : Buffer.concat([held, chunk]);
    onBytes(held, stop);
  };
  const onError = (): void => {
    stop();
    socket.destroy();
  };
  socket.on('data', onData);
  socket.once('error', onError);
  socket.once('close', stop);
}
