/** @module The zod schema of `limits.yaml` (SPEC §3): its sections, defaults and the TS types derived from it; one limit rule lives in fields/rule.ts, value formats in fields/formats.ts, checks across fields in cross-field.ts. */
import * as z from 'zod';
import { GATEWAY_ERRORS } from '../http/errors.js';
import { show, type PathItem } from './errors.js';
import { accountId, checked, duration, positiveInt, size, tableList } from './fields/formats.js';
import { checkCustomMethod } from './fields/methods.js';
import { guardShapes } from './fields/guard.js';
import { networkPrefixShape, surgeShape, surgesSection, surgeTriggerShape } from './fields/surge.js';
import { accountWhenShape, onError, overrideShape, patterns, ruleShape, whenShape } from './fields/rule.js';
import {
  checkAdminHost,
  checkIpOrCidr,
  checkListen,
  checkNamedUpstreamUrl,
  checkStoreUrl,
  checkProxyProtocolPeer,
  checkTrustedProxy,
  checkUpstreamUrl,
  HEADER_NAME,
} from './fields/validators.js';

/** The chart check compares its rule keys with these; kept importable from here. */
export { RULE_NAME, ruleShape } from './fields/rule.js';

/** `{` `}` would change Redis Cluster hash slots, spaces and quotes break key readability. */
const PREFIX = /^[A-Za-z0-9_.:-]+$/;

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

/** One named admin token: who holds it, its secret, what it may do. */
const adminTokenShape = {
  name: z
    .string()
    .regex(/^[A-Za-z0-9_.@-]{1,64}$/, { error: 'a token name is 1 to 64 letters, digits, "_", ".", "@" or "-"' })
    .describe('Who holds it: named in audit lines and in the entries it makes (`who`).'),
  token: z.string().min(1).optional().describe('The token itself (prefer tokenFile: a file can be a mounted Secret).'),
  tokenFile: z
    .string()
    .min(1)
    .optional()
    .describe('Path of a file holding the token, trimmed; read at start and on every reload.'),
  scopes: z
    .array(z.enum(['read', 'write']))
    .min(1)
    .describe(
      'read: the status page, /status.json and every GET; write: also every write (blocks, exemptions, bans, buckets, surges).',
    ),
};
const adminShape = {
  listen: checked(checkListen)
    .default('127.0.0.1:9464')
    .describe('HOST:PORT of the admin listener (metrics, health, buckets).'),
  token: z
    .string()
    .min(1)
    .nullable()
    .default(null)
    .describe(
      'Bearer token required by the admin API (also RATEGATE_ADMIN_TOKEN); null: none, and then /admin/buckets is refused unless the listener is loopback-only.',
    ),
  tokenFile: z
    .string()
    .min(1)
    .nullable()
    .default(null)
    .describe(
      'Path of a file holding the admin token (e.g. a mounted Secret), trimmed; read at start and on every reload.',
    ),
  tokens: z
    .array(z.object(adminTokenShape).strict())
    .max(32)
    .default([])
    .describe(
      'Named admin tokens, each with its scopes; audit lines and entries name the holder. admin.token (or RATEGATE_ADMIN_TOKEN, or admin.tokenFile) stays as one more, unnamed, with both scopes.',
    ),
  allowedHosts: z
    .array(checked(checkAdminHost))
    .max(64)
    .default([])
    .describe(
      "Host names the admin API and status page answer to besides the listener's own addresses (every interface address for 0.0.0.0 or ::) and localhost, e.g. a Service name; any other Host is refused 421 (DNS rebinding). The port is not compared.",
    ),
  maxPrefix: z
    .object({
      ipv4: z.int().min(0).max(32).default(16).describe('The widest IPv4 prefix taken without force.'),
      ipv6: z.int().min(0).max(128).default(32).describe('The widest IPv6 prefix taken without force.'),
    })
    .strict()
    .prefault({})
    .describe(
      'A runtime block or exemption wider than this, or covering loopback, is refused 422 unless the request says "force": true (CLI: --force).',
    ),
};
/** The Host header the upstream sees: its own (default), or the client's (signed deliveries sign it: docs/federation.md). */
const upstreamHost = z
  .enum(['upstream', 'client'])
  .optional()
  .describe(
    "upstream (default): the upstream's own Host, the client's in X-Forwarded-Host; client: the client's Host unchanged, as nginx's `proxy_set_header Host $host` (Mastodon verifies HTTP signatures over it).",
  );
const upstreamShape = {
  url: checked(checkUpstreamUrl).default('builtin').describe('builtin, or the http(s) URL of the upstream API.'),
  timeout: duration(1).prefault('30s').describe('Upper bound for an upstream response to start.'),
  connectTimeout: duration(1).prefault('5s').describe('Upper bound for connecting to the upstream.'),
  host: upstreamHost,
  healthPath: z
    .string()
    .startsWith('/', { error: (iss) => `must be a path starting with "/", got ${show(iss.input)}` })
    .regex(/^[\x21-\x7e]+$/, {
      error: (iss) => `must be printable ASCII without spaces (percent-encode the rest), got ${show(iss.input)}`,
    })
    .default('/')
    .describe(
      'The path the upstream probe asks with HEAD (rategate_upstream_up, readiness.upstream, the status page): any answer within 5 s (or upstream.timeout if shorter) is up; none, or a refused connection, is down. Mastodon: /health.',
    ),
};
/** SPEC §3.2: named upstreams and the routes to them; applied at restart (each has its own connection pool). */
export const UPSTREAM_NAME = /^[A-Za-z0-9_-]+$/;
const namedUpstreamShape = {
  url: checked(checkNamedUpstreamUrl).describe('The http(s) URL of this upstream (scheme, host and port only).'),
  timeout: duration(0)
    .prefault('30s')
    .describe(
      'Upper bound for a response to start, and between its chunks; 0: none (long-lived streams such as Mastodon’s streaming API).',
    ),
  connectTimeout: duration(1).prefault('5s').describe('Upper bound for connecting to this upstream.'),
  host: upstreamHost,
};
const routeShape = {
  match: patterns.describe('Pattern(s) as in limits[].match; the first route that matches wins.'),
  upstream: z.string().min(1).describe('The name of an entry of `upstreams` (or `default`: the top-level `upstream`).'),
};
const storeShape = {
  url: checked(checkStoreUrl)
    .default('memory')
    .describe(
      'memory, redis[s]://[USER:PASSWORD@]HOST[:PORT][/DB], redis+unix:///PATH/TO/redis.sock, redis[s]-cluster://[USER:PASSWORD@]HOST:PORT,HOST:PORT, or redis[s]-sentinel://[USER:PASSWORD@]HOST[:PORT],HOST[:PORT]/MASTERNAME[/DB].',
    ),
  prefix: z
    .string()
    .regex(PREFIX, { error: (iss) => `invalid prefix ${show(iss.input)} (use letters, digits, "_", ".", ":" and "-")` })
    .default('rategate')
    .describe('Prefix of every store key.'),
  // 250ms, from store-call latencies measured under load with three gateways on a busy host (docs/stores.md,
  // "Choosing store.timeout"): 50ms sent a healthy Redis's decisions to the fallback by the thousand.
  timeout: duration(1)
    .prefault('250ms')
    .describe('A store call slower than this counts as a store error (and is decided by onError).'),
  maxKeys: positiveInt()
    .optional()
    .describe(
      "Buckets the memory store (or the Redis store's local fallback) holds at most. Default: what fits in 90 % of the memory the process may use (RATEGATE_MEMORY_LIMIT, else the cgroup limit, else V8's heap limit) after a 144 MiB baseline, at 420 B a bucket (a 256Mi pod: ~215000); the bound in force is rategate_store_max_keys. When full, a request needing a new bucket is refused 429 (keys the client chooses get 90 % of the room); tracked buckets are never dropped.",
    ),
  onError: onError
    .default('local')
    .describe('On store errors: local (count in-process), allow (fail open) or deny (503).'),
  failReadiness: z
    .boolean()
    .default(false)
    .describe('true: /readyz answers 503 while the store does not answer. Default false: readiness means "can serve".'),
  lease: z
    .boolean()
    .default(true)
    .describe(
      'Redis stores: take leases of several tokens per store call for busy keys and admit from them locally, never over the limit (docs/leases.md). false: every request asks the store.',
    ),
  gateways: z
    .number()
    .int()
    .min(1)
    .max(1000)
    .default(2)
    .describe(
      'Gateway processes sharing the store until the store has answered once: after, the live count is learned from their heartbeats (rategate_gateways). While a master fails, each counts a bucket locally from its share of what the store last had left.',
    ),
  sentinelPassword: z
    .string()
    .min(1)
    .nullable()
    .default(null)
    .describe(
      "The sentinels' own password (redis-sentinel:// URLs), when they require one; the URL's credentials are the master's. Better from RATEGATE_STORE_SENTINEL_PASSWORD or sentinelPasswordFile than in this file.",
    ),
  sentinelPasswordFile: z
    .string()
    .min(1)
    .nullable()
    .default(null)
    .describe("Path of a file holding the sentinels' password (e.g. a mounted Secret), trimmed; read at start."),
};
// Security (issue 37): a client sending a fresh junk token per request made the gateway ask the upstream
// once per request. The budget bounds the introspections one client can cause; invalid answers are
// remembered so a repeated junk token costs nothing.
const introspectionBudgetShape = {
  limit: positiveInt()
    .default(20)
    .describe(
      'Unknown tokens one client (an IP, an IPv6 network of clients.ipv6Prefix) may have introspected per window.',
    ),
  window: duration(1).prefault('5m').describe('The budget’s window (fixed, epoch-aligned).'),
};
const introspectionShape = {
  budget: z
    .object(introspectionBudgetShape)
    .strict()
    .nullable()
    .prefault({})
    .describe(
      'Introspections one client may cause: past it, a request with an unknown token is answered 429 (rule introspection-budget) without an upstream call. Counted in the store, so shared by every replica on Redis. null: no budget (not advised).',
    ),
  invalidTtl: duration(0)
    .prefault('60s')
    .describe(
      'How long a token the upstream refused (401, 422, other 4xx but 403) is remembered as invalid: it then costs no introspection and no budget. At most cacheTtl.',
    ),
};
const accountShape = {
  from: z
    .enum(['introspect', 'token', 'header'])
    .default('introspect')
    .describe('introspect: ask the upstream; token: the bearer token digest; header: a trusted header.'),
  path: z
    .string()
    .startsWith('/', { error: (iss) => `must be a path starting with "/", got ${show(iss.input)}` })
    // Printable ASCII only (percent-encode the rest): undici refuses other paths, and a refused request
    // must never reach introspection's pool (a refusal leaks a connection slot).
    .regex(/^[\x21-\x7e]+$/, {
      error: (iss) => `must be printable ASCII without spaces (percent-encode the rest), got ${show(iss.input)}`,
    })
    .default('/api/v1/accounts/verify_credentials')
    .describe('Upstream path answering the token’s account (from: introspect).'),
  cacheTtl: duration(0).prefault('5m').describe('How long an introspected token→account answer is cached.'),
  connections: z
    .number()
    .int()
    .min(1)
    .max(1024)
    .default(32)
    .describe(
      'Connections of introspection’s own pool to the upstream (never the proxy’s); calls beyond wait, within the introspection deadline.',
    ),
  introspection: z
    .object(introspectionShape)
    .strict()
    .prefault({})
    .describe('Bounds on what unknown tokens cost the upstream (from: introspect).'),
  header: z
    .string()
    .regex(HEADER_NAME, { error: (iss) => `invalid header name ${show(iss.input)}` })
    .optional()
    .describe('Header carrying the account id (required with from: header).'),
};
const clientsShape = {
  trustedProxies: z
    .array(checked(checkTrustedProxy))
    // Security: loopback only. `private` would let any pod, or a node that source-NATs a LoadBalancer's
    // traffic, name the client (X-Forwarded-For: 127.0.0.1 is then "localhost", exempt in Mastodon's table).
    .default(['loopback'])
    .describe(
      'Peers whose X-Forwarded-For is honoured: loopback, private, IPs or CIDRs. Default loopback only: name your reverse proxy, Ingress controller or L7 load balancer.',
    ),
  ipv6Prefix: z.number().int().min(1).max(128).default(64).describe('IPv6 clients are grouped by this prefix length.'),
  account: z.object(accountShape).strict().prefault({}).describe('How a request’s account is found.'),
};
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
const bodyLimitShape = {
  match: patterns.describe('Pattern(s) as in limits[].match.'),
  maxBodySize: size().describe('Largest request body for these routes (bytes, 16kB, 10MB, 1GB); 0: no limit.'),
};
const serverShape = {
  maxHeaderSize: z
    .number()
    .int()
    .min(1024)
    .max(1024 * 1024)
    .default(16 * 1024)
    .describe('Largest request head in bytes; larger → 431.'),
  headersTimeout: duration(1)
    .prefault('10s')
    .describe('Time allowed to send the request head (against slowloris); then 408.'),
  requestTimeout: duration(0).prefault('5m').describe('Time allowed for a whole request including its body; 0: none.'),
  keepAliveTimeout: duration(1).prefault('65s').describe('Idle keep-alive connections are closed after this.'),
  maxConnections: z.number().int().min(1).default(10_000).describe('Connections beyond this are closed at once.'),
  maxBodySize: size()
    .prefault('100MB')
    .describe('Default largest request body (bytes, 16kB, 10MB, 1GB); larger → 413; 0: no limit.'),
  bodyLimits: z
    .array(z.object(bodyLimitShape).strict())
    .default([])
    .describe('Per-route body limits; the first match wins.'),
  paramPeekBytes: size()
    .prefault('64kB')
    .refine((n) => n >= 1024 && n <= 16 * 1024 * 1024, { error: 'must be from 1kB to 16MB' })
    .describe(
      'Bytes of a URL-encoded or JSON body held to read its parameters (a token, _method, param: rules); a body whose parameter may lie beyond is answered 400. Multipart bodies are read up to their first file part, within this bound.',
    ),
  minBodyRate: size()
    .prefault('1kB')
    .describe(
      'Bytes per second a request body must keep up while the gateway reads it (16kB = 16384 B/s); slower over a whole minBodyRateGrace → 408 and the connection closed; 0: no minimum. Default 1kB: any live link passes, a client trickling bytes to hold connections does not.',
    ),
  minBodyRateGrace: duration(1000)
    .prefault('10s')
    .describe(
      'The span over which minBodyRate is measured (a slow start and a short stall are forgiven within it). Default 10s, a mobile link’s usual stall.',
    ),
  upstreamQueueTimeout: duration(0)
    .prefault('5s')
    .describe(
      'How long a request may wait for a free upstream connection (every pool has 128; requests whose body is still arriving hold at most half); then 503 with Retry-After: 1. 0: no waiting. Default 5s: far longer than a connection stays busy at normal upstream latency, so only an overloaded upstream sheds load.',
    ),
  tls: z
    .object({
      certFile: z
        .string()
        .min(1)
        .describe('PEM certificate (the leaf, or the leaf followed by its chain), e.g. a mounted Secret’s tls.crt.'),
      keyFile: z.string().min(1).describe('PEM private key of certFile, e.g. tls.key.'),
      caFile: z
        .string()
        .min(1)
        .nullable()
        .default(null)
        .describe('PEM certificates sent after the leaf (the chain), when certFile holds the leaf alone.'),
      minVersion: z.enum(['TLSv1.2', 'TLSv1.3']).default('TLSv1.2').describe('Oldest TLS version accepted.'),
    })
    .strict()
    .nullable()
    .default(null)
    .describe(
      'The listener speaks TLS (HTTPS) with this certificate instead of plain HTTP. The files are watched: a rotated pair is served to new connections within seconds; a pair that does not load keeps the one in force (logged, rategate_tls_reloads_total{result="error"}). null (default): plain HTTP.',
    ),
  http2: z
    .boolean()
    .default(true)
    .describe(
      'HTTP/2 beside HTTP/1.1 on the proxy port: negotiated by ALPN (h2) with server.tls, and with prior knowledge (h2c: a connection that opens with the HTTP/2 preface) on plain HTTP. The upstream is spoken to in HTTP/1.1 either way; WebSocket stays on HTTP/1.1. false: HTTP/1.1 only.',
    ),
  proxyProtocol: z
    .object({
      from: z
        .array(checked(checkProxyProtocolPeer))
        .default([])
        .describe(
          'Peers (loopback, private, IPs or CIDRs) whose connections must open with a PROXY protocol header (v1 or v2), whose source address becomes the peer; from them a connection without one is closed. Empty (default): off, and a PROXY header from anyone is answered 400.',
        ),
    })
    .strict()
    .prefault({})
    .describe('The PROXY protocol, for a TCP load balancer in front (HAProxy send-proxy / send-proxy-v2, AWS NLB, …).'),
  drainGrace: duration(0)
    .prefault('10s')
    .describe(
      'After SIGTERM, how long in-flight requests may finish (new requests get 503); the rest are then cut, logged with error DRAIN_TIMEOUT and counted in rategate_drain_cut_total. An upper bound, not a wait: the process exits once the last request is done. Read at shutdown, so a reload changes it. The chart derives terminationGracePeriodSeconds from it.',
    ),
  maxUpstreamConnectionsPerIp: z
    .number()
    .int()
    .min(0)
    .default(32)
    .describe(
      'Requests one client IP (an IPv6 client: its ipv6Prefix network) may have waiting for or holding upstream connections, per upstream; more → 429 with Retry-After: 1. 0: no cap. Default 32, a quarter of a pool: no one client can take it, and a NAT of many users still has room.',
    ),
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
      z
        .string()
        .regex(UPSTREAM_NAME, {
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
