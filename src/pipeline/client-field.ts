/** @module `log.client`: the access log's client field, off by default; a digest names a client without storing its IP. */
import { createHash } from 'node:crypto';
import type http from 'node:http';
import type { Peer } from '../identity/index.js';
import type { RequestPolicy } from './policy.js';

/**
 * The client field for the access log, or undefined (`off`). `digest`: the first 16 hex digits of the
 * address's SHA-256 (stable per IP, enough to group lines); `clear`: the address.
 */
export function clientField(policy: RequestPolicy, peer: Peer, req: http.IncomingMessage): string | undefined {
  const mode = policy.snapshot.config.log.client;
  if (mode === 'off') return undefined;
  const address = policy.resolveIp.behind(peer, req.headers['x-forwarded-for'], req.headers.forwarded).address;
  return mode === 'clear' ? address : createHash('sha256').update(address).digest('hex').slice(0, 16);
}
