/**
 * @module `rategate explain`: what the gateway does with a described request, in table order — which
 * rules count it (with the key each uses), why each other one does not, which bans and in-flight limits
 * apply, and whose headers the client sees. It runs the gateway's own decision (pipeline/screen.ts) on
 * the request, with fresh buckets in a memory store and no upstream (the account a token belongs to is
 * assumed, or named with --account): what it prints is read from the decision `serve` makes.
 */
import type http from 'node:http';
import type { CompiledRule, Snapshot } from '../config/types.js';
import { formatDuration, parseDuration } from '../config/fields/duration.js';
import { describeAge, type AccountFacts } from '../identity/account-facts.js';
import { perLabel } from '../config/describe.js';
import { Guard } from '../guard/guard.js';
import { ERROR_BODIES } from '../http/errors.js';
import type { IntrospectResult } from '../identity/index.js';
import { MemoryGuardState } from '../guard/state.js';
import { displayKey, keyShown } from '../keys/index.js';
import { MemoryStore } from '../limiter/memory/store.js';
import { Metrics } from '../observability/metrics.js';
import { buildRequestPolicy, type RequestPolicy } from '../pipeline/policy.js';
import { headlineBucket } from '../pipeline/ratelimit-headers.js';
import { RequestView, type RequestHead } from '../pipeline/request-view.js';
import { screened as screenedBy, type Screened } from '../pipeline/screen.js';
import { Trace, unmatchedReason, type RuleNote } from '../pipeline/trace.js';

export interface ExplainRequest {
  /** `METHOD /path?query`. */
  readonly request: string;
  /** `Name: value` lines. */
  readonly headers: readonly string[];
  /** The client's address, as a trusted proxy in front of the gateway names it. */
  readonly ip: string;
  /** A URL-encoded (`a=b&c=d`) or JSON (`{…}`) body. */
  readonly body?: string | undefined;
  /** The account id the upstream would say owns the bearer token (introspection; default `token-owner`); null: it owns none. */
  readonly account?: string | null | undefined;
  /** What the upstream would tell of that account (`when.account`): its age as a duration (`3d`); without it, its age is unknown. */
  readonly accountAge?: string | undefined;
  readonly bot?: boolean | undefined;
  readonly locked?: boolean | undefined;
  /** A surge (`surges:`) taken as on: its rules count the request. */
  readonly surge?: string | undefined;
}

/** The decision and what it noted, with the explanation as text lines. */
export interface Explanation {
  readonly screened: Screened;
  readonly trace: Trace;
  readonly lines: string[];
}

/** The silent logger the explaining guard writes to. */
const QUIET = { warn: () => {}, info: () => {} };

/** The explanation as text lines; throws an Error with a usage message on a malformed request. */
export async function explain(snapshot: Snapshot, r: ExplainRequest): Promise<string[]> {
  return (await explainRequest(snapshot, r)).lines;
}

/** Runs the gateway's decision on the described request and explains it. */
export async function explainRequest(snapshot: Snapshot, r: ExplainRequest): Promise<Explanation> {
  const head = requestHead(r);
  const answer: IntrospectResult =
    r.account === null
      ? { kind: 'anonymous' }
      : { kind: 'account', id: r.account ?? 'token-owner', facts: toldFacts(r) };
  const surges = snapshot.config.surges.map((s) => s.name);
  if (r.surge !== undefined && !surges.includes(r.surge)) {
    throw new Error(
      `--surge: no surge ${JSON.stringify(r.surge)} in the table (${surges.length > 0 ? `surges: ${surges.join(', ')}` : 'it has no surges'})`,
    );
  }
  const policy = buildRequestPolicy(
    snapshot,
    () => Promise.resolve(answer),
    undefined,
    (name) => name === r.surge,
  );
  const peer = policy.resolveIp.peer(r.ip);
  if (peer.client.address === '') throw new Error(`--ip: not an IP address: "${r.ip}"`);
  // The client as a trusted proxy in front of the gateway names it: its headers (the account header) are believed.
  const v = new RequestView(head, policy, { trusted: true, client: peer.client }, peer.client);
  const trace = (v.trace = new Trace());
  const store = new MemoryStore({ sweepIntervalMs: 0 });
  const guard = new Guard(new MemoryGuardState(), QUIET);
  const releases: (() => void)[] = [];
  try {
    const ctx = { store, metrics: new Metrics({ collectDefault: false }), now: Date.now, guard };
    const body = r.body === undefined ? null : Buffer.from(r.body);
    const screened = await screenedBy(ctx, v, body ?? Buffer.alloc(0), (release) => void releases.push(release));
    if (v.account === undefined) await v.lookUpAccount(); // for the account line: the upstream is not asked
    return { screened, trace, lines: describe(snapshot, policy, screened, trace, r) };
  } finally {
    for (const release of releases) release();
    await Promise.all([store.close(), guard.close()]);
  }
}

/** The account facts the options describe: unknown age without --account-age; not a bot, not locked unless said. */
function toldFacts(r: ExplainRequest): AccountFacts {
  let createdAt: number | null = null;
  if (r.accountAge !== undefined) {
    const ms = parseDuration(r.accountAge);
    if (ms === undefined) throw new Error(`--account-age: not a duration: "${r.accountAge}" (e.g. 3d, 12h, 45d)`);
    createdAt = Date.now() - ms;
  }
  return { createdAt, bot: r.bot ?? false, locked: r.locked ?? false };
}

/** The request head `r` describes: its headers as node:http gives them, and a Content-Type for a body that has none. */
function requestHead(r: ExplainRequest): RequestHead {
  const m = /^\s*([A-Za-z]+)\s+(\S+)\s*$/.exec(r.request);
  if (m === null) throw new Error(`expected "METHOD /path?query", got "${r.request}"`);
  const headers: http.IncomingHttpHeaders = {};
  const rawHeaders: string[] = [];
  for (const line of r.headers) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Error(`expected -H "Name: value", got "${line}"`);
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    headers[name.toLowerCase()] = value;
    rawHeaders.push(name, value);
  }
  if (r.body !== undefined && r.body !== '') {
    headers['content-type'] ??= r.body.trimStart().startsWith('{')
      ? 'application/json'
      : 'application/x-www-form-urlencoded';
    headers['content-length'] = String(Buffer.byteLength(r.body));
  }
  return { method: m[1]!.toUpperCase(), url: m[2]!, headers, rawHeaders };
}

function describe(snapshot: Snapshot, policy: RequestPolicy, s: Screened, trace: Trace, r: ExplainRequest): string[] {
  const v = s.view;
  const d = s.decision;
  const original = v.req.method ?? 'GET';
  const out: string[] = [`${original} ${v.path}${v.query}  from ${v.client.address}`];
  if (v.method !== original)
    out.push(
      `  counted and routed as ${v.method} (${v.form?.has('_method') === true ? "the form's _method" : 'X-HTTP-Method-Override'}, as Rack::MethodOverride reads it)`,
    );
  if (d.kind === 'blocked')
    return [
      ...out,
      `  blocked (block.ips): answered 403 ${ERROR_BODIES.FORBIDDEN.toString('utf8')}; no rule counts it, nothing is forwarded`,
    ];
  if (!d.admit && d.kind !== 'limited')
    return [
      ...out,
      `  answered ${d.status} ${d.body?.toString('utf8') ?? ''}; no rule counts it, nothing is forwarded`,
    ];
  if (d.kind === 'exempt')
    return [
      ...out,
      `  exempt (${v.exempt(undefined) ? 'exempt.ips' : 'exempt.accounts'}): forwarded, no rule counts it`,
    ];
  out.push(`  account: ${accountLine(snapshot, v, r)}`);
  snapshot.rules.forEach((rule, i) =>
    out.push(`  ${String(i + 1).padStart(2)}. ${rule.name}: ${ruleLine(rule, trace.limits.get(rule.index), v)}`),
  );
  for (const n of trace.bans) out.push(`  ban ${n.rule.name}: ${guardLine(n.tag, n.why, banWhen(policy, n.rule))}`);
  for (const n of trace.slots)
    out.push(
      `  in-flight ${n.rule.name}: ${guardLine(n.tag, n.why, `at most ${policy.guard.concurrency[n.rule.index]!.max} at once`)}`,
    );
  return [...out, ...headerLines(s)];
}

function ruleLine(rule: CompiledRule, note: RuleNote | undefined, v: RequestView): string {
  if (note === undefined) return `no (${unmatchedReason(rule, v.method, v.path)})`;
  if (!note.counted) return `no (${note.why})`;
  const j = note.override;
  const limit = `${note.rule.limit}/${formatDuration(rule.periodMs)}${j >= 0 ? ` (overrides[${j}], own bucket)` : ''}`;
  return `yes, per ${perLabel(rule)}, ${limit}, key: ${keyShown(rule.key, v, note.tag)}${rule.shadow ? ' [shadow: counted, never rejects]' : ''}`;
}

function guardLine(tag: string | null, why: string | null, what: string): string {
  return tag === null ? `no (${why ?? ''})` : `yes, ${what}, key: ${displayKey(tag)}`;
}

function banWhen(policy: RequestPolicy, rule: CompiledRule): string {
  const on = policy.guard.bans[rule.index]!.on;
  return `counts this request${on === null ? '' : ` when answered ${[...on].join(' or ')}`}`;
}

/** The request's account as the gateway found it, and how it was found. */
function accountLine(snapshot: Snapshot, v: RequestView, r: ExplainRequest): string {
  const acct = snapshot.config.clients.account;
  const account = v.account ?? null;
  if (acct.from === 'header') {
    return account === null
      ? `none (no ${acct.header} header)`
      : `${displayKey(`acct:${account}`)} (header ${acct.header}, set by a trusted proxy)`;
  }
  if (account === null)
    return v.token === null ? 'none (no bearer token)' : 'none (the upstream would say the token has no account)';
  if (acct.from === 'token') return `the token's digest ${account.slice(2, 14)}…`;
  const facts = v.accountFacts();
  const about =
    facts === null
      ? ''
      : `, ${describeAge(facts, Date.now())}${facts.bot === true ? ', a bot' : ''}${facts.locked === true ? ', locked' : ''}`;
  return `${displayKey(`acct:${account}`)}${about}: the bearer token's owner, as the upstream would say (not asked${r.account === undefined ? '; --account names it' : ''})`;
}

/** The headers the client sees, as the decision made them (fresh buckets: the least remaining after this request). */
function headerLines(s: Screened): string[] {
  const d = s.decision;
  const head = d.outcome === undefined ? -1 : headlineBucket(d.rules, d.outcome);
  if (head < 0) return ['  headers: none (no enforced rule counts this request)'];
  const rule = d.rules[head]!;
  const lines = [
    `  headers: X-RateLimit-* of ${rule.name} (limit ${rule.limit}) while buckets are fresh; at run time the one closest to exhaustion`,
  ];
  const policy = d.headers.indexOf('RateLimit-Policy');
  if (policy >= 0) lines.push(`  RateLimit-Policy: ${d.headers[policy + 1]!}`);
  return lines;
}
