/**
 * @module Warnings `rategate check` prints about a valid table that may not count what its author meant:
 * a pattern Rails would also route with a format suffix. Rails routes `/inbox.json` (any `.ext`) to
 * the action of `/inbox` unless the route says `format: false`, so a rule on `POST /inbox` leaves
 * `POST /inbox.json` uncounted (issue 38, finding 3). Warnings never fail a check: the table is valid.
 */
import { FORMAT_SUFFIX, parsePattern } from '../routing/pattern.js';
import type { Snapshot } from './types.js';

/**
 * Mastodon declares its whole API `namespace :api, format: false` (config/routes/api.rb): `/api/v1/accounts.json`
 * is a 404 there, not the sign-up route, so patterns under `/api` need no suffix.
 */
const FORMATLESS_PREFIX = 'api';

/** Every `match:` list of the table with its place (`limits[3].match`), the counting sections and the body limits. */
function matchLists(snapshot: Snapshot): Array<[string, readonly string[]]> {
  const { limits, bans, concurrency, surges, server } = snapshot.config;
  return [
    ...limits.map((r, i): [string, readonly string[]] => [`limits[${i}].match`, r.match]),
    ...bans.map((r, i): [string, readonly string[]] => [`bans[${i}].match`, r.match]),
    ...concurrency.map((r, i): [string, readonly string[]] => [`concurrency[${i}].match`, r.match]),
    ...surges.flatMap((s, i) =>
      s.limits.map((r, j): [string, readonly string[]] => [`surges[${i}].limits[${j}].match`, r.match]),
    ),
    ...server.bodyLimits.map((r, i): [string, readonly string[]] => [`server.bodyLimits[${i}].match`, r.match]),
  ];
}

/** The pattern written with Rails' suffix when Rails would route `PATH.json` to it too; null when it needs none. */
export function withFormatSuffix(source: string): string | null {
  const parsed = parsePattern(source);
  if (!parsed.ok || parsed.pattern.format) return null;
  const { segments } = parsed.pattern;
  const last = segments[segments.length - 1];
  // A `:name` segment already matches `12.json`, a final `*` any depth; `/` has nothing to suffix.
  if (last?.kind !== 'literal') return null;
  if (segments[0]?.kind === 'literal' && segments[0].value === FORMATLESS_PREFIX) return null;
  return `${source.trim()}${FORMAT_SUFFIX}`;
}

/** One line per pattern that a format suffix escapes, with its place and the pattern to write instead. */
export function formatSuffixWarnings(snapshot: Snapshot): string[] {
  const warnings: string[] = [];
  for (const [place, patterns] of matchLists(snapshot)) {
    patterns.forEach((source, i) => {
      const suggested = withFormatSuffix(source);
      if (suggested === null) return;
      const path = source.trim().split(/\s+/).at(-1) ?? source;
      warnings.push(
        `${patterns.length > 1 ? `${place}[${i}]` : place}: "${source}" does not match ${path}.json, which Rails routes to the same action ` +
          `(unless the route is declared format: false): write "${suggested}" to count it`,
      );
    });
  }
  return warnings;
}
