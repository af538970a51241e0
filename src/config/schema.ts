/** @module The zod schema of `limits.yaml` (SPEC §3): its sections, defaults and the TS types derived from it; the larger sections live in fields/ (admin, upstream, store, clients, server), one limit rule in fields/rule.ts, value formats in fields/formats.ts, checks across fields in cross-field.ts. */
import * as z from 'zod';
import { GATEWAY_ERRORS } from '../http/errors.js';
import { show, type PathItem } from './errors.js';
import { accountId, checked, tableList } from './fields/formats.js';
import { checkCustomMethod } from './fields/methods.js';
import { guardShapes } from './fields/guard.js';
import { networkPrefixShape, surgeShape, surgesSection, surgeTriggerShape } from './fields/surge.js';
import { accountWhenShape, overrideShape, ruleShape, whenShape } from './fields/rule.js';
import { checkIpOrCidr, checkListen } from './fields/validators.js';
import { adminShape, adminTokenShape } from './fields/admin.js';
import { namedUpstreamShape, routeShape, UPSTREAM_NAME, upstreamShape } from './fields/upstream.js';
import { storeShape } from './fields/store.js';
import { accountShape, clientsShape, introspectionBudgetShape, introspectionShape } from './fields/clients.js';
import { bodyLimitShape, serverShape } from './fields/server.js';

/** The chart check compares its rule keys with these; kept importable from here. */
export { RULE_NAME, ruleShape } from './fields/rule.js';
export { UPSTREAM_NAME } from './fields/upstream.js';

const blockShape = {
  ips: z
    .array(checked(checkIpOrCidr))
    .default([])
    .describe('Client IPs or CIDRs answered 403, never counted nor forwarded.'),
};
const rule = z.object(ruleShape).strict();
const guard = guardShapes({
  match: ruleShape.match,
  per: ruleShape.per,
  missing: ruleShape.missing,
  when: ruleShape.when,
});

const responsesShape = {
  reset: z.enum(['iso8601', 'unix', 'delta']).default('iso8601').describe('Format of X-RateLimit-Reset.'),
  standardHeaders: z.boolean().default(true).describe('Also send the IETF RateLimit and RateLimit-Policy fields.'),
  body: z
    .record(z.string(), z.unknown())
    .default({ error: GATEWAY_ERRORS.RATE_LIMITED.message })
    .describe(
      'JSON body of a 429 answer (the default is the one SPEC spells, {"error":"Too many requests"}; its code in the error catalogue is RATE_LIMITED).',
    ),
};
const exemptShape = {
  ips: z.array(checked(checkIpOrCidr)).default([]).describe('Client IPs or CIDRs never limited.'),
  accounts: z.array(accountId).default([]).describe('Account ids never limited.'),
};

const logLevel = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);
const logShape = {
  level: logLevel.default('info').describe('Log level.'),
  requests: logLevel
    .default('info')
    .describe('Level of the one JSON line logged per request (the access log); below `level` hides it.'),
  client: z
    .enum(['off', 'digest', 'clear'])
    .default('off')
    .describe('The client IP in the access log: off (default), digest (a SHA-256 prefix, stable per IP) or clear.'),
};

/** SPEC §3.3: readiness is the gateway's own; the upstream counts only when asked. */
const readinessShape = {
  upstream: z
    .boolean()
    .default(false)
    .describe(
      'true: /readyz answers 503 while the upstream refuses connections. Default false: every replica shares the upstream, so failing on it would take every endpoint away at once (blocks, bans and 429s with it).',
    ),
};
const methodsShape = {
  custom: z
    .array(checked(checkCustomMethod))
    .default([])
    .describe(
      'Methods beyond the standard ones (GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH) that match: may name, e.g. PURGE.',
    ),
};

export const topShape = {
  listen: checked(checkListen)
    .default('0.0.0.0:8080')
    .describe('HOST:PORT the gateway listens on ([::]:8080 for IPv6).'),
  admin: z.object(adminShape).strict().prefault({}).describe('The admin listener.'),
  upstream: z
    .object(upstreamShape)
    .strict()
    .prefault({})
    .describe('Where allowed requests go (those no route sends elsewhere).'),
  upstreams: z
    .record(
      z.string().regex(UPSTREAM_NAME, {
        error: (iss) => `invalid upstream name ${show(iss.input)} (use letters, digits, "_" and "-")`,
      }),
      z.object(namedUpstreamShape).strict(),
    )
    .default({})
    .describe('More upstreams, by name, for `routes`.'),
  routes: z
    .array(z.object(routeShape).strict())
    .default([])
    .describe(
      'Requests sent to a named upstream, by path; the first match wins, the rest go to `upstream`. Rules apply whatever the route.',
    ),
  store: z.object(storeShape).strict().prefault({}).describe('Where counters live.'),
  clients: z.object(clientsShape).strict().prefault({}).describe('How clients are identified.'),
  responses: z.object(responsesShape).strict().prefault({}).describe('What limited answers look like.'),
  exempt: z.object(exemptShape).strict().prefault({}).describe('Clients never limited.'),
  block: z.object(blockShape).strict().prefault({}).describe('Clients refused (403) before anything else.'),
  log: z.object(logShape).strict().prefault({}).describe('Logging.'),
  server: z
    .object(serverShape)
    .strict()
    .prefault({})
    .describe('Protection of the proxy listener against hostile clients.'),
  methods: z.object(methodsShape).strict().prefault({}).describe('HTTP methods that patterns may name.'),
  readiness: z.object(readinessShape).strict().prefault({}).describe('What /readyz checks beyond the gateway itself.'),
  limits: tableList(rule, 'The limit table; every matching rule counts a request.'),
  ...guard.top,
  surges: surgesSection,
};

export const configSchema = z.object(topShape).strict().describe('rategate limit table and settings');

export type Config = z.output<typeof configSchema>;
export type ConfigInput = z.input<typeof configSchema>;
export type LimitRule = Config['limits'][number];
export type SurgeConfig = Config['surges'][number];

/** Known keys of each object, by path with list indices dropped: for "did you mean" hints. */
const KNOWN_KEYS: Record<string, readonly string[]> = {
  '': Object.keys(topShape),
  admin: Object.keys(adminShape),
  'admin.maxPrefix': ['ipv4', 'ipv6'],
  'admin.tokens': Object.keys(adminTokenShape),
  upstream: Object.keys(upstreamShape),
  routes: Object.keys(routeShape),
  store: Object.keys(storeShape),
  clients: Object.keys(clientsShape),
  'clients.account': Object.keys(accountShape),
  'clients.account.introspection': Object.keys(introspectionShape),
  'clients.account.introspection.budget': Object.keys(introspectionBudgetShape),
  responses: Object.keys(responsesShape),
  exempt: Object.keys(exemptShape),
  block: Object.keys(blockShape),
  'limits.when': Object.keys(whenShape),
  'limits.when.account': Object.keys(accountWhenShape),
  'limits.overrides': Object.keys(overrideShape),
  log: Object.keys(logShape),
  server: Object.keys(serverShape),
  'server.bodyLimits': Object.keys(bodyLimitShape),
  methods: Object.keys(methodsShape),
  readiness: Object.keys(readinessShape),
  limits: Object.keys(ruleShape),
  ...guard.knownKeys,
  surges: Object.keys(surgeShape),
  'surges.trigger': Object.keys(surgeTriggerShape),
  'surges.trigger.networkPrefix': Object.keys(networkPrefixShape),
  'surges.limits': Object.keys(ruleShape),
  'surges.limits.when': Object.keys(whenShape),
  'surges.limits.when.account': Object.keys(accountWhenShape),
  'surges.limits.overrides': Object.keys(overrideShape),
};

export function knownKeysAt(path: readonly PathItem[]): readonly string[] {
  return KNOWN_KEYS[path.filter((p) => typeof p === 'string').join('.')] ?? [];
}
