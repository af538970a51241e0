/**
 * @module Where the admin API's bearer token comes from (`admin.token`, RATEGATE_ADMIN_TOKEN via the
 * config overrides, or `admin.tokenFile`), and whether the admin listener is reachable off the host.
 */
import { parseHostPort } from '../config/index.js';
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
export async function loadAdminToken(admin: { token: string | null; tokenFile: string | null }, source: string): Promise<string | null> {
  if (admin.token !== null) return admin.token;
  if (admin.tokenFile === null) return null;
  return readSecretFile(admin.tokenFile, 'admin.tokenFile', source);
}
