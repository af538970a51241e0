/** @module Config checks that relate several fields, run on the raw input beside the schema's own. */
import { formatPath, type PathIssue } from './errors.js';
import { overrideIssues } from './fields/limit-model.js';
import { INTROSPECTION_BUDGET_RULE } from './fields/rule.js';
import { methodIssues } from './fields/methods.js';
import { parseHostPort, sameSocket } from './fields/validators.js';

function record(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** A secret given twice, in the file (or its variable) and as a file to read: which one wins would be a guess. */
function secretIssues(top: Record<string, unknown>): PathIssue[] {
  const issues: PathIssue[] = [];
  const admin = record(top.admin);
  if (admin !== undefined && admin.token != null && admin.tokenFile != null) {
    issues.push({
      path: ['admin', 'tokenFile'],
      message: 'set either admin.token (or RATEGATE_ADMIN_TOKEN) or admin.tokenFile, not both',
    });
  }
  if (admin !== undefined && Array.isArray(admin.tokens)) issues.push(...namedTokenIssues(admin.tokens as unknown[]));
  const store = record(top.store);
  if (store !== undefined && store.sentinelPassword != null && store.sentinelPasswordFile != null) {
    issues.push({
      path: ['store', 'sentinelPasswordFile'],
      message:
        'set either store.sentinelPassword (or RATEGATE_STORE_SENTINEL_PASSWORD) or store.sentinelPasswordFile, not both',
    });
  }
  return issues;
}

/** Each of admin.tokens has one secret, token or tokenFile; names are unique (the audit line tells holders apart by them). */
function namedTokenIssues(tokens: readonly unknown[]): PathIssue[] {
  const issues: PathIssue[] = [];
  const seen = new Set<unknown>();
  tokens.forEach((raw, i) => {
    const t = record(raw);
    if (t === undefined) return;
    if ((t.token == null) === (t.tokenFile == null))
      issues.push({ path: ['admin', 'tokens', i], message: 'give one of token or tokenFile' });
    if (seen.has(t.name))
      issues.push({
        path: ['admin', 'tokens', i, 'name'],
        message: `the name ${JSON.stringify(t.name)} is given twice`,
      });
    seen.add(t.name);
  });
  return issues;
}

/**
 * Checks that relate several fields. They run on the raw input, field by field defensively, so they
 * are reported together with the schema's errors instead of only once those are fixed.
 */
export function crossFieldIssues(raw: unknown): PathIssue[] {
  const issues: PathIssue[] = [];
  const top = record(raw);
  if (top === undefined) return issues;

  const listen = typeof top.listen === 'string' ? top.listen : '0.0.0.0:8080';
  const adminRaw = record(top.admin);
  const adminListen = typeof adminRaw?.listen === 'string' ? adminRaw.listen : '127.0.0.1:9464';
  const a = parseHostPort(listen);
  const b = parseHostPort(adminListen);
  if (a !== undefined && b !== undefined && sameSocket(a, b)) {
    issues.push({
      path: ['admin', 'listen'],
      message: `"${adminListen}" overlaps listen "${listen}" (the admin API must have its own port)`,
    });
  }

  issues.push(...secretIssues(top));

  issues.push(...proxyProtocolIssues(top));

  issues.push(...accountHeaderIssues(top));

  issues.push(...methodIssues(top));

  // A route must name an upstream that exists (`default` is the top-level one).
  const named = Object.keys(record(top.upstreams) ?? {});
  const routes = Array.isArray(top.routes) ? (top.routes as unknown[]) : [];
  routes.forEach((item, i) => {
    const to = record(item)?.upstream;
    if (typeof to === 'string' && to !== 'default' && !named.includes(to)) {
      const known = named.length > 0 ? `upstreams: ${named.join(', ')}` : 'no upstreams are defined';
      issues.push({ path: ['routes', i, 'upstream'], message: `unknown upstream "${to}" (${known})` });
    }
  });

  const limits = Array.isArray(top.limits) ? (top.limits as unknown[]) : [];
  const firstIndex = new Map<string, number>();
  limits.forEach((item, i) => {
    const r = record(item);
    if (r === undefined) return;
    if (r.name === INTROSPECTION_BUDGET_RULE) issues.push({ path: ['limits', i, 'name'], message: RESERVED_NAME });
    if (typeof r.name === 'string') {
      const first = firstIndex.get(r.name);
      if (first === undefined) firstIndex.set(r.name, i);
      else {
        issues.push({
          path: ['limits', i, 'name'],
          message: `duplicate rule name "${r.name}" (first used at ${formatPath(['limits', first, 'name'])})`,
        });
      }
    }
    const { limit, cost } = r;
    if (typeof limit === 'number' && typeof cost === 'number' && Number.isInteger(limit) && Number.isInteger(cost)) {
      if (limit > 0 && cost > limit) {
        issues.push({
          path: ['limits', i, 'cost'],
          message: `cost ${cost} exceeds limit ${limit} (no request could ever be admitted)`,
        });
      }
    }
    overrideIssues(r, i, issues);
  });
  for (const section of ['bans', 'concurrency'] as const) uniqueNames(top[section], section, issues);
  issues.push(...accountWhenIssues(top));
  issues.push(...surgeIssues(top, firstIndex));
  return issues;
}

/** The budget's 429s and bucket keys carry its name: a rule of the same name would share both. */
const RESERVED_NAME = `rule name "${INTROSPECTION_BUDGET_RULE}" is the introspection budget's (clients.account.introspection.budget): choose another`;

/**
 * A surge's trigger names a rule of `limits:`; surge names are unique; a surge's rules share the
 * namespace of `limits:` (metric labels, bucket keys, the policy header), so their names are unique across both.
 */
function surgeIssues(top: Record<string, unknown>, limitNames: ReadonlyMap<string, number>): PathIssue[] {
  if (!Array.isArray(top.surges)) return [];
  const issues: PathIssue[] = [];
  const surgeNames = new Map<string, number>();
  const ruleNames = new Map<string, string>([...limitNames].map(([n, i]) => [n, formatPath(['limits', i, 'name'])]));
  (top.surges as unknown[]).forEach((item, i) => {
    const s = record(item);
    if (s === undefined) return;
    if (typeof s.name === 'string') {
      const first = surgeNames.get(s.name);
      if (first === undefined) surgeNames.set(s.name, i);
      else
        issues.push({
          path: ['surges', i, 'name'],
          message: `duplicate surge name "${s.name}" (first used at ${formatPath(['surges', first, 'name'])})`,
        });
    }
    const rule = record(s.trigger)?.rule;
    if (typeof rule === 'string' && !limitNames.has(rule)) {
      const known = limitNames.size > 0 ? `limits: ${[...limitNames.keys()].join(', ')}` : 'limits: is empty';
      issues.push({
        path: ['surges', i, 'trigger', 'rule'],
        message: `unknown rule "${rule}" (a rule of limits:; ${known})`,
      });
    }
    const limits = Array.isArray(s.limits) ? (s.limits as unknown[]) : [];
    limits.forEach((r, j) => {
      const name = record(r)?.name;
      if (typeof name !== 'string') return;
      if (name === INTROSPECTION_BUDGET_RULE)
        issues.push({ path: ['surges', i, 'limits', j, 'name'], message: RESERVED_NAME });
      const first = ruleNames.get(name);
      if (first === undefined) ruleNames.set(name, formatPath(['surges', i, 'limits', j, 'name']));
      else
        issues.push({
          path: ['surges', i, 'limits', j, 'name'],
          message: `duplicate rule name "${name}" (first used at ${first})`,
        });
    });
  });
  return issues;
}

function needsIntrospect(from: unknown): string {
  return `needs clients.account.from: introspect (the upstream tells an account's age, bot and locked; from is "${String(from)}")`;
}

/**
 * `when.account` reads what the upstream tells of an account: only introspection asks it. Under
 * `from: token` or `header` every account would be of unknown age, so counted as new: refused instead.
 */
function accountWhenIssues(top: Record<string, unknown>): PathIssue[] {
  const from = record(record(top.clients)?.account)?.from ?? 'introspect';
  if (from === 'introspect') return [];
  const issues: PathIssue[] = [];
  for (const section of ['limits', 'bans', 'concurrency'] as const) {
    const list = Array.isArray(top[section]) ? (top[section] as unknown[]) : [];
    list.forEach((item, i) => {
      if (record(record(item)?.when)?.account === undefined) return;
      issues.push({ path: [section, i, 'when', 'account'], message: needsIntrospect(from) });
    });
  }
  const surges = Array.isArray(top.surges) ? (top.surges as unknown[]) : [];
  surges.forEach((surge, i) => {
    const limits = record(surge)?.limits;
    if (!Array.isArray(limits)) return;
    limits.forEach((item: unknown, j) => {
      if (record(record(item)?.when)?.account !== undefined)
        issues.push({ path: ['surges', i, 'limits', j, 'when', 'account'], message: needsIntrospect(from) });
    });
  });
  return issues;
}

/** `clients.account.header` is required with `from: header` and meaningless otherwise. */
function accountHeaderIssues(top: Record<string, unknown>): PathIssue[] {
  const account = record(record(top.clients)?.account);
  if (account === undefined) return [];
  const from = account.from ?? 'introspect';
  if (from === 'header' && account.header === undefined) {
    return [{ path: ['clients', 'account', 'header'], message: 'required when from is "header"' }];
  } else if (typeof from === 'string' && from !== 'header' && account.header !== undefined) {
    return [{ path: ['clients', 'account', 'header'], message: `only used with from: header (from is "${from}")` }];
  }
  return [];
}

/** Ban and in-flight rule names key store entries and metric labels: each unique in its section. */
function uniqueNames(list: unknown, section: 'bans' | 'concurrency', issues: PathIssue[]): void {
  if (!Array.isArray(list)) return;
  const first = new Map<string, number>();
  list.forEach((item, i) => {
    const name = record(item)?.name;
    if (typeof name !== 'string') return;
    const j = first.get(name);
    if (j === undefined) first.set(name, i);
    else
      issues.push({
        path: [section, i, 'name'],
        message: `duplicate name "${name}" (first used at ${formatPath([section, j, 'name'])})`,
      });
  });
}

/**
 * The PROXY protocol is read on the plain listener only: on the TLS listener the header comes before the
 * handshake, and TLS reads the socket below what the header's reader could hand back (a ClientHello sent
 * in the header's segment would be lost). Refused together rather than half working.
 */
function proxyProtocolIssues(top: Record<string, unknown>): PathIssue[] {
  const server = record(top.server);
  const from = record(server?.proxyProtocol)?.from;
  const tls = server?.tls;
  if (!Array.isArray(from) || from.length === 0 || tls === undefined || tls === null) return [];
  return [
    {
      path: ['server', 'proxyProtocol', 'from'],
      message:
        'is not supported with server.tls yet: terminate TLS at the balancer and send the PROXY header to the plain listener, or let the balancer pass TLS through without the PROXY protocol',
    },
  ];
}
