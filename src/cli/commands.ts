/**
 * @module The commands and their flags: the one list each command parses its flags from, `rategate
 * COMMAND --help` prints, and the README's command table is generated from (scripts/gen-docs.ts), so a
 * flag added to a command is in its help and the docs by construction. Data only: every command's
 * start reads it, so it imports nothing.
 */

/** One flag, as node:util's parseArgs reads it (it ignores `arg` and `help`), with what --help says of it. */
export interface FlagSpec {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  readonly multiple?: boolean;
  /** The value's placeholder in the help (`FILE`, `1h`); none for a boolean. */
  readonly arg?: string;
  readonly help: string;
}

export interface CommandSpec {
  /** `block`, or `block add` when the flags belong to its actions alike. */
  readonly name: string;
  /** What follows `rategate NAME`: positional arguments and flags, one string per usage line. */
  readonly synopsis: readonly string[];
  /** One sentence: what it does. */
  readonly what: string;
  readonly flags: Readonly<Record<string, FlagSpec>>;
  /** Further lines for its --help (environment, defaults). */
  readonly notes?: readonly string[];
}

const config = {
  type: 'string',
  short: 'c',
  arg: 'FILE',
  help: 'the limit table (default: RATEGATE_CONFIG, else config/limits.yaml)',
} as const;
const admin = {
  type: 'string',
  arg: 'URL',
  help: "a running gateway's admin listener (default: RATEGATE_ADMIN_URL, else http://127.0.0.1:9464)",
} as const;
const json = { type: 'boolean', help: "the admin API's JSON answer instead of a table" } as const;

const GUARD_FLAGS = {
  admin,
  json,
  for: { type: 'string', arg: '1h', help: 'add: how long the entry lasts (default 1h)' },
  reason: { type: 'string', arg: 'TEXT', help: 'add, rm, lift: why, kept in the audit log' },
  'reset-buckets': { type: 'boolean', help: 'block rm, bans lift: give a single IP full buckets again' },
  force: {
    type: 'boolean',
    help: 'add: a range wider than admin.maxPrefix (default /16, IPv6 /32) or covering loopback',
  },
} as const;
/** Each of the three shows only its own flags; all three parse GUARD_FLAGS, so a misplaced one is told where it goes. */
const { 'reset-buckets': _exemptTakesNoReset, ...EXEMPT_FLAGS } = GUARD_FLAGS;
const { for: _bansTakeNoFor, force: _bansTakeNoForce, ...BANS_FLAGS } = GUARD_FLAGS;
const GUARD_NOTES = ['The token comes from RATEGATE_ADMIN_TOKEN. See docs/under-attack.md.'];

/** What block, exempt and bans parse: the flags of all three. */
export { GUARD_FLAGS };

export const COMMANDS = {
  serve: {
    name: 'serve',
    synopsis: [
      '[--config FILE] [--listen HOST:PORT] [--admin-listen HOST:PORT]',
      '[--upstream URL|builtin] [--store memory|URL] [--workers N|auto]',
    ],
    what: 'Runs the gateway (and the built-in upstream when the upstream is `builtin`) until SIGTERM or SIGINT, then drains.',
    flags: {
      config,
      listen: {
        type: 'string',
        arg: 'HOST:PORT',
        help: 'the proxy listener (RATEGATE_LISTEN; the file: server.listen)',
      },
      'admin-listen': {
        type: 'string',
        arg: 'HOST:PORT',
        help: 'metrics, probes and the admin API (RATEGATE_ADMIN_LISTEN; the file: admin.listen)',
      },
      upstream: {
        type: 'string',
        arg: 'URL|builtin',
        help: 'where admitted requests go (RATEGATE_UPSTREAM; the file: upstream.url)',
      },
      store: {
        type: 'string',
        arg: 'memory|URL',
        help: 'where buckets are counted: memory, redis://… (RATEGATE_STORE; the file: store.url)',
      },
      workers: {
        type: 'string',
        arg: 'N|auto',
        help: 'node:cluster workers sharing the listener (default 1; auto: one per CPU; needs a shared store)',
      },
    },
    notes: [
      'RATEGATE_LOG_LEVEL wins over log.level; RATEGATE_MEMORY_LIMIT bounds the memory the default store.maxKeys fits in.',
    ],
  },
  check: {
    name: 'check',
    synopsis: ['[--config FILE | FILE]'],
    what: 'Validates a limit table as serve would (the same RATEGATE_* overrides) and prints its compiled rules, or every error with its place.',
    flags: { config },
  },
  explain: {
    name: 'explain',
    synopsis: [
      '[--config FILE] "METHOD /path?query" [-H "Name: value"]… [--ip IP] [--body "a=b"] [--account ID|none]',
      '[--account-age 3d] [--bot] [--locked] [--surge NAME]',
    ],
    what: "Runs the gateway's own decision on a described request (fresh buckets, no upstream) and prints which rules count it and why the others do not, the bans and in-flight limits that apply, and the headers the client sees.",
    flags: {
      config,
      header: {
        type: 'string',
        short: 'H',
        multiple: true,
        arg: '"Name: value"',
        help: 'a request header (repeatable)',
      },
      ip: {
        type: 'string',
        arg: 'IP',
        help: 'the client, as a trusted proxy in front of the gateway names it (default 192.0.2.1)',
      },
      body: { type: 'string', arg: '"a=b"', help: 'the request body, URL-encoded or JSON' },
      account: {
        type: 'string',
        arg: 'ID|none',
        help: 'whose the bearer token is, as the upstream would say (default: some account; none: no account)',
      },
      'account-age': {
        type: 'string',
        arg: '3d',
        help: "the account's age, for when.account rules (default: unknown)",
      },
      bot: { type: 'boolean', help: 'the account is a bot' },
      locked: { type: 'boolean', help: 'the account is locked' },
      surge: { type: 'string', arg: 'NAME', help: 'take this surge (surges:) as on' },
    },
  },
  replay: {
    name: 'replay',
    synopsis: [
      "[--config FILE] LOG… [--format nginx|combined|mastodon|rategate|json|'nginx:<log_format>']",
      '[--json] [--html REPORT.html] [--top N] [--assume anonymous,no-body]',
    ],
    what: "Drives access logs (plain or gzip; - reads standard input) through the gateway's decision on the log's clock and reports per rule whom it would have limited.",
    flags: {
      config,
      format: {
        type: 'string',
        short: 'f',
        arg: 'FORMAT',
        help: "the logs' format: nginx (default), combined, mastodon, rategate, json, or 'nginx:<log_format>'",
      },
      json: { type: 'boolean', help: 'the report as JSON' },
      html: { type: 'string', arg: 'REPORT.html', help: 'also write a page with a chart per rule' },
      top: { type: 'string', arg: 'N', help: 'how many top keys per rule (default 10)' },
      assume: {
        type: 'string',
        multiple: true,
        arg: 'A[,B]',
        help: 'what to assume where the log is silent: anonymous (a line showing no credential was unauthenticated), no-body (parameters are the query); shown in the report',
      },
    },
    notes: ['See docs/replay.md.'],
  },
  upstream: {
    name: 'upstream',
    synopsis: ['[--listen HOST:PORT]'],
    what: 'Runs the built-in upstream API alone.',
    flags: { listen: { type: 'string', arg: 'HOST:PORT', help: 'where it listens (default 127.0.0.1:3000)' } },
  },
  block: {
    name: 'block',
    synopsis: [
      'add IP|CIDR [--for 1h] [--reason TEXT] [--force] | list | rm IP|CIDR [--reason TEXT] [--reset-buckets]',
      '[--admin URL] [--json]',
    ],
    what: "Adds, lists and removes runtime blocks through a running gateway's admin API (every replica within 1 s on a shared store).",
    flags: GUARD_FLAGS,
    notes: GUARD_NOTES,
  },
  exempt: {
    name: 'exempt',
    synopsis: [
      'add IP|CIDR [--for 1h] [--reason TEXT] [--force] | list | rm IP|CIDR [--reason TEXT]',
      '[--admin URL] [--json]',
    ],
    what: "Adds, lists and removes runtime exemptions through a running gateway's admin API.",
    flags: EXEMPT_FLAGS,
    notes: GUARD_NOTES,
  },
  bans: {
    name: 'bans',
    synopsis: ['list | lift BAN KEY|IP [--reason TEXT] [--reset-buckets]', '[--admin URL] [--json]'],
    what: "Lists and lifts bans through a running gateway's admin API.",
    flags: BANS_FLAGS,
    notes: GUARD_NOTES,
  },
  limited: {
    name: 'limited',
    synopsis: ['[RULE | --rule RULE] [--top 20] [--local] [--admin URL] [--json]'],
    what: 'The keys a rule limited most over the last 5 to 10 minutes, for every replica sharing the store; no RULE: the rules that limited recently.',
    flags: {
      admin,
      json,
      rule: { type: 'string', arg: 'RULE', help: 'the rule (or give it as the one argument)' },
      top: { type: 'string', arg: '20', help: 'how many keys (default 20)' },
      local: { type: 'boolean', help: 'only the replica behind --admin, not the fleet' },
    },
    notes: ['The token comes from RATEGATE_ADMIN_TOKEN. See docs/under-attack.md#triage.'],
  },
  version: {
    name: '--version',
    synopsis: [''],
    what: 'Prints the version and the git revision it was built from (`rategate 0.2.0 (abc123def456)`); also `-v` and `version`.',
    flags: {},
  },
} as const satisfies Record<string, CommandSpec>;

export type CommandName = keyof typeof COMMANDS;

/** How a flag reads in a usage line: `-c, --config FILE`. */
export function flagLabel(name: string, f: FlagSpec): string {
  return `${f.short === undefined ? '' : `-${f.short}, `}--${name}${f.arg === undefined ? '' : ` ${f.arg}`}`;
}
