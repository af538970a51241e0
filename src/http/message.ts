/** @module Facts of one HTTP message that every stage reads and writes the same way: does it carry a body, listening to that body, a header's first value, its request id, a Retry-After value. */
import type http from 'node:http';
import { randomUUID } from 'node:crypto';

/** Whether a request comes with a body: a non-zero Content-Length, or chunked. */
export function declaresBody(req: http.IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return length !== undefined ? length !== '0' : req.headers['transfer-encoding'] !== undefined;
}

/**
 * Listens to `req`'s body: each chunk, its end, and an error or a close before the end (an abort).
 * Returns what removes the four listeners again.
 */
export function onBody(
  req: http.IncomingMessage,
  onData: (chunk: Buffer) => void,
  onEnd: () => void,
  onAbort: () => void,
): () => void {
  const onClose = (): void => {
    if (!req.complete) onAbort();
  };
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onAbort);
  req.on('close', onClose);
  return () => {
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onAbort);
    req.off('close', onClose);
  };
}

/** A header's first value (node:http gives an array for the few headers it does not join). */
export function firstHeader(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** A request id from the client is kept when it is a plain token of sane length, else replaced. */
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * Ids this process makes: a random prefix drawn once (a UUID's first 24 characters, 70 random bits, so
 * unique across replicas, workers and restarts) and a counter in the last 12 hex digits, keeping the
 * UUID's shape at the cost of an increment instead of a random draw per request.
 */
const ID_PREFIX = randomUUID().slice(0, 24);
let idCount = 0;

/** The client's request id when it is usable, else a fresh one (which is then forwarded upstream). */
export function requestId(req: http.IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given)
    ? given
    : ID_PREFIX + (++idCount).toString(16).padStart(12, '0');
}

/** Retry-After: whole seconds, rounded up, until `at`; at least 1 so that a client never retries at once. */
export function secondsUntil(at: number, now: number): number {
  return Math.max(1, Math.ceil((at - now) / 1000));
}
