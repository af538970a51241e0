/**
 * @module `rategate block|exempt|bans`: the operator's side of the runtime blocks, exemptions and bans,
 * talking to a running gateway's admin API (`--admin URL`, token from RATEGATE_ADMIN_TOKEN). Prints
 * plain tables and one-line confirmations; exits 1 with the API's own message on an error.
 */
import { parseArgs } from 'node:util';

export const GUARD_USAGE = `  rategate block  add IP|CIDR [--for 1h] [--reason TEXT] | list | rm IP|CIDR   [--admin URL] [--json]
  rategate exempt add IP|CIDR [--for 1h] [--reason TEXT] | list | rm IP|CIDR   [--admin URL] [--json]
  rategate bans   list | lift BAN KEY                                          [--admin URL] [--json]`;

const DEFAULT_ADMIN = 'http://127.0.0.1:9464';

type Print = { out: (line: string) => void; err: (line: string) => void };

/** Runs one of the three commands over HTTP; returns the exit code. */
export async function guardCommand(command: 'block' | 'exempt' | 'bans', args: string[], print: Print = { out: console.log, err: console.error }): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: {
      admin: { type: 'string' },
      for: { type: 'string' },
      reason: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: true,
  });
  const [action, ...rest] = positionals;
  if (values.help || action === undefined) {
    (values.help ? print.out : print.err)(`Usage:\n${GUARD_USAGE}\n\nThe admin URL also comes from RATEGATE_ADMIN_URL (default ${DEFAULT_ADMIN}); the token from RATEGATE_ADMIN_TOKEN.`);
    return values.help ? 0 : 1;
  }
  const admin = (values.admin ?? process.env.RATEGATE_ADMIN_URL ?? DEFAULT_ADMIN).replace(/\/+$/, '');
  const section = command === 'block' ? 'blocks' : command === 'exempt' ? 'exemptions' : 'bans';
  const fail = (msg: string): number => (print.err(`rategate ${command} ${action}: ${msg}`), 1);

  let method = 'GET';
  let path = `/admin/${section}`;
  let body: string | undefined;
  if (command === 'bans') {
    if (action === 'lift') {
      if (rest.length !== 2) return fail('expected BAN KEY (as `rategate bans list` shows them)');
      method = 'DELETE';
      path += `/${encodeURIComponent(rest[0]!)}/${encodeURIComponent(rest[1]!)}`;
    } else if (action !== 'list' || rest.length > 0) return fail('expected `list` or `lift BAN KEY`');
  } else if (action === 'add') {
    if (rest.length !== 1) return fail('expected one IP or CIDR');
    method = 'POST';
    const target = rest[0]!;
    body = JSON.stringify({ [target.includes('/') ? 'cidr' : 'ip']: target, ...(values.for ? { for: values.for } : {}), ...(values.reason ? { reason: values.reason } : {}) });
  } else if (action === 'rm') {
    if (rest.length !== 1) return fail('expected one IP or CIDR');
    method = 'DELETE';
    path += `/${encodeURIComponent(rest[0]!)}`;
  } else if (action !== 'list' || rest.length > 0) return fail('expected `add IP|CIDR`, `list` or `rm IP|CIDR`');

  const headers: Record<string, string> = {};
  const token = process.env.RATEGATE_ADMIN_TOKEN?.trim();
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(admin + path, { method, headers, ...(body !== undefined ? { body } : {}), signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    return fail(`cannot reach the admin API at ${admin}: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`);
  }
  const text = await res.text();
  let answer: Record<string, unknown>;
  try {
    answer = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return fail(`HTTP ${res.status} from ${admin}: ${text.slice(0, 200)}`);
  }
  if (!res.ok) {
    const hint = res.status === 401 ? ' (set RATEGATE_ADMIN_TOKEN)' : '';
    return fail(`${String(answer.error ?? `HTTP ${res.status}`)}${hint}`);
  }
  if (values.json) return (print.out(JSON.stringify(answer, null, 2)), 0);
  if (method === 'GET') {
    const rows = (command === 'bans' ? answer.bans : answer.entries) as Record<string, unknown>[];
    print.out(command === 'bans' ? banTable(rows) : entryTable(rows));
    if (answer.scope === 'memory') print.out('(memory store: these entries are this gateway process\'s only)');
    return 0;
  }
  if (command === 'bans') print.out(`lifted ban ${rest[0]} on ${rest[1]}`);
  else if (method === 'DELETE') print.out(`removed ${command === 'block' ? 'block' : 'exemption'} ${rest[0]}`);
  else print.out(`${command === 'block' ? 'blocked' : 'exempted'} ${rest[0]} until ${String(answer.expiresAt)}${answer.scope === 'memory' ? ' (this process only: memory store)' : ' (every replica within 1 s)'}`);
  return 0;
}

function entryTable(rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return '(none)';
  return table(
    ['SOURCE', 'IP/CIDR/KEY', 'EXPIRES', 'REASON'],
    rows.map((r) => [String(r.source), String(r.ip ?? r.cidr ?? `${String(r.ban)} ${String(r.key)}`), expires(r.expiresAt), String(r.reason ?? '')]),
  );
}

function banTable(rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return '(no bans)';
  return table(['BAN', 'KEY', 'EXPIRES', 'REASON'], rows.map((r) => [String(r.ban), String(r.key), expires(r.expiresAt), String(r.reason ?? '')]));
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
