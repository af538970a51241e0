/** @module One limit rule of `limits.yaml` (SPEC §3.1: match, per, limit, period, when, overrides): the largest section, kept apart from schema.ts, which assembles the rest. */
import * as z from 'zod';
import { parsePattern } from '../../routing/pattern.js';
import { show } from '../errors.js';
import { checked, duration, positiveInt } from './formats.js';
import { compositeError, PER_HINT, PER_MEANINGS, PER_PATTERN, perError } from '../../keys/index.js';
import { checkIpOrCidr } from './validators.js';
import { parseDuration, DURATION_HINT } from './duration.js';
import { AGE_PATTERN, type AgeOp } from '../../identity/account-facts.js';

/** `when.account.age`: `< 7d`, `>= 30d` → the comparison and milliseconds. */
const accountAge = z.string().transform((v, ctx) => {
  const m = AGE_PATTERN.exec(v);
  const ms = m === null ? undefined : parseDuration(m[2]);
  if (m === null || ms === undefined) {
    ctx.issues.push({
      code: 'custom',
      message: `invalid age ${show(v)} (a comparison and a duration: "< 7d", ">= 30d"; ${DURATION_HINT})`,
      input: v,
    });
    return z.NEVER;
  }
  return { op: m[1] as AgeOp, ms, text: `${m[1]!} ${m[2]!}` };
});

export const accountWhenShape = {
  age: accountAge
    .optional()
    .describe(
      'The account\'s age (from created_at), compared: "< 7d", ">= 30d". An account whose creation the upstream does not tell counts as new (age 0).',
    ),
  bot: z.boolean().optional().describe('Whether the account says it is a bot (unknown: false).'),
  locked: z.boolean().optional().describe('Whether the account approves its followers (unknown: false).'),
};

/**
 * The introspection budget's rule name (clients.account.introspection.budget): on its 429s and in its
 * bucket keys, so no rule of the table may take it.
 */
export const INTROSPECTION_BUDGET_RULE = 'introspection-budget';

/** Rule names appear in response headers, metric labels and Redis keys: keep them plain. */
export const RULE_NAME = /^[A-Za-z0-9_.-]+$/;
/** What to do on store errors: store.onError, and a rule's onStoreError. */
export const onError = z.enum(['local', 'allow', 'deny']);

/** One pattern or a list (limits[].match, routes[].match, server.bodyLimits[].match). */
export const patterns = z
  .union([z.string(), z.array(z.string())], {
    error: (iss) =>
      iss.input === undefined ? 'required' : `expected a pattern or a list of patterns, got ${show(iss.input)}`,
  })
  .superRefine((v, ctx) => {
    if (Array.isArray(v) && v.length === 0) {
      ctx.addIssue({ code: 'custom', message: 'must have at least one pattern', input: v });
      return;
    }
    const list = typeof v === 'string' ? [v] : v;
    list.forEach((p, i) => {
      const parsed = parsePattern(p);
      if (!parsed.ok) {
        ctx.addIssue({ code: 'custom', message: parsed.error, input: p, path: typeof v === 'string' ? [] : [i] });
      }
    });
  })
  .transform((v): string[] => (typeof v === 'string' ? [v] : v));

export const whenShape = {
  authenticated: z
    .boolean()
    .optional()
    .describe(
      'true: only requests with an account (a token the upstream accepts, or the token/header in those modes); false: only requests without.',
    ),
  query: z
    .array(z.string().min(1))
    .min(1)
    .optional()
    .describe(
      "Only requests with any of these parameters, non-empty, in the query string or a form body (Rack's params: GET merged with POST), e.g. [page, min_id, max_id, since_id].",
    ),
  account: z
    .object(accountWhenShape)
    .strict()
    .optional()
    .describe(
      'Only requests whose account (clients.account.from: introspect) has these facts, as verify_credentials tells them; a request without an account never matches.',
    ),
};

export const overrideShape = {
  ips: z.array(checked(checkIpOrCidr)).default([]).describe('Client IPs or CIDRs.'),
  accounts: z
    .array(z.union([z.string().min(1), z.number().int().nonnegative()]).transform((v): string => String(v)))
    .default([])
    .describe('Account ids (as in exempt.accounts).'),
  keys: z
    .array(z.union([z.string().min(1), z.array(z.string().min(1)).min(2)]))
    .default([])
    .describe(
      'Key values of a token/header/param/cookie/jwt/signature rule: the header, parameter, cookie or claim value as sent, the signing server’s domain, or the token’s SHA-256 digest.',
    ),
  limit: positiveInt().describe('Requests allowed per period for these clients.'),
};

/** One key kind: its shape (PER_PATTERN) and its name (the kind table checks it). */
const perPart = z
  .string({ error: (iss) => (iss.input === undefined ? 'required' : `expected a key kind, got ${show(iss.input)}`) })
  .regex(PER_PATTERN, { error: (iss) => `must be one of ${PER_HINT} (got ${show(iss.input)})` })
  .superRefine((v, ctx) => {
    // The kind's name (a header, parameter, cookie or claim name): the kind table checks it.
    const error = PER_PATTERN.test(v) ? perError(v) : null;
    if (error !== null) ctx.addIssue({ code: 'custom', message: error, input: v });
  });

/** `per:` — one kind, or a composite `[KIND, KIND, …]`: one bucket per combination of the parts' values. */
const perShape = z
  .union([perPart, z.array(perPart)], {
    error: (iss) =>
      iss.input === undefined ? 'required' : `expected a key kind or a list of key kinds, got ${show(iss.input)}`,
  })
  .superRefine((v, ctx) => {
    if (typeof v === 'string') return;
    const error = compositeError(v);
    if (error !== null) ctx.addIssue({ code: 'custom', message: error, input: v });
  })
  .describe(
    `Whose bucket: one kind, or a list of kinds (one bucket per combination, e.g. [signature:domain, ip]); a request without the key (any part) skips the rule. ${PER_MEANINGS}`,
  );

export const ruleShape = {
  name: z
    .string()
    .regex(RULE_NAME, {
      error: (iss) => `invalid rule name ${show(iss.input)} (use letters, digits, "_", "." and "-")`,
    })
    .describe('Unique rule name; used in metrics, logs and the RateLimit-Policy header.'),
  match: patterns.describe(
    'One pattern or a list: "METHOD /path" or "/path" (any method). Segments: literal, :name (one segment), a final * (the rest).',
  ),
  per: perShape,
  missing: z
    .enum(['skip', 'ip'])
    .optional()
    .describe(
      'A request without the key (or a part of it): skip (default) leaves the rule out; ip counts it per client IP instead.',
    ),
  limit: positiveInt().describe('Requests allowed per period.'),
  period: duration(1).describe('Window length: 30s, 5m, 1h, 1d, 250ms or integer milliseconds.'),
  algorithm: z
    .enum(['fixed-window', 'sliding-window', 'token-bucket'])
    .default('fixed-window')
    .describe('fixed-window (epoch-aligned, as Mastodon), sliding-window, or token-bucket.'),
  cost: positiveInt().default(1).describe('Tokens a matching request takes.'),
  shadow: z.boolean().default(false).describe('Count and report but never reject (a dry run).'),
  onStoreError: onError.optional().describe('Overrides store.onError for this rule.'),
  when: z.object(whenShape).strict().optional().describe('Conditions that must all hold for the rule to apply.'),
  overrides: z
    .array(z.object(overrideShape).strict())
    .optional()
    .describe(
      'Clients with their own limit for this rule (own bucket, same period and algorithm); the first match wins.',
    ),
};
