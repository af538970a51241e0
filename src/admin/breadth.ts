/**
 * @module Which runtime block or exemption is too wide to take without `force`: a range wider than
 * `admin.maxPrefix` (default /16 for IPv4, /32 for IPv6), or one that covers loopback (the host itself:
 * its probes, its sidecars, the operator on the admin port). Security: `block add 0.0.0.0/0` answers
 * every client 403 and `exempt add 0.0.0.0/0` lifts every limit; a typo should not do either silently.
 */
import { rangesOf } from '../guard/cidr-index.js';
import { compileCidrs } from '../identity/index.js';

export interface MaxPrefix {
  readonly ipv4: number;
  readonly ipv6: number;
}

const LOOPBACK_V4 = 0x7f000000;

/** Why `entry` (a valid address or CIDR) needs force, or null when it does not. */
export function breadthProblem(entry: string, max: MaxPrefix): string | null {
  const ranges = rangesOf(entry) ?? [];
  for (const r of ranges) {
    if (r.v4 ? r.bits < max.ipv4 : r.bits < max.ipv6) {
      const limit = r.v4 ? `/${max.ipv4} for IPv4` : `/${max.ipv6} for IPv6`;
      return `${entry} is wider than admin.maxPrefix (${limit})`;
    }
  }
  const v4Loopback = ranges.some((r) => r.v4 && ((r.net ^ LOOPBACK_V4) & mask(Math.min(r.bits, 8))) === 0);
  if (v4Loopback || compileCidrs([entry]).contains('::1'))
    return `${entry} covers loopback (this host, its probes and sidecars)`;
  return null;
}

function mask(bits: number): number {
  return bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
}
