/**
 * @module Triage (`GET /admin/limited`): the keys most limited for a rule, this replica's or, with a
 * shared store, the fleet's (every replica's published sketch, merged).
 */
import type { FleetSketches } from '../fleet/fleet.js';
import { mergeSketches, sketchRules } from '../fleet/sketch.js';
import type { AdminAnswer, GuardApiContext } from './guard-answer.js';

const MAX_TOP = 1_000;

/**
 * Triage: the keys most limited for a rule. With a shared store, the fleet's (every live replica's
 * published sketch, merged; a replica publishes at each heartbeat, so its last seconds may be missing),
 * unless `scope=local` asks for this process's own.
 */
export async function limited(params: URLSearchParams, ctx: GuardApiContext): Promise<AdminAnswer> {
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
