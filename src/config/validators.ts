/** @module Checks for the config's string formats (addresses, URLs, CIDRs); each returns an error or null. */
import ipaddr from 'ipaddr.js';

export interface HostPort {
  /** Without brackets for IPv6. */
  readonly host: string;
  readonly port: number;
}

const HOSTNAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

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

export function checkStoreUrl(value: string): string | null {
  if (value === 'memory') return null;
  const bad = `invalid store "${value}" (use memory, redis://HOST:PORT, rediss://HOST:PORT or redis-cluster://HOST:PORT,HOST:PORT)`;
  if (value.startsWith('redis-cluster://')) {
    const nodes = value.slice('redis-cluster://'.length).split(',');
    for (const node of nodes) {
      const hp = parseHostPort(node);
      if (hp === undefined || hp.port === 0) return bad;
    }
    return null;
  }
  if (value.startsWith('redis://') || value.startsWith('rediss://')) {
    if (!URL.canParse(value)) return bad;
    if (new URL(value).hostname === '') return bad;
    return null;
  }
  return bad;
}

/** ipaddr.js also accepts `0x7f.1` and `127.1`; a config should say what it means plainly. */
function isStrictIPv4(value: string): boolean {
  return ipaddr.IPv4.isValidFourPartDecimal(value);
}

export function isIp(value: string): boolean {
  return isStrictIPv4(value) || (value.includes(':') && ipaddr.IPv6.isValid(value));
}

export function isCidr(value: string): boolean {
  const slash = value.indexOf('/');
  if (slash < 0) return false;
  const addr = value.slice(0, slash);
  const bits = value.slice(slash + 1);
  if (!/^[0-9]{1,3}$/.test(bits)) return false;
  if (isStrictIPv4(addr)) return Number(bits) <= 32;
  return addr.includes(':') && ipaddr.IPv6.isValid(addr) && Number(bits) <= 128;
}

export function checkIpOrCidr(value: string): string | null {
  return isIp(value) || isCidr(value) ? null : `invalid IP address or CIDR "${value}"`;
}

export function checkTrustedProxy(value: string): string | null {
  if (value === 'loopback' || value === 'private') return null;
  return isIp(value) || isCidr(value)
    ? null
    : `invalid trusted proxy "${value}" (use loopback, private, an IP address or a CIDR)`;
}

/** RFC 7230 token: what an HTTP header name may be. */
export const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

/** Wildcard hosts overlap every other host on the same port. */
export function sameSocket(a: HostPort, b: HostPort): boolean {
  if (a.port === 0 || a.port !== b.port) return false;
  const any = (h: string): boolean => h === '0.0.0.0' || h === '::';
  return a.host === b.host || any(a.host) || any(b.host);
}
