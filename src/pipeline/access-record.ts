/** @module The access log's line of one request, and its `log.client` field (off by default; a digest names a client without storing its IP). */
import { createHash } from 'node:crypto';
import type http from 'node:http';
import type { RequestView } from './request-view.js';
import type { Decision, DecisionKind } from './decision.js';
import type { Decider } from '../limiter/types.js';
import { displayKey, KINDS, PART_SEPARATOR } from '../keys/index.js';
import { loggedPath } from '../observability/log-redact.js';

/**
 * The client field for the access log, or undefined (`off`). `digest`: the first 16 hex digits of the
 * address's SHA-256 (stable per IP, enough to group lines); `clear`: the address.
 */
export function clientField(v: RequestView): string | undefined {
  const mode = v.policy.snapshot.config.log.client;
  if (mode === 'off') return undefined;
  const address = v.client.address;
  return mode === 'clear' ? address : digest16(address);
}

const digest16 = (text: string): string => createHash('sha256').update(text).digest('hex').slice(0, 16);

/**
 * On a 429 by a rule keyed on more than the IP (`per: [signature:domain, ip]`, a header…), the key it
 * counted, part by part as /admin/limited shows it (`signature mastodon.example + 203.0.113.7`); under
 * `log.client: digest` an IP or account part is its digest prefix. Only when `log.client` is on.
 */
export function keyField(v: RequestView, rule: Decision['rejectedBy']): string | undefined {
  const mode = v.policy.snapshot.config.log.client;
  if (mode === 'off' || rule === undefined || (rule.key.parts.length === 1 && rule.key.parts[0]!.kind === 'ip'))
    return undefined;
  const tag = rule.key.tag(v);
  if (tag === null) return undefined;
  if (mode === 'clear') return displayKey(tag);
  return displayKey(tag.split(PART_SEPARATOR).map(digestPersonal).join(PART_SEPARATOR));
}

/** An IP or account part of a tag as its digest prefix (`log.client: digest` logs neither). */
function digestPersonal(tag: string): string {
  for (const kind of [KINDS.ip.tag, KINDS.account.tag])
    if (tag.startsWith(`${kind}:`)) return `${kind}:${digest16(tag.slice(kind.length + 1))}`;
  return tag;
}

/** One line per request for the access log; no token, no account, no client IP. */
export interface RequestRecord {
  /** The request's `X-Request-Id`, or the one the gateway made and forwarded. */
  id: string;
  method: string;
  /** The path, with its query when the request was refused before normalization: credentials redacted (observability/log-redact.ts). */
  path: string;
  /** What the client spoke: `http/1.1`, `http/1.0`, `h2` (over TLS) or `h2c` (HTTP/2 with prior knowledge on plain TCP). */
  protocol: string;
  status: number;
  /** The rules whose buckets the request was counted in. */
  rules: readonly string[];
  /** On a 429: the rule that rejected it. */
  rule?: string;
  decision: DecisionKind;
  /** Who decided, when the limiter was asked: store, lease, cache, fallback (the fault policy), memory. */
  decider?: Decider;
  /** `log.client: digest | clear`: the client IP's digest prefix, or the IP itself. */
  client?: string;
  /** On a 429 by a rule keyed on more than the IP, with `log.client` on: its key, part by part. */
  key?: string;
  /** Milliseconds from the request's arrival to its answer's head, to the microsecond. */
  ms: number;
  /** The request body's length as declared (Content-Length; 0 without a body); absent for a chunked body. */
  bytesIn?: number;
  /** The answer body's length as declared in its head (Content-Length); absent when chunked (the line is written at the head). */
  bytesOut?: number;
  error?: string;
}

/** A Content-Length as a number, or undefined when absent, repeated or not a length. */
function lengthOf(value: string | readonly string[] | number | undefined): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value !== 'string' || value === '') return undefined;
  const n = Number(value);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/**
 * The access-log line of a finished exchange. `end`: the answer's status, the forwarding's error when it
 * failed, and the answer body's declared length; `elapsedMs`: from the request's arrival to now.
 */
export function recordOf(
  req: http.IncomingMessage,
  id: string,
  view: RequestView,
  d: Decision,
  end: {
    readonly status: number;
    readonly error: string | undefined;
    readonly bodyLength?: string | readonly string[] | number | undefined;
  },
  elapsedMs: number,
): RequestRecord {
  const record: RequestRecord = {
    id,
    method: req.method ?? '',
    // A normalized path has no query: the test here, not behind the call (the call alone cost ~15 ns per record, bench/stages.ts).
    path: view.path.indexOf('?') === -1 ? view.path : loggedPath(view.path),
    protocol: protocolOf(req),
    status: end.status,
    rules: d.rules.map((rule) => rule.name),
    decision: d.kind,
    ms: Math.round(elapsedMs * 1000) / 1000,
  };
  const headers = req.headers;
  const bytesIn =
    headers['content-length'] !== undefined
      ? lengthOf(headers['content-length'])
      : headers['transfer-encoding'] === undefined
        ? 0
        : undefined;
  if (bytesIn !== undefined) record.bytesIn = bytesIn;
  const bytesOut = lengthOf(end.bodyLength);
  if (bytesOut !== undefined) record.bytesOut = bytesOut;
  // A 503 of `onError: deny` is the fault policy's decision too.
  const decider = d.outcome?.decider ?? (d.kind === 'store_unavailable' ? 'fallback' : undefined);
  if (decider !== undefined) record.decider = decider;
  if (d.rejectedBy !== undefined) record.rule = d.rejectedBy.name;
  if (end.error !== undefined) record.error = end.error;
  const client = clientField(view);
  if (client !== undefined) record.client = client;
  const key = keyField(view, d.rejectedBy);
  if (key !== undefined) record.key = key;
  return record;
}

/** The access line's `protocol`: read from what node parsed, no string built per request. */
export function protocolOf(req: http.IncomingMessage): string {
  if (req.httpVersionMajor === 2)
    return (req.socket as { encrypted?: boolean } | null)?.encrypted === true ? 'h2' : 'h2c';
  return req.httpVersionMinor === 0 ? 'http/1.0' : 'http/1.1';
}
