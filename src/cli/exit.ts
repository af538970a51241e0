/**
 * @module The command line's exit codes, as BSD's sysexits.h numbers them: a script or a supervisor tells
 * a typo (64) from a bad table (78) from a store or port it cannot have (69) without reading stderr.
 * The README's table of them is generated from this list (scripts/gen-docs.ts).
 */

export const EXIT = {
  OK: 0,
  /** The operation ran and failed for a reason of its own (the admin API refused it, a probe got no 2xx). */
  FAILURE: 1,
  USAGE: 64,
  DATA: 65,
  NO_INPUT: 66,
  UNAVAILABLE: 69,
  SOFTWARE: 70,
  NO_PERMISSION: 77,
  CONFIG: 78,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** Each code with its sysexits name and when rategate uses it, for the docs. */
export const EXIT_CODES: readonly { readonly code: ExitCode; readonly name: string; readonly when: string }[] = [
  { code: EXIT.OK, name: '—', when: 'done (serve and upstream: stopped by SIGTERM or SIGINT after draining)' },
  { code: EXIT.FAILURE, name: '—', when: 'the healthcheck found the admin listener unhealthy (Docker wants 0 or 1)' },
  {
    code: EXIT.USAGE,
    name: 'EX_USAGE',
    when: 'an unknown command or flag, a missing or extra argument, a flag value that cannot be read (`--workers x`, `--top x`, a malformed `explain` request), no command at all',
  },
  {
    code: EXIT.DATA,
    name: 'EX_DATAERR',
    when: 'block, exempt, bans, limited: the admin API refused the request as given (an address it cannot read, no such ban, a range too wide without `--force`); replay: a log it cannot read as its format',
  },
  { code: EXIT.NO_INPUT, name: 'EX_NOINPUT', when: 'replay: a log file that cannot be read' },
  {
    code: EXIT.UNAVAILABLE,
    name: 'EX_UNAVAILABLE',
    when: 'serve, upstream: the listen address is taken or not allowed, or the store cannot be reached at start; block, exempt, bans, limited: the admin API cannot be reached or answers 5xx',
  },
  {
    code: EXIT.SOFTWARE,
    name: 'EX_SOFTWARE',
    when: 'an error rategate did not expect (a bug: the stack trace is printed)',
  },
  {
    code: EXIT.NO_PERMISSION,
    name: 'EX_NOPERM',
    when: 'block, exempt, bans, limited: the admin API wants a token (401) or refuses it (403)',
  },
  {
    code: EXIT.CONFIG,
    name: 'EX_CONFIG',
    when: 'the limit table cannot be read or is invalid (every error printed with its place), an invalid `RATEGATE_*` override, `--workers N` with a store the workers cannot share',
  },
];
