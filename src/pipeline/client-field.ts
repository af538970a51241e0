/** @module `log.client`: the access log's client field, off by default; a digest names a client without storing its IP. */
import { createHash } from 'node:crypto';
import type { RequestView } from './request-view.js';

/**
 * The client field for the access log, or undefined (`off`). `digest`: the first 16 hex digits of the
 * address's SHA-256 (stable per IP, enough to group lines); `clear`: the address.
 */
export function clientField(v: RequestView): string | undefined {
  const mode = v.policy.snapshot.config.log.client;
  if (mode === 'off') return undefined;
  const address = v.client.address;
  return mode === 'clear' ? address : createHash('sha256').update(address).digest('hex').slice(0, 16);
}
