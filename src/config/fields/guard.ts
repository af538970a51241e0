/**
 * @module The `bans:` and `concurrency:` sections of `limits.yaml` (SPEC §3.2): kept apart from schema.ts
 * so the attack-day features hook into the table with two lines there.
 */
import * as z from 'zod';
import { show } from '../errors.js';
import { duration, positiveInt, tableList } from './formats.js';
import type { AccountCondition } from '../../identity/account-facts.js';

/** A rule's `when`, as the schema gives it. */
export interface RuleWhen {
  authenticated?: boolean | undefined;
  query?: string[] | undefined;
  account?: AccountCondition | undefined;
}

/** `match`, `per`, `missing` and `when` exactly as a limit rule takes them (schema.ts hands them in: no import cycle). */
export interface RuleMatchShape {
  readonly match: z.ZodType<string[], unknown>;
  readonly per: z.ZodType<string | string[], unknown>;
  readonly missing: z.ZodType<'skip' | 'ip' | undefined, unknown>;
  readonly when: z.ZodType<RuleWhen | undefined, unknown>;
}

const name = z.string().regex(/^[A-Za-z0-9_.-]+$/, {
  error: (iss) => `invalid name ${show(iss.input)} (use letters, digits, "_", "." and "-")`,
});

const status = z.number().int().min(100).max(599);

/** The two sections' shapes, built around the rule's own `match`/`per`/`when`. */
export function guardShapes(ruleMatchShape: RuleMatchShape) {
  const banShape = {
    name: name.describe('Unique ban name; used in metrics, logs and the admin API.'),
    ...ruleMatchShape,
    on: z
      .object({ status: z.array(status).min(1).describe('Count only answers with these statuses (e.g. [401, 422]).') })
      .strict()
      .optional()
      .describe('Count only some answers (Fail2Ban); without it every matching request counts (Allow2Ban).'),
    limit: positiveInt().describe('Counted requests allowed in `period` before the key is banned.'),
    period: duration(1).describe('The counting window (findtime).'),
    ban: duration(1000).describe('How long the key stays banned (bantime).'),
    maxActive: positiveInt()
      .default(100_000)
      .describe(
        'Live bans this ban may hold (default 100000): one more ends the oldest, logged and counted (rategate_bans_dropped_total), so a ban wave costs bounded memory.',
      ),
  };

  const concurrencyShape = {
    name: name.describe('Unique in-flight rule name; used in metrics and logs.'),
    ...ruleMatchShape,
    max: positiveInt().describe('Requests of one key in flight at once; more are answered 429 with Retry-After: 1.'),
    scope: z
      .enum(['local', 'store'])
      .default('local')
      .describe(
        'local: per gateway process; store: shared through the store with leases that expire if a replica dies.',
      ),
  };

  const top = {
    bans: tableList(
      z.object(banShape).strict(),
      'Automatic bans (Fail2Ban / Allow2Ban): a key that passes `limit` in `period` is refused 403 for `ban`.',
    ),
    concurrency: tableList(
      z.object(concurrencyShape).strict(),
      'In-flight limits: at most `max` requests of one key in flight.',
    ),
  };

  const knownKeys: Record<string, readonly string[]> = {
    bans: Object.keys(banShape),
    'bans.on': ['status'],
    'bans.when': ['authenticated', 'query', 'account'],
    'bans.when.account': ['age', 'bot', 'locked'],
    concurrency: Object.keys(concurrencyShape),
    'concurrency.when': ['authenticated', 'query', 'account'],
    'concurrency.when.account': ['age', 'bot', 'locked'],
  };
  return { top, knownKeys };
}
