/** @module The `admin:` section of `limits.yaml`: the admin listener, its tokens and scopes, the hosts it answers to, the widest runtime block. */
import * as z from 'zod';
import { checked } from './formats.js';
import { checkAdminHost, checkListen } from './validators.js';

/** One named admin token: who holds it, its secret, what it may do. */
export const adminTokenShape = {
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
export const adminShape = {
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
