/** @module The `upstream:`, `upstreams:` and `routes:` sections of `limits.yaml` (SPEC §3.2): where allowed requests go. */
import * as z from 'zod';
import { show } from '../errors.js';
import { checked, duration } from './formats.js';
import { patterns } from './rule.js';
import { checkNamedUpstreamUrl, checkUpstreamUrl } from './validators.js';

/** The Host header the upstream sees: its own (default), or the client's (signed deliveries sign it: docs/federation.md). */
export const upstreamHost = z
  .enum(['upstream', 'client'])
  .optional()
  .describe(
    "upstream (default): the upstream's own Host, the client's in X-Forwarded-Host; client: the client's Host unchanged, as nginx's `proxy_set_header Host $host` (Mastodon verifies HTTP signatures over it).",
  );
export const upstreamShape = {
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
export const namedUpstreamShape = {
  url: checked(checkNamedUpstreamUrl).describe('The http(s) URL of this upstream (scheme, host and port only).'),
  timeout: duration(0)
    .prefault('30s')
    .describe(
      'Upper bound for a response to start, and between its chunks; 0: none (long-lived streams such as Mastodon’s streaming API).',
    ),
  connectTimeout: duration(1).prefault('5s').describe('Upper bound for connecting to this upstream.'),
  host: upstreamHost,
};
export const routeShape = {
  match: patterns.describe('Pattern(s) as in limits[].match; the first route that matches wins.'),
  upstream: z.string().min(1).describe('The name of an entry of `upstreams` (or `default`: the top-level `upstream`).'),
};
