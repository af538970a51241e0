/** @module Checks for the config's string formats (addresses, URLs, CIDRs); each returns an error or null. */
import ipaddr from 'ipaddr.js';
import { isCidrEntry } from '../../identity/cidr.js';
import { storeUrlProblem } from '../store-url.js';

export interface HostPort {
  /** Without brackets for IPv6. */
  readonly host: string;
  readonly port: number;
}

const HOSTNAME =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** Parses `HOST:PORT` (`[::]:8080` for IPv6); port 0 asks the OS for a free port (tests use it). */
export function parseHostPort(value: string): HostPort | undefined {
  let host: string;
  let portText: string;
  if (value.startsWith('[')) {
    const close = value.indexOf(']');
    if (close < 0 || value[close + 1] !== ':') return undefined;
    host = value.slice(1, close);
    portText = value.slice(close + 2);
    if (!ipaddr.IPv6.isValid(host)) return undefined;
  } else {
    const colon = value.lastIndexOf(':');
    if (colon <= 0) return undefined;
    host = value.slice(0, colon);
    portText = value.slice(colon + 1);
    if (host.includes(':')) return undefined; // bare IPv6 without brackets is ambiguous
    if (!isStrictIPv4(host) && !(HOSTNAME.test(host) && !/^[0-9.]+$/.test(host))) return undefined;
  }
  if (!/^[0-9]{1,5}$/.test(portText)) return undefined;
  const port = Number(portText);
  if (port > 65535) return undefined;
  return { host, port };
}

export function checkListen(value: string): string | null {
  return parseHostPort(value) === undefined
    ? `invalid address "${value}" (use HOST:PORT, e.g. 0.0.0.0:8080 or [::]:8080)`
    : null;
}

export function checkUpstreamUrl(value: string): string | null {
  if (value === 'builtin') return null;
  const bad = `invalid upstream "${value}" (use builtin or an http:// or https:// URL)`;
  if (!URL.canParse(value)) return bad;
  const url = new URL(value);
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') return bad;
  if (url.search !== '' || url.hash !== '') return `upstream URL "${value}" must not have a query or fragment`;
  return null;
}

/** A named upstream (`upstreams.NAME.url`): an origin only, since the request path is sent as it came. */
export function checkNamedUpstreamUrl(value: string): string | null {
  if (value === 'builtin')
    return 'builtin is the top-level upstream only; a named upstream needs an http:// or https:// URL';
  const problem = checkUpstreamUrl(value);
  if (problem !== null) return problem;
  const path = new URL(value).pathname;
  return path === '/' || path === '' ? null : `upstream URL "${value}" must not have a path (requests keep theirs)`;
}

/** The store factory parses the URL with the same function, so check and serve agree. */
export function checkStoreUrl(value: string): string | null {
  return storeUrlProblem(value);
}

/** ipaddr.js also accepts `0x7f.1` and `127.1`; a config should say what it means plainly. */
function isStrictIPv4(value: string): boolean {
  return ipaddr.IPv4.isValidFourPartDecimal(value);
}

export function checkIpOrCidr(value: string): string | null {
  return isCidrEntry(value, false) ? null : `invalid IP address or CIDR "${value}"`;
}

/** An admin.allowedHosts entry: a host name or an IP address (IPv6 with or without brackets), no port. */
export function checkAdminHost(value: string): string | null {
  const bare = value.startsWith('[') && value.endsWith(']') ? value.slice(1, -1) : value;
  if (HOSTNAME.test(value) || (bare.includes(':') && ipaddr.IPv6.isValid(bare))) return null;
  return `invalid host "${value}" (a host name or an IP address, without a port: e.g. rategate-metrics.ops.svc or 10.0.0.5)`;
}

export function checkTrustedProxy(value: string): string | null {
  return isCidrEntry(value, true)
    ? null
    : `invalid trusted proxy "${value}" (use loopback, private, an IP address or a CIDR)`;
}

export function checkProxyProtocolPeer(value: string): string | null {
  return isCidrEntry(value, true)
    ? null
    : `invalid PROXY protocol peer "${value}" (use loopback, private, an IP address or a CIDR)`;
}

/** RFC 7230 token: what an HTTP header name may be. */
export const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

/** Wildcard hosts overlap every other host on the same port. */
export function sameSocket(a: HostPort, b: HostPort): boolean {
  if (a.port === 0 || a.port !== b.port) return false;
  const any = (h: string): boolean => h === '0.0.0.0' || h === '::';
  return a.host === b.host || any(a.host) || any(b.host);
}
