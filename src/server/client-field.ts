/** @module `log.client`: the access log's client field, off by default; a digest names a client without storing its IP. */
import { createHash } from 'node:crypto';

/** `digest`: the first 16 hex digits of the address's SHA-256 (stable per IP, enough to group lines). */
export function clientField(mode: 'digest' | 'clear', address: string): string {
  return mode === 'clear' ? address : createHash('sha256').update(address).digest('hex').slice(0, 16);
}
