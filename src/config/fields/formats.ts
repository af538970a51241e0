/** @module The value formats of the config schema (durations, sizes, positive integers, account ids, checked strings) as zod builders. */
import * as z from 'zod';
import { DURATION_HINT, DURATION_PATTERN, formatDuration, parseDuration } from './duration.js';
import { show } from '../errors.js';

/** A string check that reports the checker's message as a custom issue. */
export function checked(check: (v: string) => string | null): z.ZodString {
  return z.string().superRefine((v, ctx) => {
    const error = check(v);
    if (error !== null) ctx.addIssue({ code: 'custom', message: error, input: v });
  });
}

/** Written as `30s`, `5m`, `1h30m`, `250ms` or integer milliseconds; parsed to milliseconds. */
export function duration(minMs: number) {
  const invalid = (input: unknown): string =>
    input === undefined ? 'required' : `invalid duration ${show(input)} (${DURATION_HINT})`;
  // Zod reports the issue of the one option whose type matched, so each option carries the message.
  const error = (iss: { input?: unknown }): string => invalid(iss.input);
  return z
    .union(
      [z.string().regex(new RegExp(DURATION_PATTERN), { error }), z.number().int({ error }).nonnegative({ error })],
      { error },
    )
    .transform((v, ctx) => {
      const ms = parseDuration(v);
      if (ms === undefined) {
        ctx.issues.push({ code: 'custom', message: invalid(v), input: v });
        return z.NEVER;
      }
      if (ms < minMs) {
        ctx.issues.push({
          code: 'custom',
          message: `must be at least ${formatDuration(minMs)}, got ${show(v)}`,
          input: v,
        });
        return z.NEVER;
      }
      return ms;
    });
}

/**
 * A list at the top of `limits.yaml` (`limits:`, `bans:`, `concurrency:`, `surges:`): absent, or with
 * every entry commented out (YAML reads that as null), it is an empty list, not an error.
 */
export function tableList<T extends z.ZodType>(item: T, description: string) {
  return z
    .array(item)
    .nullable()
    .transform((v) => v ?? [])
    .prefault([])
    .describe(description);
}

export const positiveInt = () =>
  z
    .number()
    .int()
    .positive({ error: (iss) => `must be a positive integer, got ${show(iss.input)}` });

/** Account ids are opaque strings; YAML reads `123` as a number, which is accepted while exact. */
const accountIdError = (iss: { input?: unknown }): string =>
  typeof iss.input === 'number'
    ? `account id ${show(iss.input)} is not an integer YAML can read exactly (quote it)`
    : `expected an account id, got ${show(iss.input)}`;
export const accountId = z
  .union([z.string().min(1), z.number().int({ error: accountIdError }).nonnegative({ error: accountIdError })], {
    error: accountIdError,
  })
  .transform((v): string => String(v));
/** Sizes as `512`, `16kB`, `10MB`, `1GB` (powers of 1024; `KiB`, `MiB`, `GiB` too); 0 means no limit. */
const SIZE = /^([0-9]+)\s*(B|kB|KB|KiB|MB|MiB|GB|GiB)?$/;
const SIZE_UNITS: Record<string, number> = {
  B: 1,
  kB: 1024,
  KB: 1024,
  KiB: 1024,
  MB: 1024 ** 2,
  MiB: 1024 ** 2,
  GB: 1024 ** 3,
  GiB: 1024 ** 3,
};
export function size() {
  const invalid = (input: unknown) => `invalid size ${show(input)} (use bytes, or 16kB, 10MB, 1GB)`;
  return z
    .union([z.number().int().nonnegative(), z.string().regex(SIZE)], { error: (iss) => invalid(iss.input) })
    .transform((v): number => {
      if (typeof v === 'number') return v;
      const m = SIZE.exec(v)!;
      return Number(m[1]) * SIZE_UNITS[m[2] ?? 'B']!;
    });
}
