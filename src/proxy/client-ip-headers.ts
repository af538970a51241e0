/**
 * @module Which client-IP headers reach the upstream: the X-Forwarded-* trio and `Forwarded` are
 * rebuilt by the gateway, other client-IP claims pass only from a trusted proxy.
 */
import type http from 'node:http';
import type { Peer } from '../identity/index.js';
import { parseIp } from '../identity/cidr.js';
import { firstHeader } from '../http/message.js';
import { lastIndexOfCode } from '../routing/last-index.js';

const COLON = 0x3a;
const CLOSE_BRACKET = 0x5d;
import { extendedChain, forwardedForList, type ParsedForwarded } from '../identity/forwarded.js';
import { bareForwardedAddress } from '../identity/ip.js';

/** What the gateway tells the upstream about the client (built per request by forwardedHeaders). */
export interface ForwardedHeaders {
  /** The X-Forwarded-For value to send: the trusted chain plus the peer, or the peer alone. */
  readonly for: string;
  readonly proto: string;
  readonly host: string;
  /** X-Forwarded-Port: a trusted proxy's, else the port of `host` (the client's Host), else the proto's default. */
  readonly port: string;
  /** X-Forwarded-Ssl (`on`/`off`): a trusted proxy's, else whether `proto` is https (Rack reads it before the proto). */
  readonly ssl: string;
  /** Whether the TCP peer is a trusted proxy: only then do its client-IP claims reach the upstream. */
  readonly trusted: boolean;
  /** The `Forwarded` value to send, or undefined to send none (see forwardedToSend). */
  readonly forwarded: string | undefined;
  /** Replaces any X-Request-Id the client sent (the same value when the client's was usable). */
  readonly requestId: string;
}

/** What the request's view already knows: `Forwarded` parsed, and the chain its connection last sent. */
export interface ForwardedFacts extends ParsedForwarded {
  extendedChain?(xff: string, peer: Peer): string;
}

/**
 * X-Forwarded-* and X-Request-Id for the upstream. A trusted proxy's chain is kept and extended;
 * anyone else's is a claim the upstream must not see.
 */
export function forwardedHeaders(
  req: http.IncomingMessage,
  peer: Peer,
  id: string,
  parsed?: ForwardedFacts,
): ForwardedHeaders {
  const xff = req.headers['x-forwarded-for'];
  const { trusted } = peer;
  const fromTrusted = trusted && xff !== undefined;
  const peerAddr = peer.client.address;
  const forwarded = forwardedToSend(trusted, xff, req.headers.forwarded, peerAddr);
  // The listener's own scheme when no trusted proxy names one: https on the TLS listener (server.tls).
  const proto =
    (fromTrusted && firstHeader(req.headers['x-forwarded-proto'])) ||
    ((req.socket as { encrypted?: boolean } | undefined)?.encrypted === true ? 'https' : 'http');
  const host = (fromTrusted && firstHeader(req.headers['x-forwarded-host'])) || req.headers.host || '';
  return {
    for: fromTrusted
      ? typeof xff === 'string' && parsed?.extendedChain !== undefined
        ? parsed.extendedChain(xff, peer)
        : extendedChain(xff, peerAddr)
      : (forwardedAsXff(trusted, xff, req.headers.forwarded, peerAddr, parsed) ?? peerAddr),
    proto,
    host,
    port: (fromTrusted && firstHeader(req.headers['x-forwarded-port'])) || portOf(host, proto),
    ssl: (fromTrusted && firstHeader(req.headers['x-forwarded-ssl'])) || (proto === 'https' ? 'on' : 'off'),
    trusted,
    forwarded,
    requestId: id,
  };
}

/**
 * The port the client connected to as its Host names it (`example.org:8080`, `[::1]:8080`), else the
 * default of `proto`: what Rack would have read without an X-Forwarded-Port, so URLs the app builds
 * keep the port the client used, even behind a Service that maps ports.
 */
function portOf(host: string, proto: string): string {
  const colon = lastIndexOfCode(host, COLON);
  if (colon > lastIndexOfCode(host, CLOSE_BRACKET) && colon < host.length - 1) {
    const port = host.slice(colon + 1);
    if (isDigits(port)) return port;
  }
  return proto === 'https' ? '443' : '80';
}

function isDigits(s: string): boolean {
  if (s.length > 5) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

/**
 * Headers the gateway always drops from the client's request and writes itself (X-Forwarded-Port and
 * -Ssl too: Rack reads the scheme and port from them, so they must agree with the proto sent).
 */
export const REBUILT_HEADERS: ReadonlySet<string> = new Set([
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-forwarded-ssl',
  'forwarded',
]);

/**
 * Security: headers an upstream may read the client's IP from (Rails' RemoteIp reads Client-IP, Rack
 * and many apps X-Real-IP, CDNs' own). From an untrusted peer each is a spoof attempt: the upstream
 * would log, block or limit by an address the client chose.
 */
export const CLIENT_IP_CLAIMS: ReadonlySet<string> = new Set([
  'x-real-ip',
  'true-client-ip',
  'client-ip',
  'x-client-ip',
  'x-cluster-client-ip',
  'cf-connecting-ip',
  'fastly-client-ip',
]);

/**
 * Security: headers Rack and Puma read the request's scheme from (Rack's `scheme`/`ssl?`, Puma's
 * default port): from an untrusted peer a plain-HTTP request would be taken for HTTPS (secure
 * cookies, HSTS, redirects). Passed from a trusted proxy, as the client-IP claims are.
 */
export const SCHEME_CLAIMS: ReadonlySet<string> = new Set(['x-forwarded-scheme', 'front-end-https']);

/**
 * The X-Forwarded-For value for the upstream when a trusted peer sent `Forwarded` and no
 * X-Forwarded-For: its walkable `for=` addresses plus the peer, so Rails' RemoteIp (which reads only
 * X-Forwarded-For) finds the client the gateway counted; undefined otherwise (the caller keeps its
 * usual value).
 */
export function forwardedAsXff(
  trusted: boolean,
  xff: string | string[] | undefined,
  forwarded: string | undefined,
  peerAddr: string,
  parsed?: ParsedForwarded,
): string | undefined {
  if (!trusted || xff !== undefined || forwarded === undefined) return undefined;
  const list = forwardedForList(parsed ?? forwarded, (node) => {
    const bare = bareForwardedAddress(node);
    return bare === null || bare === '' || parseIp(bare) === null ? null : bare;
  });
  list.push(peerAddr);
  return list.join(', ');
}

/**
 * The `Forwarded` header for the upstream: from a trusted peer that sent one and no X-Forwarded-For
 * (the only case in which the gateway counted by it, see identity/ip.ts), that chain plus the peer's
 * own node; otherwise none. So an upstream that prefers `Forwarded` (Rack 3) reads the client the
 * gateway counted, never a chain the gateway ignored.
 */
export function forwardedToSend(
  trusted: boolean,
  xff: string | string[] | undefined,
  forwarded: string | undefined,
  peerAddr: string,
): string | undefined {
  if (!trusted || xff !== undefined || forwarded === undefined) return undefined;
  const node = peerAddr.includes(':') ? `"[${peerAddr}]"` : peerAddr;
  return `${forwarded}, for=${node}`;
}
