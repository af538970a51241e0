/** @module YAML text → validated, compiled, deep-frozen Snapshot; every error reported at once. */
import { readFile } from 'node:fs/promises';
import { parseDocument } from 'yaml';
import type * as z from 'zod';
import { buildSnapshot } from './compile.js';
import {
  ConfigError,
  ConfigFileUnreadable,
  configErrorMap,
  formatPath,
  unknownKeyMessage,
  whyUnreadable,
  type PathIssue,
  type PathItem,
} from './errors.js';
import { crossFieldIssues } from './cross-field.js';
import { configSchema, knownKeysAt, type Config } from './schema.js';
import type { Snapshot } from './types.js';

/** Process settings from flags and environment; they replace the file's values before validation. */
export interface ConfigOverrides {
  listen?: string;
  adminListen?: string;
  /** RATEGATE_ADMIN_TOKEN: replaces `admin.token`, so the secret need not sit in the file. */
  adminToken?: string;
  /** `builtin` or an http(s) URL. */
  upstream?: string;
  /** `memory` or a Redis URL. */
  store?: string;
  /** `log.level` (RATEGATE_LOG_LEVEL): wins over the file at start and on every reload alike. */
  logLevel?: string;
  /** RATEGATE_STORE_SENTINEL_PASSWORD: replaces `store.sentinelPassword`, so the secret need not sit in the file. */
  sentinelPassword?: string;
}

export const EMPTY_FILE =
  '(top level): the file is empty (write the limit table; for a gateway with no limits, say so: "limits: []")';

export type ValidationResult =
  { readonly ok: true; readonly config: Config } | { readonly ok: false; readonly errors: string[] };

/** Parses YAML into plain data; a syntax error throws ConfigError with `line L, column C: …`. */
export function parseYaml(text: string, source: string): unknown {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true, logLevel: 'error' });
  // Warnings (e.g. an unknown `!tag`) are errors here: a config must mean exactly what it says.
  const problems = [...doc.errors, ...doc.warnings];
  if (problems.length > 0) {
    throw new ConfigError(
      source,
      problems.map((e) => {
        // prettyErrors appends " at line L, column C:" and a code excerpt; keep the first clause.
        const message = e.message.split(/ at line \d+, column \d+:|\n/)[0] ?? e.message;
        const pos = e.linePos?.[0];
        return pos === undefined ? message : `line ${pos.line}, column ${pos.col}: ${message}`;
      }),
    );
  }
  try {
    // maxAliasCount bounds alias expansion (the "billion laughs" document).
    return doc.toJS({ maxAliasCount: 100 }) as unknown;
  } catch (err) {
    throw new ConfigError(source, [`YAML: ${err instanceof Error ? err.message : String(err)}`]);
  }
}

const OVERRIDE_PATHS: Record<keyof ConfigOverrides, readonly string[]> = {
  listen: ['listen'],
  adminListen: ['admin', 'listen'],
  adminToken: ['admin', 'token'],
  upstream: ['upstream', 'url'],
  store: ['store', 'url'],
  logLevel: ['log', 'level'],
  sentinelPassword: ['store', 'sentinelPassword'],
};

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Copies along the path only, so the caller's object is never modified. */
function applyOverrides(raw: unknown, overrides: ConfigOverrides | undefined): { raw: unknown; paths: Set<string> } {
  const paths = new Set<string>();
  if (overrides === undefined) return { raw, paths };
  // An empty document is an empty mapping; anything else that is not a mapping is left for the
  // schema to reject.
  let top = raw === null || raw === undefined ? {} : raw;
  if (!isRecord(top)) return { raw: top, paths };
  top = { ...top };
  for (const key of Object.keys(OVERRIDE_PATHS) as (keyof ConfigOverrides)[]) {
    const value = overrides[key];
    if (value === undefined) continue;
    const path = OVERRIDE_PATHS[key];
    let node = top as Record<string, unknown>;
    let ok = true;
    for (const segment of path.slice(0, -1)) {
      const child = node[segment];
      if (child === undefined || child === null) node[segment] = {};
      else if (isRecord(child)) node[segment] = { ...child };
      else {
        ok = false; // a malformed section: its own error is reported
        break;
      }
      node = node[segment] as Record<string, unknown>;
    }
    if (!ok) continue;
    node[path[path.length - 1] ?? ''] = value;
    paths.add(path.join('.'));
  }
  return { raw: top, paths };
}

/** Rank of a path in document order: mapping keys in the order written, list items by index. */
function documentRank(raw: unknown, path: readonly PathItem[]): number[] {
  const rank: number[] = [];
  let node: unknown = raw;
  for (const p of path) {
    if (Array.isArray(node) && typeof p === 'number') {
      rank.push(p);
      node = node[p];
    } else if (isRecord(node) && typeof p === 'string') {
      const keys = Object.keys(node);
      const i = keys.indexOf(p);
      // A missing key (e.g. a required one) sorts after the keys that are present.
      rank.push(i < 0 ? keys.length : i);
      node = node[p];
    } else {
      rank.push(Number.MAX_SAFE_INTEGER);
      node = undefined;
    }
  }
  return rank;
}

function compareRanks(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}

function issuesOf(error: z.ZodError): PathIssue[] {
  const out: PathIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      // One line per key, at the key's own place, with a hint when it looks like a typo.
      const known = knownKeysAt(issue.path);
      for (const key of issue.keys) out.push({ path: [...issue.path, key], message: unknownKeyMessage(key, known) });
    } else {
      out.push({ path: issue.path, message: issue.message });
    }
  }
  return out;
}

/** Validates plain data (from YAML or elsewhere) after applying overrides. Never throws. */
export function validateConfig(input: unknown, overrides?: ConfigOverrides): ValidationResult {
  // An empty file (or one of comments only) is more likely a broken deploy than a wish for no limits.
  if (input === null || input === undefined) return { ok: false, errors: [EMPTY_FILE] };
  const { raw, paths } = applyOverrides(input === null || input === undefined ? {} : input, overrides);
  const parsed = configSchema.safeParse(raw, { error: configErrorMap });
  const issues = [...(parsed.success ? [] : issuesOf(parsed.error)), ...crossFieldIssues(raw)];
  if (issues.length === 0 && parsed.success) return { ok: true, config: parsed.data };
  // Errors are listed in the order of the file, which is how a person fixes them.
  const ranked = issues.map((issue) => ({ issue, rank: documentRank(raw, issue.path) }));
  ranked.sort((a, b) => compareRanks(a.rank, b.rank));
  const errors = ranked.map(({ issue }) => {
    const where = formatPath(issue.path);
    const note = paths.has(issue.path.join('.')) ? ' (set by an override)' : '';
    return `${where}: ${issue.message}${note}`;
  });
  return { ok: false, errors: [...new Set(errors)] };
}

/** Parses, validates and compiles a config text. Throws ConfigError (only) on any problem. */
export function parseConfig(text: string, source: string, overrides?: ConfigOverrides): Snapshot {
  const result = validateConfig(parseYaml(text, source), overrides);
  if (!result.ok) throw new ConfigError(source, result.errors);
  return buildSnapshot(result.config, source);
}

/** The config file's text; an unreadable file is a ConfigFileUnreadable naming it. */
export async function readConfigText(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    throw new ConfigFileUnreadable(path, whyUnreadable(err));
  }
}

export async function loadConfigFile(path: string, overrides?: ConfigOverrides): Promise<Snapshot> {
  return parseConfig(await readConfigText(path), path, overrides);
}
