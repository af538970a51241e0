/**
 * @module An nginx `log_format` string compiled to a line parser. The format is cut into literals and
 * variables once; a line is then read left to right, each variable ending where the next literal starts
 * (indexOf, no regular expression: no line can make it backtrack). nginx escapes `"`, `\` and control
 * bytes in variables as `\xNN`, so a quoted variable cannot hold its closing quote.
 */
import { parseIsoTime, parseTimeLocal } from './nginx-time.js';
import { splitRequestLine, type LogFormat, type LogRecord } from './record.js';

/** nginx's predefined `combined` format (also what Mastodon's dist/nginx.conf logs: it sets no log_format). */
export const COMBINED =
  '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"';

type Segment = { readonly lit: string } | { readonly name: string };

/** Cuts a log_format string into literals and variable names (`$name` or `${name}`). */
function segments(format: string): Segment[] {
  const out: Segment[] = [];
  let lit = '';
  for (let i = 0; i < format.length;) {
    const c = format[i]!;
    if (c !== '$') {
      lit += c;
      i++;
      continue;
    }
    const braced = format[i + 1] === '{';
    let j = braced ? i + 2 : i + 1;
    while (j < format.length && /[A-Za-z0-9_]/.test(format[j]!)) j++;
    const name = format.slice(braced ? i + 2 : i + 1, j);
    if (name === '' || (braced && format[j] !== '}')) throw new Error(`log_format: a "$" at ${i} names no variable`);
    if (lit !== '') out.push({ lit });
    lit = '';
    out.push({ name: name.toLowerCase() });
    i = braced ? j + 1 : j;
  }
  if (lit !== '') out.push({ lit });
  return out;
}

/** Undoes nginx's `\xNN` escapes (only when the value has a backslash: the usual value has none). */
function unescape(v: string): string {
  if (v.indexOf('\\x') < 0) return v;
  return v.replace(/\\x([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
}

/** Where each variable's value goes in a record. */
type Slot = (
  r: Partial<LogRecord> & { headers: Record<string, string> },
  v: string,
  ctx: { request?: string; uri?: string; args?: string },
) => void;

function slotFor(name: string): Slot | null {
  if (name === 'remote_addr') return (r, v) => void (r.remoteAddr = v);
  if (name === 'time_local') return (r, v) => void (r.time = parseTimeLocal(v));
  if (name === 'time_iso8601') return (r, v) => void (r.time = parseIsoTime(v));
  if (name === 'msec') return (r, v) => void (r.time = Math.round(Number(v) * 1000));
  if (name === 'status') return (r, v) => void (r.status = Number(v));
  if (name === 'request') return (_, v, ctx) => void (ctx.request = v);
  if (name === 'request_method') return (r, v) => void (r.method = v);
  if (name === 'request_uri') return (r, v) => void (r.target = unescape(v));
  if (name === 'uri') return (_, v, ctx) => void (ctx.uri = v);
  if (name === 'args' || name === 'query_string') return (_, v, ctx) => void (ctx.args = v);
  if (name.startsWith('http_')) {
    const header = name.slice(5).replace(/_/g, '-');
    return (r, v) => {
      if (v !== '-' && v !== '') r.headers[header] = unescape(v);
    };
  }
  return null;
}

/** Compiles `format` (a log_format string); throws an Error saying what is missing or ambiguous. */
export function compileNginxFormat(format: string, name = `nginx:${format}`): LogFormat {
  const segs = segments(format);
  const names = segs.flatMap((s) => ('name' in s ? [s.name] : []));
  const has = (n: string) => names.includes(n);
  if (!has('time_local') && !has('time_iso8601') && !has('msec'))
    throw new Error('log_format: no time ($time_local, $time_iso8601 or $msec)');
  if (!has('request') && !(has('request_method') && (has('request_uri') || has('uri'))))
    throw new Error('log_format: no request ($request, or $request_method with $request_uri)');
  for (let i = 0; i + 1 < segs.length; i++)
    if ('name' in segs[i]! && 'name' in segs[i + 1]!)
      throw new Error(
        `log_format: $${(segs[i] as { name: string }).name} and the next variable have nothing between them`,
      );
  const plan = segs.map((s) => ('lit' in s ? s.lit : slotFor(s.name)));
  const headers = new Set(names.filter((n) => n.startsWith('http_')).map((n) => n.slice(5).replace(/_/g, '-')));
  return { name, headers, status: has('status'), parse: (line) => parseWith(plan, line) };
}

/** Reads one line by the compiled plan: literals must match where they stand. */
function parseWith(plan: readonly (string | Slot | null)[], line: string): LogRecord | string {
  const r: Partial<LogRecord> & { headers: Record<string, string> } = { headers: {}, remoteAddr: '' };
  const ctx: { request?: string; uri?: string; args?: string } = {};
  let pos = 0;
  for (let i = 0; i < plan.length; i++) {
    const step = plan[i]!;
    if (typeof step === 'string') {
      if (!line.startsWith(step, pos)) return `expected ${JSON.stringify(step)} at column ${pos + 1}`;
      pos += step.length;
      continue;
    }
    const next = plan[i + 1] as string | undefined;
    const end = next === undefined ? line.length : line.indexOf(next, pos);
    if (end < 0) return `expected ${JSON.stringify(next)} after column ${pos + 1}`;
    if (step !== null) step(r, line.slice(pos, end), ctx);
    pos = end;
  }
  return finish(r, ctx);
}

function finish(
  r: Partial<LogRecord> & { headers: Record<string, string> },
  ctx: { request?: string; uri?: string; args?: string },
): LogRecord | string {
  if (r.time === undefined || Number.isNaN(r.time)) return 'no readable time';
  if (ctx.request !== undefined && (r.method === undefined || r.target === undefined)) {
    const req = splitRequestLine(unescape(ctx.request));
    if (req === null) return `not a request line: ${JSON.stringify(ctx.request.slice(0, 60))}`;
    r.method ??= req.method;
    r.target ??= req.target;
  }
  if (r.target === undefined && ctx.uri !== undefined) r.target = ctx.args ? `${ctx.uri}?${ctx.args}` : ctx.uri;
  if (r.method === undefined || r.target === undefined || r.target === '') return 'no request';
  if (r.status !== undefined && !(r.status >= 100 && r.status <= 999)) return 'no readable status';
  return r as LogRecord;
}
