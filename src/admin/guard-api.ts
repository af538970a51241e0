/**
 * @module The attack-day admin endpoints: runtime blocks and exemptions (`/admin/blocks`,
 * `/admin/exemptions`), bans (`/admin/bans`) and triage (`/admin/limited`). Writes go to the store, so
 * every replica applies them within a second (with the memory store: this process only); each write
 * leaves an audit line (audit.ts) and each entry records who made it.
 */
import type http from 'node:http';
import { parseDuration, formatDuration } from '../config/fields/duration.js';
import { checkIpOrCidr } from '../config/fields/validators.js';
import type { Guard } from '../guard/guard.js';
import type { EntryKind, GuardEntry } from '../guard/entry.js';
import { ipBucketKey } from '../identity/index.js';
import { KIND_NAMES, KINDS } from '../keys/kinds.js';
import type { Store } from '../limiter/types.js';
import type { RequestPolicy } from '../pipeline/policy.js';
import { whoOf, type Actor, type Audit } from './audit.js';
import { resetIpBuckets } from './reset-ip.js';
import { breadthProblem, type MaxPrefix } from './breadth.js';
import { surgesEndpoint } from './surges-api.js';
import type { FleetSketches } from '../fleet/fleet.js';
import { mergeSketches, sketchRules } from '../fleet/sketch.js';

export type AdminAnswer = { status: number; body: unknown };

/** A runtime block or exemption without `for` lasts this long: runtime entries always end by themselves. */
export const DEFAULT_FOR_MS = 60 * 60_000;
/** Longer than this belongs in limits.yaml, where it is reviewed and versioned. */
export const MAX_FOR_MS = 30 * 24 * 60 * 60_000;
const MAX_BODY = 16 * 1024;
const MAX_TOP = 1_000;
const MAX_REASON = 500;

const SECTIONS: Record<string, { kind: EntryKind; config: 'block' | 'exempt'; noun: string }> = {
  '/admin/blocks': { kind: 'block', config: 'block', noun: 'block' },
  '/admin/exemptions': { kind: 'exempt', config: 'exempt', noun: 'exemption' },
};

/** Who is writing, and where to: what the admin router adds for writes (readers such as the status page need none). */
export interface GuardWriteContext {
  /** The counter store: `?resetBuckets=true` resets a lifted IP's buckets there (absent: nothing is reset). */
  readonly store?: Store;
  readonly actor?: Actor;
  readonly audit?: Audit;
  /** The replicas sharing the store: `/admin/limited` answers for all of them (absent: this process). */
  readonly fleet?: FleetSketches | undefined;
}

/** What a guard endpoint works with. */
interface GuardApiContext {
  readonly policy: RequestPolicy;
  readonly guard: Guard;
  readonly store: Store | undefined;
  readonly actor: Actor;
  readonly audit: Audit;
  readonly fleet: FleetSketches | undefined;
}

/** `tok:<sha256>, hdr:<sha256>, …`: the kinds keyed on a digest, from the key-kind table. */
const DIGEST_TAGS = KIND_NAMES.filter((k) => KINDS[k].operatorNames === 'value' && k !== 'signature')
  .map((k) => `${KINDS[k].tag}:<sha256>`)
  .join(', ');

const NOBODY: Actor = { address: 'unknown', tokenId: null, tokenName: null };

/** The answer for a guard path, or null when `path` is not one of them. */
export async function guardEndpoint(
  req: http.IncomingMessage,
  path: string,
  params: URLSearchParams,
  policy: RequestPolicy,
  guard: Guard,
  write: GuardWriteContext = {},
): Promise<AdminAnswer | null> {
  const ctx: GuardApiContext = {
    policy,
    guard,
    store: write.store,
    actor: write.actor ?? NOBODY,
    audit: write.audit ?? (() => {}),
    fleet: write.fleet,
  };
  const method = req.method ?? 'GET';
  for (const [base, s] of Object.entries(SECTIONS)) {
    if (path === base) {
      if (method === 'GET') return { status: 200, body: await listEntries(ctx, s.kind) };
      if (method === 'POST') return addEntry(req, ctx, s.kind);
      return { status: 405, body: { error: `use GET or POST on ${base}` } };
    }
    if (path.startsWith(base + '/')) {
      if (method !== 'DELETE') return { status: 405, body: { error: `use DELETE on ${base}/<ip-or-cidr>` } };
      return removeEntry(ctx, s, path.slice(base.length + 1), params);
    }
  }
  if (path === '/admin/bans') {
    if (method !== 'GET') return { status: 405, body: { error: 'use GET on /admin/bans' } };
    await ctx.guard.sync();
    return {
      status: 200,
      body: {
        scope: ctx.guard.state.scope,
        bans: ctx.guard
          .entries()
          .filter((e) => e.kind === 'ban')
          .map(banJson),
      },
    };
  }
  if (path.startsWith('/admin/bans/')) {
    if (method !== 'DELETE') return { status: 405, body: { error: 'use DELETE on /admin/bans/<ban>/<key>' } };
    return liftBan(ctx, path.slice('/admin/bans/'.length), params);
  }
  const surge = await surgesEndpoint(method, path, params, ctx);
  if (surge !== null) return surge;
  if (path === '/admin/limited') {
    if (method !== 'GET') return { status: 405, body: { error: 'use GET on /admin/limited' } };
    return limited(params, ctx);
  }
  return null;
}

async function listEntries(ctx: GuardApiContext, kind: EntryKind): Promise<unknown> {
  const { guard } = ctx;
  await guard.sync();
  const cfg = ctx.policy.snapshot.config;
  const fromConfig = (kind === 'block' ? cfg.block.ips : cfg.exempt.ips).map((id) => ({
    source: 'config',
    [key(id)]: id,
    reason: 'limits.yaml',
    expiresAt: null,
  }));
  const all = guard.entries();
  const runtime = all
    .filter((e) => e.kind === kind)
    .map((e) => ({
      source: 'runtime',
      [key(e.id)]: e.id,
      reason: e.reason,
      createdAt: iso(e.createdAt),
      expiresAt: iso(e.expiresAt),
      who: e.who ?? null,
    }));
  const bans =
    kind === 'block' ? all.filter((e) => e.kind === 'ban').map((e) => ({ source: 'ban', ...banJson(e) })) : [];
  return { scope: guard.state.scope, entries: [...fromConfig, ...runtime, ...bans] };
}

async function addEntry(req: http.IncomingMessage, ctx: GuardApiContext, kind: EntryKind): Promise<AdminAnswer> {
  const body = await readJson(req);
  if (typeof body === 'string') return { status: 400, body: { error: body } };
  const target = body.ip ?? body.cidr;
  if (typeof target !== 'string' || (body.ip !== undefined && body.cidr !== undefined)) {
    return {
      status: 400,
      body: {
        error: 'give one of "ip" or "cidr", e.g. {"ip": "203.0.113.7", "for": "1h", "reason": "credential stuffing"}',
      },
    };
  }
  const bad = checkIpOrCidr(target);
  if (bad !== null) return { status: 400, body: { error: bad } };
  const tooWide = wideEntryRefusal(target, kind, body.force, ctx.policy.snapshot.config.admin.maxPrefix);
  if (tooWide !== null) return tooWide;
  const forMs = body.for === undefined ? DEFAULT_FOR_MS : parseDuration(body.for);
  if (forMs === undefined || forMs < 1000 || forMs > MAX_FOR_MS) {
    return {
      status: 400,
      body: {
        error: `"for" must be a duration from 1s to ${formatDuration(MAX_FOR_MS)} (e.g. "15m", "1h"), got ${JSON.stringify(body.for)}`,
      },
    };
  }
  if (body.reason !== undefined && (typeof body.reason !== 'string' || body.reason.length > MAX_REASON)) {
    return { status: 400, body: { error: `"reason" must be a string of at most ${MAX_REASON} characters` } };
  }
  const now = Date.now();
  const who = whoOf(ctx.actor);
  const entry: GuardEntry = {
    kind,
    id: target,
    reason: body.reason ?? '',
    createdAt: now,
    expiresAt: now + forMs,
    who,
  };
  await ctx.guard.state.put(entry);
  const noun = kind === 'block' ? 'block' : 'exemption';
  ctx.audit(
    `${kind}.add`,
    {
      [key(target)]: target,
      reason: entry.reason,
      expiresAt: iso(entry.expiresAt),
      ...(body.force === true ? { force: true } : {}),
    },
    `${noun} add ${target} until ${iso(entry.expiresAt)}${entry.reason ? ` (${entry.reason})` : ''}`,
  );
  return {
    status: 201,
    body: {
      source: 'runtime',
      [key(target)]: target,
      reason: entry.reason,
      createdAt: iso(now),
      expiresAt: iso(entry.expiresAt),
      who,
      scope: ctx.guard.state.scope,
    },
  };
}

/** The refusal of an entry too wide to take without `"force": true` (breadth.ts says which), or null. */
function wideEntryRefusal(target: string, kind: EntryKind, force: unknown, maxPrefix: MaxPrefix): AdminAnswer | null {
  if (force !== undefined && typeof force !== 'boolean')
    return { status: 400, body: { error: '"force" must be true or false' } };
  const problem = force === true ? null : breadthProblem(target, maxPrefix);
  if (problem === null) return null;
  const effect = kind === 'block' ? 'every client in it would be refused 403' : 'no client in it would be limited';
  return {
    status: 422,
    body: { error: `${problem}: ${effect}. If that is what you mean, send "force": true (CLI: --force)` },
  };
}

async function removeEntry(
  ctx: GuardApiContext,
  s: { kind: EntryKind; config: 'block' | 'exempt'; noun: string },
  rawId: string,
  params: URLSearchParams,
): Promise<AdminAnswer> {
  const id = decode(rawId);
  if (id === null) return { status: 400, body: { error: 'bad escape in the path' } };
  const why = liftReason(params);
  if (typeof why !== 'string') return why;
  if (ctx.policy.snapshot.config[s.config].ips.includes(id)) {
    return { status: 409, body: { error: `${id} is in limits.yaml (${s.config}.ips): remove it there` } };
  }
  const removed = await ctx.guard.state.remove(s.kind, id);
  if (removed === null) return { status: 404, body: { error: `no runtime ${s.noun} for ${id}` } };
  const reset = s.kind === 'block' && wantsReset(params) ? await resetFor(ctx, id) : undefined;
  ctx.audit(
    `${s.kind}.remove`,
    {
      [key(id)]: id,
      reason: why,
      expiresAt: iso(removed.expiresAt),
      ...(reset !== undefined ? { bucketsReset: reset.buckets } : {}),
    },
    `${s.noun} remove ${id}${why ? ` (${why})` : ''}${reset !== undefined ? `, ${reset.buckets} buckets reset` : ''}`,
  );
  return {
    status: 200,
    body: {
      removed: id,
      ...(reset !== undefined ? { bucketsReset: reset.buckets, ...(reset.note ? { note: reset.note } : {}) } : {}),
    },
  };
}

/** `<ban>/<key>`: the key as listed, or for an IP ban the bare address (`203.0.113.7`, `2001:db8::1`). */
async function liftBan(ctx: GuardApiContext, rawRest: string, params: URLSearchParams): Promise<AdminAnswer> {
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

function wantsReset(params: URLSearchParams): boolean {
  const v = params.get('resetBuckets');
  return v === 'true' || v === '1';
}

/** An optional `?reason=` for a removal or lift, for the audit line; an answer when it is too long. */
function liftReason(params: URLSearchParams): string | AdminAnswer {
  const why = params.get('reason') ?? '';
  return why.length > MAX_REASON
    ? { status: 400, body: { error: `"reason" must be at most ${MAX_REASON} characters` } }
    : why;
}

/** Resets the buckets of the client a lifted block or IP ban named; a CIDR or a non-IP key names no single client. */
async function resetFor(ctx: GuardApiContext, ipOrCidr: string | null): Promise<{ buckets: number; note?: string }> {
  const ipv6Prefix = ctx.policy.snapshot.config.clients.ipv6Prefix;
  const ipKey =
    ipOrCidr === null
      ? null
      : (ipBucketKey(ipOrCidr, ipv6Prefix) ??
        (ipOrCidr.includes(':') && ipOrCidr.endsWith(`/${ipv6Prefix}`) ? ipOrCidr : null));
  if (ipKey === null) return { buckets: 0, note: 'not a single client IP: no bucket was reset' };
  if (ctx.store === undefined) return { buckets: 0, note: 'no store to reset buckets in' };
  return { buckets: await resetIpBuckets(ctx.policy, ctx.store, ipKey, ctx.guard.limitedComposites) };
}

/**
 * Triage: the keys most limited for a rule. With a shared store, the fleet's (every live replica's
 * published sketch, merged; a replica publishes at each heartbeat, so its last seconds may be missing),
 * unless `scope=local` asks for this process's own.
 */
async function limited(params: URLSearchParams, ctx: GuardApiContext): Promise<AdminAnswer> {
  const { policy, guard } = ctx;
  const scope = params.get('scope') ?? (ctx.fleet === undefined ? 'local' : 'fleet');
  if (scope !== 'local' && scope !== 'fleet') return { status: 400, body: { error: 'scope must be local or fleet' } };
  if (scope === 'fleet' && ctx.fleet === undefined)
    return { status: 400, body: { error: 'scope=fleet needs a shared (Redis) store' } };
  // The store down: asked for the fleet, a 503 (the router's); by default, this replica's answer, saying why.
  const read =
    scope === 'fleet'
      ? await publishedNow(ctx.fleet!).catch((err: Error) => (params.has('scope') ? Promise.reject(err) : err))
      : undefined;
  const sketches = read instanceof Error ? undefined : read;
  const rule = params.get('rule');
  const names = policy.snapshot.rules.map((r) => r.name);
  if (rule === null || rule === '') {
    const recentlyLimited = sketches === undefined ? guard.top.rules() : sketchRules(sketches);
    return {
      status: 400,
      body: { error: 'missing rule: use /admin/limited?rule=NAME&top=20', rules: names, recentlyLimited },
    };
  }
  if (!names.includes(rule))
    return { status: 404, body: { error: `unknown rule ${JSON.stringify(rule)}`, rules: names } };
  const n = params.get('top') === null ? 20 : Number(params.get('top'));
  if (!Number.isInteger(n) || n < 1 || n > MAX_TOP)
    return { status: 400, body: { error: `top must be an integer from 1 to ${MAX_TOP}` } };
  if (sketches === undefined) {
    const body = {
      rule,
      scope: 'local',
      window: 'the last 5 to 10 minutes, this replica',
      top: guard.top.top(rule, n),
    };
    return { status: 200, body: read instanceof Error ? { ...body, fleet: `not read: ${read.message}` } : body };
  }
  const { top, partial } = mergeSketches(sketches, rule, n);
  const body = {
    rule,
    scope: 'fleet',
    replicas: sketches.length,
    window: 'the last 5 to 10 minutes, every replica sharing the store',
    top,
  };
  return {
    status: 200,
    body: partial ? { ...body, partial: 'some replica left rules out of its sketch to stay within 64 kB' } : body,
  };
}

/** Every replica's sketch, this one's published first so that its latest 429s count. */
async function publishedNow(fleet: FleetSketches): Promise<string[]> {
  await fleet.beat();
  return (await fleet.sketches()).map((s) => s.json);
}

function banJson(e: GuardEntry): Record<string, unknown> {
  const slash = e.id.indexOf('/');
  return {
    ban: e.id.slice(0, slash),
    key: e.id.slice(slash + 1),
    reason: e.reason,
    createdAt: iso(e.createdAt),
    expiresAt: iso(e.expiresAt),
    who: e.who ?? null,
  };
}

function key(id: string): 'ip' | 'cidr' {
  return id.includes('/') ? 'cidr' : 'ip';
}

function iso(t: number | null): string | null {
  return t === null ? null : new Date(t).toISOString();
}

function decode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

type AddBody = { ip?: unknown; cidr?: unknown; for?: unknown; reason?: unknown; force?: unknown };

/** The request's JSON object body (bounded), or an error message. */
function readJson(req: http.IncomingMessage): Promise<AddBody | string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        resolve(`body over ${MAX_BODY} bytes`);
        req.destroy();
      } else chunks.push(c);
    });
    req.on('error', () => resolve('body not read'));
    req.on('end', () => {
      try {
        const v: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        resolve(
          v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as AddBody) : 'the body must be a JSON object',
        );
      } catch {
        resolve('the body must be JSON, e.g. {"ip": "203.0.113.7", "for": "1h", "reason": "…"}');
      }
    });
  });
}
