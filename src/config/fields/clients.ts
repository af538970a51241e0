/** @module The `clients:` section of `limits.yaml`: trusted proxies, IPv6 grouping, and how a request's account is found (introspection and its budget). */
import * as z from 'zod';
import { show } from '../errors.js';
import { checked, duration, positiveInt } from './formats.js';
import { checkTrustedProxy, HEADER_NAME } from './validators.js';

// Security (issue 37): a client sending a fresh junk token per request made the gateway ask the upstream
// once per request. The budget bounds the introspections one client can cause; invalid answers are
// remembered so a repeated junk token costs nothing.
export const introspectionBudgetShape = {
  limit: positiveInt()
    .default(20)
    .describe(
      'Unknown tokens one client (an IP, an IPv6 network of clients.ipv6Prefix) may have introspected per window.',
    ),
  window: duration(1).prefault('5m').describe('The budget’s window (fixed, epoch-aligned).'),
};
export const introspectionShape = {
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
export const accountShape = {
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
export const clientsShape = {
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
