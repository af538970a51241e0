/**
 * @module The request head sent upstream: the client's headers less the hop-by-hop ones, the ones the
 * gateway rebuilds (X-Forwarded-*, Host, X-Request-Id, the trace context) and the claims it does not trust.
 */
import type http from 'node:http';
import { connectionListed, HOP_BY_HOP } from './hop-by-hop.js';
import { CLIENT_IP_CLAIMS, REBUILT_HEADERS, SCHEME_CLAIMS, type ForwardedHeaders } from './client-ip-headers.js';
import { rackSpelling } from '../http/header-spelling.js';

/**
 * What a request header is to the upstream copy, by lower-case name folded as Puma folds it (`_` =
 * `-`, http/header-spelling.ts): one look-up per header; absent: copied.
 */
const HOP = 1 << 0;
/** Host (the upstream's, unless `clientHost`), X-Request-Id (replaced), Expect (answered by the gateway: undici refuses to send it). */
const REBUILT = 1 << 1;
const HOST = 1 << 2;
/** X-Forwarded-* and Forwarded: rebuilt by the gateway (client-ip-headers.ts). */
const FORWARDING = 1 << 3;
/** Client-IP and scheme claims other than those: passed from a trusted proxy only. */
const CLAIM = 1 << 4;
const CONTENT_LENGTH = 1 << 5;
const METHOD_OVERRIDE = 1 << 6;
/** traceparent, tracestate: replaced by the gateway's when tracing is on (the client's is their parent). */
const TRACE = 1 << 7;
const SPECIAL: ReadonlyMap<string, number> = (() => {
  const m = new Map<string, number>();
  const add = (name: string, flag: number) => m.set(name, (m.get(name) ?? 0) | flag);
  for (const n of HOP_BY_HOP) add(n, HOP);
  for (const n of ['host', 'x-request-id', 'expect']) add(n, REBUILT);
  add('host', HOST);
  for (const n of REBUILT_HEADERS) add(n, FORWARDING);
  for (const n of CLIENT_IP_CLAIMS) add(n, CLAIM);
  for (const n of SCHEME_CLAIMS) add(n, CLAIM);
  add('content-length', CONTENT_LENGTH);
  add('x-http-method-override', METHOD_OVERRIDE);
  for (const n of ['traceparent', 'tracestate']) add(n, TRACE);
  return m;
})();

/** The SPECIAL names of one shape (rarely more than one) with their flags. */
type Candidates = readonly (readonly [name: string, flags: number])[];

/**
 * SPECIAL by the length and first letter (lower-cased) of each name, as an array indexed by that shape:
 * a header whose shape is not here is none of them, and is copied without a lower-cased copy of its
 * name (most headers). One that is, is compared with its few candidates by `===`: a Map look-up by a
 * fresh string hashes it and compares it in the runtime (~360 instructions, callgrind). An underscore
 * spelling has the same shape (folding keeps the length; every SPECIAL name starts with a letter,
 * which `_` never replaces), so it always takes the slow path.
 */
const BY_SHAPE: readonly (Candidates | undefined)[] = (() => {
  const table: [string, number][][] = [];
  for (const [name, flags] of SPECIAL) (table[shapeOf(name)] ??= []).push([name, flags]);
  return Array.from({ length: table.length }, (_, i) => table[i]);
})();

/** A header name's length and its first character with bit 0x20 set (lower case for a letter). */
function shapeOf(name: string): number {
  return name.length === 0 ? 0 : (name.length << 7) | (name.charCodeAt(0) | 0x20);
}

/** The SPECIAL names `name`'s shape could be; undefined: none. */
function candidatesOf(name: string): Candidates | undefined {
  const shape = shapeOf(name);
  return shape < BY_SHAPE.length ? BY_SHAPE[shape] : undefined;
}

function flagsAmong(candidates: Candidates, folded: string): number | undefined {
  for (let i = 0; i < candidates.length; i++) if (candidates[i]![0] === folded) return candidates[i]![1];
  return undefined;
}

export function upstreamRequestHeaders(
  req: http.IncomingMessage,
  forwarded: ForwardedHeaders,
  hasBody: boolean,
  dropOverrideHeader: boolean,
  clientHost: boolean,
  trace: readonly string[] | null,
): string[] {
  const raw = req.rawHeaders;
  const listed = connectionListed(req.headers.connection);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const candidates = candidatesOf(name);
    if (listed === null && candidates === undefined) {
      out.push(name, raw[i + 1]!);
      continue;
    }
    const lower = name.toLowerCase();
    const folded = rackSpelling(lower);
    const f = candidates === undefined ? undefined : flagsAmong(candidates, folded);
    if (
      f !== undefined &&
      !copied(f, forwarded.trusted, hasBody, dropOverrideHeader, clientHost, folded !== lower, trace !== null)
    )
      continue;
    if (listed !== null && listed.has(folded)) continue;
    out.push(name, raw[i + 1]!);
  }
  out.push(
    'x-forwarded-for',
    forwarded.for,
    'x-forwarded-proto',
    forwarded.proto,
    'x-forwarded-host',
    forwarded.host,
    'x-forwarded-port',
    forwarded.port,
    'x-forwarded-ssl',
    forwarded.ssl,
    'x-request-id',
    forwarded.requestId,
  );
  if (forwarded.forwarded !== undefined) out.push('forwarded', forwarded.forwarded);
  if (trace !== null) for (const h of trace) out.push(h);
  return out;
}

/**
 * Whether a request header with these SPECIAL flags goes upstream as it is. Host is the upstream's
 * (undici sets it; `clientHost`: the client's, kept); the client's also goes in X-Forwarded-Host.
 * Security: an `underscored` spelling of a special name is dropped, but for a claim a trusted proxy
 * passes: the gateway reads only the dashed spelling (the method override, Content-Length), and Puma
 * would read the other as the same header, so the app could see a value the gateway never judged.
 */
function copied(
  f: number,
  trusted: boolean,
  hasBody: boolean,
  dropOverrideHeader: boolean,
  clientHost: boolean,
  underscored: boolean,
  traced: boolean,
): boolean {
  if ((f & (HOP | FORWARDING)) !== 0) return false;
  if ((f & TRACE) !== 0) return !traced;
  if (underscored) return (f & CLAIM) !== 0 && trusted;
  if ((f & REBUILT) !== 0 && !(clientHost && (f & HOST) !== 0)) return false;
  if ((f & CLAIM) !== 0 && !trusted) return false;
  if ((f & CONTENT_LENGTH) !== 0 && !hasBody) return false;
  return !((f & METHOD_OVERRIDE) !== 0 && dropOverrideHeader);
}
