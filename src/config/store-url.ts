/**
 * @module The one parser of `store.url`: config validation (`rategate check` and `serve` alike), the
 * store factory and the Redis connection all read a URL through it, so what is accepted is exactly what
 * the store connects to. It lives in config/ so that limiter/ imports it and config/ never imports
 * limiter/ (no folder cycle).
 *
 * Accepted: `memory`; `redis://` or `rediss://` (TLS) `[USER[:PASSWORD]@]HOST[:PORT][/DB]`;
 * `redis-cluster://` or `rediss-cluster://` (TLS) `[USER[:PASSWORD]@]HOST:PORT,HOST:PORT…` (seed nodes,
 * each with its port; a cluster has only database 0, so no `/DB`); `redis-sentinel://` or
 * `rediss-sentinel://` (TLS) `[USER[:PASSWORD]@]HOST[:PORT],HOST[:PORT]…/MASTERNAME[/DB]` (the sentinels,
 * port 26379 by default, and the name they monitor the master by; the credentials are the master's,
 * the sentinels' own password is `store.sentinelPassword`); `redis+unix://[USER[:PASSWORD]@]/PATH` (a Unix
 * socket, absolute path, database 0). Each `redis` scheme has a `valkey` alias (`valkey://`, `valkeys://`,
 * `valkey-cluster://`, `valkey-sentinel://`, `valkey+unix://`…): the same protocol, read the same way.
 * Credentials are percent-decoded.
 * Query strings are refused rather than ignored: ioredis would read some of them, this parser would not.
 */
import { isIP } from 'node:net';
import { RategateError } from '../errors.js';

export interface StoreNode {
  /** Without brackets for IPv6. */
  readonly host: string;
  readonly port: number;
}

export type StoreUrl =
  | { readonly kind: 'memory' }
  | (RedisTarget & {
      readonly kind: 'redis';
      readonly node: StoreNode;
      readonly db: number;
      readonly socket?: undefined;
    })
  /** `redis+unix:///path/to/redis.sock`: a Redis beside the gateway on a Unix socket (no TCP stack on either side). */
  | (RedisTarget & { readonly kind: 'redis'; readonly socket: string; readonly db: number; readonly node?: undefined })
  | (RedisTarget & { readonly kind: 'redis-cluster'; readonly nodes: readonly StoreNode[] })
  | (RedisTarget & {
      readonly kind: 'redis-sentinel';
      readonly sentinels: readonly StoreNode[];
      readonly name: string;
      readonly db: number;
    });

interface RedisTarget {
  readonly tls: boolean;
  readonly username?: string;
  readonly password?: string;
}

/** The forms `store.url` takes, as every refusal states them. */
export const STORE_URL_FORMS =
  'use memory, redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://… for TLS, redis+unix:///PATH/TO/redis.sock, redis-cluster://[USER:PASSWORD@]HOST:PORT,HOST:PORT, rediss-cluster://… for TLS, redis-sentinel://[USER:PASSWORD@]HOST[:PORT],HOST[:PORT]/MASTERNAME[/DB] or rediss-sentinel://… for TLS; valkey… for any redis… (valkey://, valkey-cluster://…)';

/** A `store.url` that names no store rategate can connect to. The message is the same wherever it is raised. */
export class StoreUrlError extends RategateError {
  readonly code = 'STORE_URL_INVALID';
  constructor(url: string, detail: string) {
    super(storeUrlMessage(url, detail));
  }
}

function storeUrlMessage(url: string, detail: string): string {
  return `invalid store "${redactStoreUrl(url)}": ${detail} (${STORE_URL_FORMS})`;
}

const SCHEME = /^(rediss?|valkeys?)(-cluster|-sentinel)?:\/\/(.*)$/s;
const HOSTNAME =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)*$/;
const DEFAULT_PORT = 6379;
const SENTINEL_PORT = 26379;
const MASTER_NAME = /^[A-Za-z0-9._-]{1,128}$/;

/** Parses a store URL; throws StoreUrlError (with the one message) for anything else. */
export function parseStoreUrl(url: string): StoreUrl {
  if (url === 'memory') return { kind: 'memory' };
  if (url.startsWith(UNIX_SCHEME) || url.startsWith(VALKEY_UNIX_SCHEME)) return parseUnix(url);
  const m = SCHEME.exec(url);
  if (!m) throw new StoreUrlError(url, 'unknown scheme');
  const tls = m[1] === 'rediss' || m[1] === 'valkeys';
  const cluster = m[2] === '-cluster';
  const sentinel = m[2] === '-sentinel';
  let rest = m[3]!;
  if (/[?#]/.test(rest)) throw new StoreUrlError(url, 'a query or fragment is not supported');
  const out: { tls: boolean; username?: string; password?: string } = { tls };
  const at = rest.lastIndexOf('@');
  if (at !== -1) {
    readCredentials(url, rest.slice(0, at), out);
    rest = rest.slice(at + 1);
  }
  const slash = rest.indexOf('/');
  const hosts = slash === -1 ? rest : rest.slice(0, slash);
  const path = slash === -1 ? '' : rest.slice(slash + 1);
  if (cluster) {
    if (path !== '') throw new StoreUrlError(url, 'a cluster has no database number');
    const nodes = hosts.split(',').map((hp) => parseNode(url, hp, true));
    return { kind: 'redis-cluster', ...out, nodes };
  }
  if (sentinel) {
    const [name = '', db = '', ...more] = path.split('/');
    if (!MASTER_NAME.test(name))
      throw new StoreUrlError(url, name === '' ? 'a Sentinel URL needs /MASTERNAME' : `invalid master name "${name}"`);
    if (more.length > 0 || (db !== '' && !/^[0-9]{1,5}$/.test(db)))
      throw new StoreUrlError(url, `database "${[db, ...more].join('/')}" is not a number`);
    const sentinels = hosts.split(',').map((hp) => parseNode(url, hp, false, SENTINEL_PORT));
    return { kind: 'redis-sentinel', ...out, sentinels, name, db: db === '' ? 0 : Number(db) };
  }
  if (hosts.includes(',')) throw new StoreUrlError(url, 'several hosts need redis-cluster://');
  if (path !== '' && !/^[0-9]{1,5}$/.test(path)) throw new StoreUrlError(url, `database "${path}" is not a number`);
  return { kind: 'redis', ...out, node: parseNode(url, hosts, false), db: path === '' ? 0 : Number(path) };
}

/** `USER[:PASSWORD]` before the `@`, percent-decoded; an empty user is none (`:PASSWORD@`). */
function readCredentials(url: string, creds: string, out: { username?: string; password?: string }): void {
  const colon = creds.indexOf(':');
  const user = decode(url, colon === -1 ? creds : creds.slice(0, colon));
  if (user !== '') out.username = user;
  if (colon !== -1) out.password = decode(url, creds.slice(colon + 1));
}

const UNIX_SCHEME = 'redis+unix://';
const VALKEY_UNIX_SCHEME = 'valkey+unix://';

/** `redis+unix://[USER[:PASSWORD]@]/absolute/path`: the path is taken as written (no `..`, no NUL). */
function parseUnix(url: string): StoreUrl {
  let rest = url.slice(url.indexOf('://') + 3);
  if (/[?#]/.test(rest)) throw new StoreUrlError(url, 'a query or fragment is not supported');
  const out: { tls: boolean; username?: string; password?: string } = { tls: false };
  const slash = rest.indexOf('/');
  const at = slash === -1 ? -1 : rest.lastIndexOf('@', slash);
  if (at !== -1) {
    readCredentials(url, rest.slice(0, at), out);
    rest = rest.slice(at + 1);
  }
  if (!rest.startsWith('/'))
    throw new StoreUrlError(url, 'a Unix socket needs an absolute path (redis+unix:///path/to/redis.sock)');
  if (rest.length < 2 || rest.endsWith('/') || rest.includes('\0') || rest.split('/').includes('..'))
    throw new StoreUrlError(url, `invalid socket path "${rest}"`);
  return { kind: 'redis', ...out, socket: rest, db: 0 };
}

/** The refusal message for `url`, or null when it names a store: what config validation reports. */
export function storeUrlProblem(url: string): string | null {
  try {
    parseStoreUrl(url);
    return null;
  } catch (err) {
    if (err instanceof StoreUrlError) return err.message;
    throw err;
  }
}

/** `HOST:PORT` or `[IPv6]:PORT` (the port optional unless `needPort`). */
function parseNode(url: string, hp: string, needPort: boolean, defaultPort = DEFAULT_PORT): StoreNode {
  let host: string;
  let port: string | undefined;
  if (hp.startsWith('[')) {
    const close = hp.indexOf(']');
    host = close === -1 ? '' : hp.slice(1, close);
    const after = close === -1 ? '' : hp.slice(close + 1);
    if (isIP(host) !== 6 || (after !== '' && !after.startsWith(':')))
      throw new StoreUrlError(url, `invalid host "${hp}"`);
    port = after === '' ? undefined : after.slice(1);
  } else {
    const colon = hp.lastIndexOf(':');
    host = colon === -1 ? hp : hp.slice(0, colon);
    port = colon === -1 ? undefined : hp.slice(colon + 1);
    if (host === '') throw new StoreUrlError(url, 'no host');
    // Digits-and-dots hosts must be four-part IPv4 (no `127.1`); a bare IPv6 needs brackets.
    if (isIP(host) !== 4 && (!HOSTNAME.test(host) || /^[0-9.]+$/.test(host)))
      throw new StoreUrlError(url, `invalid host "${hp}"`);
  }
  if (port === undefined) {
    if (needPort) throw new StoreUrlError(url, `cluster node "${hp}" has no port`);
    return { host, port: defaultPort };
  }
  if (!/^[0-9]{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535)
    throw new StoreUrlError(url, `invalid port in "${hp}"`);
  return { host, port: Number(port) };
}

function decode(url: string, s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new StoreUrlError(url, 'malformed percent-encoding in the credentials');
  }
}

/** The scheme of a store URL as written (`redis`, `valkey-cluster`, `redis+unix`…), `memory` for the bare word. */
export function storeScheme(url: string): string {
  if (url === 'memory') return 'memory';
  const i = url.indexOf('://');
  return i === -1 ? '' : url.slice(0, i);
}

/** Hides the password in a store URL (the user name stays): URLs are printed and logged. */
export function redactStoreUrl(url: string): string {
  return url.replace(/^([a-z+-]+:\/\/)(.*)@/is, (_, scheme: string, userinfo: string) => {
    const user = userinfo.split(':')[0] ?? '';
    return `${scheme}${user}${userinfo.includes(':') ? ':***' : ''}@`;
  });
}
