/**
 * @module `rategate block|exempt|bans|limited`: the operator's side of the runtime blocks, exemptions and
 * bans, and of triage (the keys most limited, for the whole fleet on a shared store), talking to a running gateway's admin API (`--admin URL`, token from RATEGATE_ADMIN_TOKEN). Prints
 * plain tables and one-line confirmations; on an error, the API's own message and an exit code that
 * tells who failed (exit.ts: 64 the command line, 65 the request, 77 the token, 69 the API).
 */
import { COMMANDS, GUARD_FLAGS } from './commands.js';
import { EXIT } from './exit.js';
import { parseCommand } from './options.js';
import { commandUsage } from './usage.js';

const DEFAULT_ADMIN = 'http://127.0.0.1:9464';

/** `--admin`, else RATEGATE_ADMIN_URL, else the default; without a trailing slash. */
function adminUrl(flag: string | undefined): string {
  return (flag ?? process.env.RATEGATE_ADMIN_URL ?? DEFAULT_ADMIN).replace(/\/+$/, '');
}

/** Why a call failed, and the exit code that says so. */
class Refusal {
  constructor(
    readonly message: string,
    readonly exit: number,
  ) {}
}

type Print = { out: (line: string) => void; err: (line: string) => void };

/** Runs one of the three commands over HTTP; returns the exit code. */
export async function guardCommand(
  command: 'block' | 'exempt' | 'bans',
  args: string[],
  print: Print = { out: console.log, err: console.error },
): Promise<number> {
  const { values, positionals } = parseCommand(args, GUARD_FLAGS);
  const [action, ...rest] = positionals;
  if (values.help || action === undefined) {
    (values.help ? print.out : print.err)(commandUsage(command));
    return values.help ? EXIT.OK : EXIT.USAGE;
  }
  const admin = adminUrl(values.admin);
  const fail = (msg: string, exit: number): number => (print.err(`rategate ${command} ${action}: ${msg}`), exit);

  const call = requestFor(command, action, rest, values);
  if (typeof call === 'string') return fail(call, EXIT.USAGE);
  const answer = await callAdmin(admin, call);
  if (answer instanceof Refusal) return fail(answer.message, answer.exit);
  const { method } = call;
  if (values.json) return (print.out(JSON.stringify(answer, null, 2)), EXIT.OK);
  if (method === 'GET') {
    const rows = (command === 'bans' ? answer.bans : answer.entries) as Record<string, unknown>[];
    print.out(command === 'bans' ? banTable(rows) : entryTable(rows));
    if (answer.scope === 'memory') print.out("(memory store: these entries are this gateway process's only)");
    return EXIT.OK;
  }
  const reset =
    typeof answer.bucketsReset === 'number'
      ? `; ${answer.bucketsReset} buckets reset${answer.note ? ` (${String(answer.note)})` : ''}`
      : '';
  if (command === 'bans') {
    const lifted = answer.lifted as { ban?: unknown; key?: unknown } | undefined;
    print.out(`lifted ban ${String(lifted?.ban ?? rest[0])} on ${String(lifted?.key ?? rest[1])}${reset}`);
  } else if (method === 'DELETE')
    print.out(`removed ${command === 'block' ? 'block' : 'exemption'} ${rest[0]}${reset}`);
  else
    print.out(
      `${command === 'block' ? 'blocked' : 'exempted'} ${rest[0]} until ${String(answer.expiresAt)}${answer.scope === 'memory' ? ' (this process only: memory store)' : ' (every replica within 1 s)'}`,
    );
  return EXIT.OK;
}

/** `rategate limited [RULE]`: the keys most limited for a rule (no rule: which rules limited recently). */
export async function limitedCommand(
  args: string[],
  print: Print = { out: console.log, err: console.error },
): Promise<number> {
  const { values, positionals } = parseCommand(args, COMMANDS.limited.flags);
  // The rule as SPEC's `--rule NAME` or as the one positional: either, not both.
  if (values.help || positionals.length > 1 || (values.rule !== undefined && positionals.length > 0)) {
    (values.help ? print.out : print.err)(commandUsage('limited'));
    return values.help ? EXIT.OK : EXIT.USAGE;
  }
  const admin = adminUrl(values.admin);
  const rule = values.rule ?? positionals[0];
  const q = new URLSearchParams();
  if (rule !== undefined) q.set('rule', rule);
  if (values.top !== undefined) q.set('top', values.top);
  if (values.local) q.set('scope', 'local');
  // Without a rule the API answers 400 with the rules limited recently: that list is the answer here.
  const answer = await callAdmin(
    admin,
    { method: 'GET', path: `/admin/limited?${q.toString()}`, body: undefined },
    rule === undefined,
  );
  if (answer instanceof Refusal) return (print.err(`rategate limited: ${answer.message}`), answer.exit);
  if (values.json) return (print.out(JSON.stringify(answer, null, 2)), EXIT.OK);
  if (rule === undefined) {
    const recent = (answer.recentlyLimited as string[] | undefined) ?? [];
    print.out(
      recent.length === 0 ? '(no rule limited anyone recently)' : `rules that limited recently: ${recent.join(', ')}`,
    );
    return EXIT.OK;
  }
  const rows = (answer.top as { key: string; count: number; error: number }[]).map((r) => [
    String(r.count),
    r.error > 0 ? `≤${r.error}` : '0',
    r.key,
  ]);
  print.out(rows.length === 0 ? '(no key limited recently)' : table(['429s', '±', 'KEY'], rows));
  print.out(
    `(${String(answer.window)}${answer.scope === 'fleet' ? `: ${String(answer.replicas)} replicas published` : ''})`,
  );
  return EXIT.OK;
}

interface AdminCall {
  readonly method: string;
  readonly path: string;
  readonly body: string | undefined;
}

/** The admin API call a command line names, or what is wrong with it. */
function requestFor(
  command: 'block' | 'exempt' | 'bans',
  action: string,
  rest: string[],
  values: {
    for?: string | undefined;
    reason?: string | undefined;
    'reset-buckets'?: boolean | undefined;
    force?: boolean | undefined;
  },
): AdminCall | string {
  const path = `/admin/${command === 'block' ? 'blocks' : command === 'exempt' ? 'exemptions' : 'bans'}`;
  if (
    values['reset-buckets'] &&
    !((command === 'bans' && action === 'lift') || (command === 'block' && action === 'rm'))
  ) {
    return '--reset-buckets goes with `block rm` and `bans lift`';
  }
  if (values.force && (command === 'bans' || action !== 'add')) return '--force goes with `block add` and `exempt add`';
  const query = removalQuery(values);
  if (command === 'bans') {
    if (action === 'lift') {
      if (rest.length !== 2) return 'expected BAN KEY (as `rategate bans list` shows them; the bare IP for an IP ban)';
      return {
        method: 'DELETE',
        path: `${path}/${encodeURIComponent(rest[0]!)}/${encodeURIComponent(rest[1]!)}${query}`,
        body: undefined,
      };
    }
    if (action !== 'list' || rest.length > 0) return 'expected `list` or `lift BAN KEY`';
    return { method: 'GET', path, body: undefined };
  }
  if (action === 'add') {
    if (rest.length !== 1) return 'expected one IP or CIDR';
    const target = rest[0]!;
    const body = JSON.stringify({
      [target.includes('/') ? 'cidr' : 'ip']: target,
      ...(values.for ? { for: values.for } : {}),
      ...(values.reason ? { reason: values.reason } : {}),
      ...(values.force ? { force: true } : {}),
    });
    return { method: 'POST', path, body };
  }
  if (action === 'rm') {
    if (rest.length !== 1) return 'expected one IP or CIDR';
    return { method: 'DELETE', path: `${path}/${encodeURIComponent(rest[0]!)}${query}`, body: undefined };
  }
  if (action !== 'list' || rest.length > 0) return 'expected `add IP|CIDR`, `list` or `rm IP|CIDR`';
  return { method: 'GET', path, body: undefined };
}

/** `?reason=…&resetBuckets=true` for a removal or lift, or ''. */
function removalQuery(values: { reason?: string | undefined; 'reset-buckets'?: boolean | undefined }): string {
  const q = new URLSearchParams();
  if (values.reason) q.set('reason', values.reason);
  if (values['reset-buckets']) q.set('resetBuckets', 'true');
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}

/** An answer's exit code: the token (401, 403), the API itself (5xx), else the request as given. */
function exitFor(status: number): number {
  return status === 401 || status === 403 ? EXIT.NO_PERMISSION : status >= 500 ? EXIT.UNAVAILABLE : EXIT.DATA;
}

/** Calls the admin API with the token from the environment; its JSON answer, or why it failed. */
async function callAdmin(
  admin: string,
  call: AdminCall,
  accept400 = false,
): Promise<Record<string, unknown> | Refusal> {
  const headers: Record<string, string> = {};
  const token = process.env.RATEGATE_ADMIN_TOKEN?.trim();
  if (token) headers.authorization = `Bearer ${token}`;
  if (call.body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(admin + call.path, {
      method: call.method,
      headers,
      ...(call.body !== undefined ? { body: call.body } : {}),
      signal: AbortSignal.timeout(10_000),
    });
  } catch (err) {
    const why =
      (err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message;
    return new Refusal(`cannot reach the admin API at ${admin}: ${why}`, EXIT.UNAVAILABLE);
  }
  const text = await res.text();
  let answer: Record<string, unknown>;
  try {
    answer = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return new Refusal(
      `HTTP ${res.status} from ${admin}: ${text.slice(0, 200)}`,
      res.ok ? EXIT.UNAVAILABLE : exitFor(res.status),
    );
  }
  if (!res.ok && !(accept400 && res.status === 400 && Array.isArray(answer.recentlyLimited))) {
    const hint = res.status === 401 ? ' (set RATEGATE_ADMIN_TOKEN)' : '';
    return new Refusal(`${String(answer.error ?? `HTTP ${res.status}`)}${hint}`, exitFor(res.status));
  }
  return answer;
}

function entryTable(rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return '(none)';
  return table(
    ['SOURCE', 'IP/CIDR/KEY', 'EXPIRES', 'REASON', 'WHO'],
    rows.map((r) => [
      String(r.source),
      String(r.ip ?? r.cidr ?? `${String(r.ban)} ${String(r.key)}`),
      expires(r.expiresAt),
      String(r.reason ?? ''),
      whoCell(r),
    ]),
  );
}

function banTable(rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return '(no bans)';
  return table(
    ['BAN', 'KEY', 'EXPIRES', 'REASON', 'WHO'],
    rows.map((r) => [String(r.ban), String(r.key), expires(r.expiresAt), String(r.reason ?? ''), whoCell(r)]),
  );
}

/** Who made an entry: the config file, or as recorded (`-`: written by an earlier release). */
function whoCell(r: Record<string, unknown>): string {
  if (r.source === 'config') return 'limits.yaml';
  return typeof r.who === 'string' ? r.who : '-';
}

function expires(at: unknown): string {
  if (typeof at !== 'string') return 'never';
  const s = Math.max(0, Math.round((Date.parse(at) - Date.now()) / 1000));
  return `${at} (in ${s >= 3600 ? `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m` : s >= 60 ? `${Math.floor(s / 60)}m${s % 60}s` : `${s}s`})`;
}

function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  return [line(head), ...rows.map(line)].join('\n');
}
