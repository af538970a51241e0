/**
 * @module One access-log line as replay reads it, whatever format it came in: when the request arrived,
 * what it asked for, from where, and the headers the log kept. A format's parser gives one of these or
 * the reason the line cannot be read.
 */

export interface LogRecord {
  /** When the request arrived, epoch ms. */
  time: number;
  method: string;
  /** The request target: path and query, as the client sent it. */
  target: string;
  /** The address that connected (nginx's `$remote_addr`); '' when the log has none. */
  remoteAddr: string;
  /** Logged request headers by lower-case name (X-Forwarded-For, User-Agent …); absent or '-' ones left out. */
  headers: Record<string, string>;
  /** The status the log holds (what answered the request then); absent when the format has none. */
  status?: number;
}

/** A line's parser: the record, or why the line is bad. */
export type LineParser = (line: string) => LogRecord | string;

/** What a format can tell about a request beyond its line, method, target and address. */
export interface FormatFacts {
  readonly name: string;
  /** Lower-case names of the request headers the format logs. */
  readonly headers: ReadonlySet<string>;
  /** Whether the format logs each answer's status (bans on statuses need it). */
  readonly status: boolean;
}

export interface LogFormat extends FormatFacts {
  readonly parse: LineParser;
}

/** Splits `METHOD TARGET PROTOCOL` (the request line nginx logs), or null when it is not one. */
export function splitRequestLine(request: string): { method: string; target: string } | null {
  const sp = request.indexOf(' ');
  if (sp <= 0) return null;
  const end = request.indexOf(' ', sp + 1);
  const target = end < 0 ? request.slice(sp + 1) : request.slice(sp + 1, end);
  if (target === '' || (target[0] !== '/' && target !== '*')) return null;
  const method = request.slice(0, sp);
  for (let i = 0; i < method.length; i++) {
    const c = method.charCodeAt(i);
    if (c < 65 || c > 90) return null; // an RFC 9110 method as clients send them: upper-case letters
  }
  return { method, target };
}
