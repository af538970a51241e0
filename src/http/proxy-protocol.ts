/**
 * @module The PROXY protocol (HAProxy's, v1 text and v2 binary) on the proxy listener: a connection from a
 * peer named in `server.proxyProtocol.from` must open with a PROXY header, whose source address becomes
 * the connection's peer before the HTTP parser sees a byte; `clients.trustedProxies` then applies as usual.
 * Connections from any other peer go to the HTTP parser untouched, which answers a PROXY header 400 and
 * closes: nobody else can name a client address this way.
 */
import type http from 'node:http';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import type { CidrSet } from '../identity/cidr.js';
import { readFirstBytes } from './first-bytes.js';

/** v2's fixed opening: `\r\n\r\n\0\r\nQUIT\n`. */
const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
const V1_PREFIX = Buffer.from('PROXY ', 'latin1');
/** v1's longest line, CRLF included (the spec's own bound). */
const V1_MAX = 107;
/** v2's header is 16 bytes and its address block; TLVs (HAProxy's unique-id, SSL facts) beyond this are refused. */
const V2_MAX_BLOCK = 2048;

export type ProxyHeader =
  | { readonly kind: 'incomplete' }
  | { readonly kind: 'invalid'; readonly reason: string }
  /** `source`: the client's address; undefined when the header says to keep the connection's own (LOCAL, UNKNOWN, UNIX, UDP). */
  | { readonly kind: 'header'; readonly length: number; readonly source: string | undefined };

const INCOMPLETE: ProxyHeader = { kind: 'incomplete' };
const invalid = (reason: string): ProxyHeader => ({ kind: 'invalid', reason });

/** Reads a PROXY header at the start of `buf`, which holds what the connection has sent so far. */
export function parseProxyHeader(buf: Buffer): ProxyHeader {
  if (startsLike(buf, V2_SIGNATURE)) return buf.length < V2_SIGNATURE.length ? INCOMPLETE : parseV2(buf);
  if (startsLike(buf, V1_PREFIX)) return buf.length < V1_PREFIX.length ? INCOMPLETE : parseV1(buf);
  return invalid('the connection does not open with a PROXY header');
}

/** Whether `buf` and `prefix` agree on their common length (a short `buf` may still become the prefix). */
function startsLike(buf: Buffer, prefix: Buffer): boolean {
  const n = Math.min(buf.length, prefix.length);
  return buf.subarray(0, n).equals(prefix.subarray(0, n));
}

function parseV1(buf: Buffer): ProxyHeader {
  const end = buf.subarray(0, V1_MAX).indexOf('\r\n');
  if (end < 0) return buf.length >= V1_MAX ? invalid('a v1 header longer than 107 bytes') : INCOMPLETE;
  const parts = buf.toString('latin1', V1_PREFIX.length, end).split(' ');
  const length = end + 2;
  if (parts[0] === 'UNKNOWN') return { kind: 'header', length, source: undefined };
  if (parts.length !== 5 || (parts[0] !== 'TCP4' && parts[0] !== 'TCP6')) return invalid('a malformed v1 header');
  const [family, source, destination, sourcePort, destinationPort] = parts as [string, string, string, string, string];
  const isFamily = family === 'TCP4' ? net.isIPv4 : net.isIPv6;
  if (!isFamily(source) || !isFamily(destination) || !isPort(sourcePort) || !isPort(destinationPort))
    return invalid('a malformed v1 header');
  return { kind: 'header', length, source: ipaddr.parse(source).toString() };
}

/** A port as v1 writes it: decimal, no leading zero, at most 65535. */
function isPort(text: string): boolean {
  return /^(0|[1-9][0-9]{0,4})$/.test(text) && Number(text) <= 65535;
}

function parseV2(buf: Buffer): ProxyHeader {
  if (buf.length < 16) return INCOMPLETE;
  const versionCommand = buf[12]!;
  const familyProtocol = buf[13]!;
  const blockLength = buf.readUInt16BE(14);
  if (versionCommand >> 4 !== 2) return invalid('a v2 header of another version');
  const command = versionCommand & 0x0f;
  if (command > 1) return invalid('a v2 header with an unknown command');
  if (blockLength > V2_MAX_BLOCK)
    return invalid(`a v2 header with a ${blockLength}-byte block (at most ${V2_MAX_BLOCK})`);
  if (buf.length < 16 + blockLength) return INCOMPLETE;
  const length = 16 + blockLength;
  // LOCAL: the balancer's own connection (a health check); then the connection's own address stands.
  if (command === 0) return { kind: 'header', length, source: undefined };
  if (familyProtocol === 0x11) {
    if (blockLength < 12) return invalid('a v2 TCP/IPv4 header too short for its addresses');
    return { kind: 'header', length, source: ipaddr.fromByteArray([...buf.subarray(16, 20)]).toString() };
  }
  if (familyProtocol === 0x21) {
    if (blockLength < 36) return invalid('a v2 TCP/IPv6 header too short for its addresses');
    return { kind: 'header', length, source: ipaddr.fromByteArray([...buf.subarray(16, 32)]).toString() };
  }
  // UNSPEC, UNIX or UDP: the spec says to keep the connection's own address.
  return { kind: 'header', length, source: undefined };
}

export type ProxyRefusal = 'invalid' | 'timeout';

/**
 * Makes `server` read a PROXY header first on every connection from `from`, within `timeoutMs`; a
 * connection from `from` without a valid one is closed (`onRefused` told why). Nothing changes for other
 * peers, nor at all when `from` is empty. What a connection may send before its header is bounded by the
 * header's own bounds (107 bytes, or 16 + 2048), so a listed peer cannot make the gateway hold more.
 */
export function requireProxyHeader(
  server: http.Server,
  from: CidrSet,
  timeoutMs: number,
  onRefused: (reason: ProxyRefusal) => void,
): void {
  if (from.empty) return;
  // node:http's own connection listener (and any added before): handed the socket once its header is read.
  const listeners = server.listeners('connection') as Array<(socket: net.Socket) => void>;
  server.removeAllListeners('connection');
  const handOver = (socket: net.Socket): void => {
    for (const listener of listeners) listener.call(server, socket);
  };
  server.on('connection', (socket: net.Socket) => {
    if (!from.contains(socket.remoteAddress ?? '')) return handOver(socket);
    readHeader(socket, timeoutMs, onRefused, handOver);
  });
}

function readHeader(
  socket: net.Socket,
  timeoutMs: number,
  onRefused: (reason: ProxyRefusal) => void,
  handOver: (socket: net.Socket) => void,
): void {
  const refuse = (reason: ProxyRefusal): void => {
    onRefused(reason);
    socket.destroy();
  };
  readFirstBytes(
    socket,
    timeoutMs,
    () => refuse('timeout'),
    (held, stop) => {
      const header = parseProxyHeader(held);
      if (header.kind === 'incomplete') return;
      stop();
      if (header.kind === 'invalid') return refuse('invalid');
      socket.pause();
      // What followed the header is the first HTTP bytes: back to the front of the stream for the parser.
      if (header.length < held.length) socket.unshift(held.subarray(header.length));
      // The one place the gateway reads the peer is socket.remoteAddress: the header's source shadows it.
      if (header.source !== undefined)
        Object.defineProperty(socket, 'remoteAddress', { value: header.source, configurable: true });
      handOver(socket);
      socket.resume();
    },
  );
}
