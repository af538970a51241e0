/**
 * @module Where the admin API's bearer tokens come from (`admin.tokens`, each named with its scopes; and
 * the unnamed `admin.token`, RATEGATE_ADMIN_TOKEN via the config overrides, or `admin.tokenFile`), and
 * whether the admin listener is reachable off the host.
 */
import { createHash } from 'node:crypto';
import { ConfigError, parseHostPort, type Config } from '../config/index.js';
import { readSecretFile } from '../config/secret-file.js';
import { listenerNames } from './browser-check.js';

/**
 * True when the listen address only accepts connections from this host: 127.0.0.0/8, ::1, localhost.
 * Security: anything else (0.0.0.0, ::, a routable address) may be reached by clients, so there the
 * buckets API is closed until a token is set.
 */
export function isLoopbackListen(listen: string): boolean {
  const hp = parseHostPort(listen);
  if (hp === undefined) return false;
  const host = hp.host.toLowerCase();
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** What the admin router knows of its listener from its address: loopback-only or not, and the Host names it answers to. */
export function listenerFacts(listen: string): { loopbackOnly: boolean; names: ReadonlySet<string> } {
  return { loopbackOnly: isLoopbackListen(listen), names: listenerNames(listen) };
}

/**
 * The token in force: `admin.token` (the file's, or RATEGATE_ADMIN_TOKEN, which overrides it), else the
 * trimmed contents of `admin.tokenFile`, else null. The file is read here, which the gateway calls at
 * start and on every reload: a rotated Secret takes effect on the next reload (file change or SIGHUP).
 * An unreadable or empty file is a config error (the gateway does not start; a reload is refused and the
 * previous token stays), never a silent "no token".
 */
export async function loadAdminToken(
  admin: { token: string | null; tokenFile: string | null },
  source: string,
): Promise<string | null> {
  if (admin.token !== null) return admin.token;
  if (admin.tokenFile === null) return null;
  return readSecretFile(admin.tokenFile, 'admin.tokenFile', source);
}

/** A token the admin door takes: kept as its digest only (compared in constant time, door.ts). */
export interface AdminCredential {
  /** The holder's name from admin.tokens; null for the unnamed admin.token. */
  readonly name: string | null;
  /** SHA-256 of the token. */
  readonly digest: Buffer;
  /** The first 8 hex digits of the digest: tells tokens apart in logs across a rotation, never the token. */
  readonly id: string;
  /** The write scope (the read scope comes with every token). */
  readonly write: boolean;
}

function credential(name: string | null, token: string, write: boolean): AdminCredential {
  const digest = createHash('sha256').update(token).digest();
  return { name, digest, id: digest.toString('hex').slice(0, 8), write };
}

/**
 * Every token in force: the unnamed one (full scope, as before named tokens), then admin.tokens in
 * order, their files read now (at start and on every reload). The same token twice is a config error:
 * which holder made a write would be a guess.
 */
export async function loadAdminCredentials(
  admin: Config['admin'],
  source: string,
): Promise<readonly AdminCredential[]> {
  const unnamed = await loadAdminToken(admin, source);
  const out: AdminCredential[] = unnamed === null ? [] : [credential(null, unnamed, true)];
  for (const [i, t] of admin.tokens.entries()) {
    const token = t.token ?? (await readSecretFile(t.tokenFile!, `admin.tokens[${i}].tokenFile`, source));
    const c = credential(t.name, token, t.scopes.includes('write'));
    if (out.some((o) => o.digest.equals(c.digest)))
      throw new ConfigError(source, [`admin.tokens[${i}]: the same token as another admin token`]);
    out.push(c);
  }
  return Object.freeze(out);
}
