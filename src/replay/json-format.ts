/**
 * @module JSON-lines access logs: rategate's own (`"msg":"request"` lines: `time` (ISO 8601, or epoch ms before 0.2) when the answer was
 * written, `ms` after arrival, `client` the address only under `log.client: clear`), and generic JSON
 * lines with the field names log shippers commonly use (nginx `escape=json` formats, Caddy, Traefik).
 */
import { parseAnyTime, parseIsoTime } from './nginx-time.js';
import { splitRequestLine, type LogFormat, type LogRecord } from './record.js';

type Json = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' && v !== '-' ? v : undefined);

function pick(o: Json, names: readonly string[]): unknown {
  for (const n of names) if (o[n] !== undefined) return o[n];
  return undefined;
}

function parseObject(line: string): Json | string {
  let o: unknown;
  try {
    o = JSON.parse(line);
  } catch {
    return 'not JSON';
  }
  return o !== null && typeof o === 'object' && !Array.isArray(o) ? (o as Json) : 'not a JSON object';
}

/** rategate's access log. Lines that are not request lines (start-up, reloads) are bad lines. */
export const RATEGATE_FORMAT: LogFormat = {
  name: 'rategate',
  headers: new Set(),
  status: true,
  parse(line) {
    const o = parseObject(line);
    if (typeof o === 'string') return o;
    if (o.msg !== 'request') return 'not a request line (msg is not "request")';
    const method = str(o.method);
    const path = str(o.path);
    // ISO 8601 since issue 40 (`"time":"2026-…Z"`), epoch ms before: both are read.
    const time = typeof o.time === 'number' ? o.time : typeof o.time === 'string' ? parseIsoTime(o.time) : NaN;
    if (Number.isNaN(time) || method === undefined || path === undefined) return 'no time, method or path';
    const ms = typeof o.ms === 'number' ? o.ms : 0;
    const rec: LogRecord = {
      time: Math.round(time - ms),
      method,
      target: path,
      remoteAddr: str(o.client) ?? '',
      headers: {},
    };
    if (typeof o.status === 'number') rec.status = o.status;
    return rec;
  },
};

const TIME = ['time', 'timestamp', '@timestamp', 'ts', 'time_iso8601', 'time_local', 'msec'];
const METHOD = ['method', 'request_method', 'http_method'];
const TARGET = ['request_uri', 'uri', 'url', 'path', 'request_path'];
const STATUS = ['status', 'status_code', 'response_status', 'DownstreamStatus'];
const ADDR = ['remote_addr', 'remote_ip', 'client_ip', 'ip', 'client', 'ClientHost'];
const HEADERS: readonly (readonly [string, readonly string[]])[] = [
  ['x-forwarded-for', ['http_x_forwarded_for', 'x_forwarded_for', 'xff', 'forwarded_for']],
  ['user-agent', ['http_user_agent', 'user_agent', 'useragent']],
  ['referer', ['http_referer', 'referer', 'referrer']],
];

/** Generic JSON lines: the first field found of each list above; `request` (a request line) when no method and target. */
export const JSON_FORMAT: LogFormat = {
  name: 'json',
  headers: new Set(HEADERS.map(([h]) => h)),
  status: true,
  parse(line) {
    const o = parseObject(line);
    if (typeof o === 'string') return o;
    const time = parseAnyTime(pick(o, TIME));
    if (Number.isNaN(time)) return 'no readable time';
    let method = str(pick(o, METHOD));
    let target = str(pick(o, TARGET));
    const request = str(o.request);
    if ((method === undefined || target === undefined) && request !== undefined) {
      const r = splitRequestLine(request);
      method ??= r?.method;
      target ??= r?.target;
    }
    if (method === undefined || target === undefined) return 'no method and target';
    const query = str(pick(o, ['args', 'query_string', 'query']));
    if (query !== undefined && !target.includes('?')) target += `?${query}`;
    const headers: Record<string, string> = {};
    for (const [h, names] of HEADERS) {
      const v = str(pick(o, names));
      if (v !== undefined) headers[h] = v;
    }
    const rec: LogRecord = {
      time,
      method: method.toUpperCase(),
      target,
      remoteAddr: str(pick(o, ADDR)) ?? '',
      headers,
    };
    const status = Number(pick(o, STATUS));
    if (Number.isInteger(status) && status >= 100 && status <= 999) rec.status = status;
    return rec;
  },
};
