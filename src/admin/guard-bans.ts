/**
 * @module Lifting a ban (`DELETE /admin/bans/<ban>/<key>`): the key as listed or, for an IP ban, the
 * bare address; optionally the lifted client's buckets reset; audited.
 */
import type { GuardEntry } from '../guard/entry.js';
import { ipBucketKey } from '../identity/index.js';
import { KIND_NAMES, KINDS } from '../keys/kinds.js';
import {
  decode,
  iso,
  liftReason,
  resetFor,
  wantsReset,
  type AdminAnswer,
  type GuardApiContext,
} from './guard-answer.js';

/** `tok:<sha256>, hdr:<sha256>, …`: the kinds keyed on a digest, from the key-kind table. */
const DIGEST_TAGS = KIND_NAMES.filter((k) => KINDS[k].operatorNames === 'value' && k !== 'signature')
  .map((k) => `${KINDS[k].tag}:<sha256>`)
  .join(', ');

/** `<ban>/<key>`: the key as listed, or for an IP ban the bare address (`203.0.113.7`, `2001:db8::1`). */
export async function liftBan(ctx: GuardApiContext, rawRest: string, params: URLSearchParams): Promise<AdminAnswer> {
  const rest = decode(rawRest);
  const slash = rest?.indexOf('/') ?? -1;
  if (rest === null || slash <= 0 || slash === rest.length - 1)
    return { status: 400, body: { error: 'use DELETE /admin/bans/<ban>/<key> (as GET /admin/bans lists them)' } };
  const why = liftReason(params);
  if (typeof why !== 'string') return why;
  const ban = rest.slice(0, slash);
  const given = rest.slice(slash + 1);
  let removed: GuardEntry | null = null;
  for (const k of banKeysNamedBy(given, ctx.policy.snapshot.config.clients.ipv6Prefix)) {
    removed = await ctx.guard.state.remove('ban', `${ban}/${k}`);
    if (removed !== null) break;
  }
  if (removed === null) return { status: 404, body: { error: noBanMessage(ctx, ban, given) } };
  const banKey = removed.id.slice(ban.length + 1);
  const reset = wantsReset(params) ? await resetFor(ctx, banKey.startsWith('ip:') ? banKey.slice(3) : null) : undefined;
  ctx.audit(
    'ban.lift',
    {
      ban,
      key: banKey,
      reason: why,
      expiresAt: iso(removed.expiresAt),
      ...(reset !== undefined ? { bucketsReset: reset.buckets } : {}),
    },
    `ban lift ${ban} on ${banKey}${why ? ` (${why})` : ''}${reset !== undefined ? `, ${reset.buckets} buckets reset` : ''}`,
  );
  return {
    status: 200,
    body: {
      lifted: { ban, key: banKey },
      ...(reset !== undefined ? { bucketsReset: reset.buckets, ...(reset.note ? { note: reset.note } : {}) } : {}),
    },
  };
}

/** The ban keys a lift may mean: as given, then the IP ban key of an address (folded as the request path folds it). */
function banKeysNamedBy(given: string, ipv6Prefix: number): string[] {
  const ip = ipBucketKey(given.startsWith('ip:') ? given.slice(3) : given, ipv6Prefix);
  return ip === null || `ip:${ip}` === given ? [given] : [given, `ip:${ip}`];
}

function noBanMessage(ctx: GuardApiContext, ban: string, given: string): string {
  const names = ctx.policy.snapshot.config.bans.map((b) => b.name);
  if (!names.includes(ban) && !ctx.guard.bans.has(ban))
    return `no ban named ${JSON.stringify(ban)} (bans: ${names.join(', ') || 'none'})`;
  return `no ban ${ban} on ${given} (keys as GET /admin/bans lists them: ip:203.0.113.7 or the bare IP, acct:a:42, sig:mastodon.example, ${DIGEST_TAGS}; a composite key's parts joined by |)`;
}
