/** @module One runtime block, exemption, ban or surge as the replicated state holds it: the record the state, its view and the admin lists share. */

export type EntryKind = 'block' | 'exempt' | 'ban' | 'surge';

/** One runtime block, exemption or ban. Times are epoch ms. */
export interface GuardEntry {
  readonly kind: EntryKind;
  /** block/exempt: the IP or CIDR as given; ban: `<ban name>/<key>`; surge: `surge:<name>` (never an address, to older releases either). */
  readonly id: string;
  readonly reason: string;
  readonly createdAt: number;
  /** null: until removed (runtime blocks without `for`). */
  readonly expiresAt: number | null;
  /** Who made it: `token <id> from <address>` for an admin write, `ban <name>` for a ban (absent: an older release wrote it). */
  readonly who?: string;
}

export function isLive(e: GuardEntry, now: number): boolean {
  return e.expiresAt === null || e.expiresAt > now;
}
