/**
 * @module Secrets given as files (a mounted Kubernetes Secret): the admin token (`admin.tokenFile`) and
 * the sentinels' password (`store.sentinelPasswordFile`) are read here, trimmed, and an unreadable or
 * empty file is a config error naming its key, never a silent "no secret".
 */
import { readFile } from 'node:fs/promises';
import { ConfigError, whyUnreadable } from './errors.js';

/** The trimmed contents of `file`; `key` (e.g. `admin.tokenFile`) names it in errors, `source` is the config file. */
export async function readSecretFile(file: string, key: string, source: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError(source, [`${key}: cannot read "${file}": ${whyUnreadable(err)}`]);
  }
  // A Secret written with a trailing newline must not make the secret wrong.
  const secret = text.trim();
  if (secret.length === 0) throw new ConfigError(source, [`${key}: "${file}" is empty`]);
  return secret;
}

/**
 * The sentinels' password in force: `store.sentinelPassword` (the file's, or RATEGATE_STORE_SENTINEL_PASSWORD,
 * which overrides it), else the contents of `store.sentinelPasswordFile`, else null. Read at start: the
 * store connection is made once (a change applies at the next restart, as `store.url` does).
 */
export async function loadSentinelPassword(
  store: { sentinelPassword: string | null; sentinelPasswordFile: string | null },
  source: string,
): Promise<string | null> {
  if (store.sentinelPassword !== null) return store.sentinelPassword;
  if (store.sentinelPasswordFile === null) return null;
  return readSecretFile(store.sentinelPasswordFile, 'store.sentinelPasswordFile', source);
}
