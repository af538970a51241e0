/**
 * @module `rategate explain`: which rules a described request would be counted by, in table order,
 * with the key each would use, why each other rule does not apply, and whose headers the client sees.
 * It runs the request path's own pieces (matcher, when, key digests, overrides) without a store or an
 * upstream, so what it says is what the gateway does.
 */
import type http from 'node:http';
import type { CompiledRule, Snapshot } from '../config/types.js';
import { formatDuration } from '../config/fields/duration.js';
import { perLabel } from '../config/describe.js';
import { accountKeyFromHeader, compileCidrs, ipBucketKey, tokenDigest } from '../identity/index.js';
import { doorkeeperHeaderToken, normalizedKey, RequestFacts, ruleValueDigest, whenFails } from '../rails/index.js';
import { fromJson, lookUp, ParamError, parseUrlEncoded, type ParamHash } from '../rack-params.js';
import { compileMatcher, normalizePath } from '../routing/index.js';
import { buildRequestPolicy, overrideFor } from '../pipeline/policy.js';

export interface ExplainRequest {
  /** `METHOD /path?query`. */
  readonly request: string;
  /** `Name: value` lines. */
  readonly headers: readonly string[];
  /** The client's address (as the gateway would find it after trusted proxies). */
  readonly ip: string;
  /** A URL-encoded (`a=b&c=d`) or JSON (`{…}`) body. */
  readonly body?: string | undefined;
}

/** The explanation as text lines; throws an Error with a usage message on a malformed request. */
export function explain(snapshot: Snapshot, r: ExplainRequest): string[] {
  const m = /^\s*([A-Za-z]+)\s+(\S+)\s*$/.exec(r.request);
  if (m === null) throw new Error(`expected "METHOD /path?query", got "${r.request}"`);
  const method = m[1]!.toUpperCase();
  const target = normalizePath(m[2]!);
  if (!target.ok) throw new Error(`bad path "${m[2]}": ${target.reason}`);
  const headers: http.IncomingHttpHeaders = {};
  for (const line of r.headers) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Error(`expected -H "Name: value", got "${line}"`);
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const ipKey = ipBucketKey(r.ip, snapshot.config.clients.ipv6Prefix);
  if (ipKey === null) throw new Error(`--ip: not an IP address: "${r.ip}"`);
  const cfg = snapshot.config;
  const out: string[] = [`${method} ${target.path}${target.query}  from ${r.ip}`];
  if (cfg.block.ips.length > 0 && compileCidrs(cfg.block.ips).contains(r.ip)) {
    out.push('  blocked (block.ips): answered 403 {"error":"Forbidden"}; no rule counts it, nothing is forwarded');
    return out;
  }
  if (cfg.exempt.ips.length > 0 && compileCidrs(cfg.exempt.ips).contains(r.ip)) {
    out.push('  exempt (exempt.ips): forwarded, no rule counts it');
    return out;
  }
  const policy = buildRequestPolicy(snapshot, async () => ({ kind: 'error' }));
  const token = doorkeeperHeaderToken(typeof headers.authorization === 'string' ? headers.authorization : undefined);
  const { accountKey, account } = accountOf(snapshot, headers, token);
  out.push(`  account: ${account}`);
  const fromBody = bodyValues(snapshot, r.body);
  const facts = new RequestFacts(headers, target.query, () => token, fromBody, fromBody);
  if (!facts.queryReadable()) out.push('  the query string has conflicting parameters: a rule that reads it makes the gateway answer 400');
  const applied: CompiledRule[] = [];
  snapshot.rules.forEach((rule, i) => {
    const head = `  ${String(i + 1).padStart(2)}. ${rule.name}`;
    const why = notMatching(rule, method, target.path);
    if (why !== null) return out.push(`${head}: no (${why})`);
    out.push(`${head}: ${applies(rule, facts, accountKey, account, policy, r.ip, ipKey, applied)}`);
  });
  const shown = applied.filter((rule) => !rule.shadow);
  if (shown.length === 0) {
    out.push('  headers: none (no enforced rule counts this request)');
    return out;
  }
  // With fresh buckets the least remaining after this request; at run time, the bucket closest to exhaustion.
  let head = shown[0]!;
  for (const rule of shown) if (rule.limit - rule.cost < head.limit - head.cost) head = rule;
  out.push(`  headers: X-RateLimit-* of ${head.name} (limit ${head.limit}) while buckets are fresh; at run time the one closest to exhaustion`);
  out.push(`  RateLimit-Policy: ${shown.map((rule) => rule.policyItem).join(', ')}`);
  return out;
}

function notMatching(rule: CompiledRule, method: string, path: string): string | null {
  if (compileMatcher([rule]).match(method, path).length > 0) return null;
  const anyMethod = { patterns: rule.patterns.map((p) => p.trim().replace(/^\S+\s+/, '')) };
  return compileMatcher([anyMethod]).match(method, path).length > 0
    ? `method: ${method} is not ${rule.patterns.map((p) => p.trim().split(/\s+/)[0]).join(' / ')}`
    : `path: not ${rule.patterns.join(', ')}`;
}

function applies(
  rule: CompiledRule,
  facts: RequestFacts,
  accountKey: string | null,
  account: string,
  policy: ReturnType<typeof buildRequestPolicy>,
  ip: string,
  ipKey: string,
  applied: CompiledRule[],
): string {
  const when = whenFails(rule, facts, accountKey !== null);
  if (when !== null) return `no (${when})`;
  const digest = ruleValueDigest(rule, facts);
  let key: string;
  switch (rule.per) {
    case 'ip':
      key = `ip ${ipKey}`;
      break;
    case 'account':
      if (accountKey === null) return 'no (no key: the request has no account)';
      key = `account ${account}`;
      break;
    case 'global':
      key = 'one bucket for everyone';
      break;
    default: {
      const what =
        rule.per === 'token'
          ? 'token'
          : rule.per === 'header'
            ? `header ${rule.keyName}`
            : rule.per === 'cookie'
              ? `cookie ${rule.keyName}`
              : `parameter ${rule.keyName}`;
      if (digest === null) return `no (no key: the request has no ${what})`;
      key = `${what}${shownKey(rule, facts)}, digest ${digest.slice(0, 12)}…`;
    }
  }
  let effective = rule;
  const j = rule.overrides.length ? overrideFor(policy.overrides[rule.index]!, ip, accountKey, digest) : -1;
  if (j >= 0) effective = rule.overrides[j]!.rule;
  applied.push(effective);
  const limit = `${effective.limit}/${formatDuration(rule.periodMs)}${j >= 0 ? ` (overrides[${j}], own bucket)` : ''}`;
  return `yes, per ${perLabel(rule)}, ${limit}, key: ${key}${rule.shadow ? ' [shadow: counted, never rejects]' : ''}`;
}

/**
 * The normalized value a header or parameter rule keys on, as digested (`Victim@Example.COM ` shows
 * as "victim@example.com"): the operator typed it, so showing it leaks nothing. A token is never shown.
 */
function shownKey(rule: CompiledRule, facts: RequestFacts): string {
  const v = rule.per === 'header' ? facts.header(rule.keyName) : rule.per === 'param' ? facts.param(rule.keyName, rule.paramPath!) : undefined;
  if (v === undefined || (rule.per !== 'header' && rule.per !== 'param')) return '';
  return ` ${JSON.stringify(normalizedKey(rule.per, v))}`;
}

/** The request's account as the gateway would find it, and how to say it. */
function accountOf(snapshot: Snapshot, headers: http.IncomingHttpHeaders, token: string | null): { accountKey: string | null; account: string } {
  const acct = snapshot.config.clients.account;
  if (acct.from === 'header') {
    const v = headers[(acct.header ?? '').toLowerCase()];
    if (typeof v === 'string' && v !== '') return { accountKey: accountKeyFromHeader(v), account: `${v} (header ${acct.header}, when set by a trusted proxy)` };
    return { accountKey: null, account: `none (no ${acct.header} header)` };
  }
  if (token === null) return { accountKey: null, account: 'none (no bearer token)' };
  if (acct.from === 'token') return { accountKey: `t:${tokenDigest(token)}`, account: `the token's digest ${tokenDigest(token).slice(0, 12)}…` };
  return { accountKey: 'a:?', account: "the bearer token's owner (assuming the upstream accepts the token)" };
}

/** The `param:` values of a URL-encoded or JSON body, by name. */
function bodyValues(snapshot: Snapshot, body: string | undefined): Map<string, string> {
  const values = new Map<string, string>();
  if (body === undefined || body === '') return values;
  let tree: ParamHash;
  try {
    tree = body.trimStart().startsWith('{') ? fromJson(JSON.parse(body)) : parseUrlEncoded(body);
  } catch (err) {
    if (err instanceof ParamError || err instanceof SyntaxError) throw new Error(`--body: ${err.message}`);
    throw err;
  }
  const named: Array<[string, readonly string[]]> = [];
  for (const rule of snapshot.rules) {
    if (rule.paramPath !== null) named.push([rule.keyName, rule.paramPath]);
    rule.whenQuery?.forEach((q, i) => named.push([q, rule.whenQueryPaths![i]!]));
  }
  for (const [name, path] of named) {
    const v = lookUp(tree, path);
    if (v !== undefined && v !== null && typeof v !== 'object') values.set(name, String(v));
  }
  return values;
}
