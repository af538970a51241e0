/**
 * @module The composite buckets holding a client IP (`inbox:{sig:mastodon.example|ip:203.0.113.7}`) that
 * this replica refused a request in, by IP: a lifted block or ban resets them too (admin/reset-ip.ts).
 * The IP alone does not name such a bucket (its other parts are not known from it), so the ones that
 * refused the client are remembered when they do. Bounded: a flood of refusals evicts, never grows.
 */
import { BoundedMap } from '../identity/bounded-map.js';
import { PART_SEPARATOR } from '../keys/index.js';

const MAX_IPS = 10_000;
const MAX_PER_IP = 32;

export class LimitedComposites {
  private readonly byIp = new BoundedMap<string, Set<string>>(MAX_IPS);

  /** Notes a refusing bucket's key when it is composite and holds an IP part. */
  note(bucketKey: string): void {
    const open = bucketKey.indexOf('{');
    // Most refusing keys have one part: told by a search, before any string is cut.
    if (open < 0 || bucketKey.indexOf(PART_SEPARATOR, open) < 0 || !bucketKey.endsWith('}')) return;
    const parts = bucketKey.slice(open + 1, -1).split(PART_SEPARATOR);
    if (parts.length < 2) return;
    const ip = parts.find((p) => p.startsWith('ip:'));
    if (ip === undefined) return;
    let keys = this.byIp.get(ip);
    if (keys === undefined) this.byIp.set(ip, (keys = new Set()));
    if (keys.size < MAX_PER_IP) keys.add(bucketKey);
  }

  /** The keys noted for `ip:<key>`, forgotten as they are taken. */
  take(ipTag: string): string[] {
    const keys = this.byIp.get(ipTag);
    if (keys === undefined) return [];
    this.byIp.delete(ipTag);
    return [...keys];
  }
}
