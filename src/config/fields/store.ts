/** @module The `store:` section of `limits.yaml`: where counters live, their key prefix, timeouts and what a store failure does. */
import * as z from 'zod';
import { show } from '../errors.js';
import { checked, duration, positiveInt } from './formats.js';
import { onError } from './rule.js';
import { checkStoreUrl } from './validators.js';

/** `{` `}` would change Redis Cluster hash slots, spaces and quotes break key readability. */
const PREFIX = /^[A-Za-z0-9_.:-]+$/;

export const storeShape = {
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
      'Gateway processes sharing the store until the store has answered once: after, the live count is learned from their heartbeats (rategate_gateways), never below this for one heartbeat period after a gateway joins. While a master fails, each counts a bucket locally from its share of what the store last had left.',
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
