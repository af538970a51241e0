/**
 * @module Runtime blocks and exemptions (`/admin/blocks`, `/admin/exemptions`): listed with the config's
 * and the bans, added from a bounded JSON body (a time limit always; a range too wide only with
 * `"force": true`), removed by their IP or CIDR, each write audited.
 */
import type http from 'node:http';
import { parseDuration, formatDuration } from '../config/fields/duration.js';
import { checkIpOrCidr } from '../config/fields/validators.js';
import type { EntryKind, GuardEntry } from '../guard/entry.js';
import { whoOf } from './audit.js';
import { breadthProblem, type MaxPrefix } from './breadth.js';
import {
  banJson,
  decode,
  iso,
  key,
  liftReason,
  MAX_REASON,
  resetFor,
  wantsReset,
  type AdminAnswer,
  type GuardApiContext,
} from './guard-answer.js';

/** A runtime block or exemption without `for` lasts this long: runtime entries always end by themselves. */
export const DEFAULT_FOR_MS = 60 * 60_000;

/** Longer than this belongs in limits.yaml, where it is reviewed and versioned. */
export const MAX_FOR_MS = 30 * 24 * 60 * 60_000;

const MAX_BODY = 16 * 1024;

export async function listEntries(ctx: GuardApiContext, kind: EntryKind): Promise<unknown> {
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

export async function addEntry(req: http.IncomingMessage, ctx: GuardApiContext, kind: EntryKind): Promise<AdminAnswer> {
  const body = await readJson(req);
  if (typeof body === 'string') return { status: 400, body: { error: body } };
  const request = addRequest(body, kind, ctx);
  if ('status' in request) return request;
  const { target, forMs, reason } = request;
  const now = Date.now();
  const who = whoOf(ctx.actor);
  const entry: GuardEntry = {
    kind,
    id: target,
    reason,
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

/** What an add asks for (the target and how long), or the answer refusing it. */
function addRequest(
  body: AddBody,
  kind: EntryKind,
  ctx: GuardApiContext,
): { target: string; forMs: number; reason: string } | AdminAnswer {
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
  return { target, forMs, reason: body.reason ?? '' };
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

export async function removeEntry(
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
