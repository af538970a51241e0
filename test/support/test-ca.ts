/**
 * @module A certificate authority made by openssl at test time, and a certificate it signs for gw.test
 * and 127.0.0.1: what an HTTPS test trusts without touching the system's store. Asynchronous: a test
 * that runs the gateway in its own process must not hold the event loop.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
/** A new P-256 key, unencrypted: the arguments both the CA and the certificate's request take. */
const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export interface TestCa {
  readonly dir: string;
  /** PEM of the CA, and its file. */
  readonly ca: string;
  readonly caFile: string;
  /** The leaf for gw.test and 127.0.0.1, and its key. */
  readonly certFile: string;
  readonly keyFile: string;
}

export async function makeTestCa(): Promise<TestCa> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'rategate-ca-'));
  const openssl = (...args: string[]) => run('openssl', args, { cwd: dir });
  await openssl(
    'req',
    '-x509',
    ...EC_KEY,
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-subj',
    '/CN=rategate test CA',
    '-days',
    '2',
  );
  await openssl('req', ...EC_KEY, '-keyout', 'gw.key', '-out', 'gw.csr', '-subj', '/CN=gw.test');
  await writeFile(path.join(dir, 'gw.ext'), 'subjectAltName=DNS:gw.test,IP:127.0.0.1\n');
  await openssl(
    'x509',
    '-req',
    '-in',
    'gw.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '2',
    '-out',
    'gw.crt',
    '-extfile',
    'gw.ext',
  );
  return {
    dir,
    ca: await readFile(path.join(dir, 'ca.crt'), 'utf8'),
    caFile: path.join(dir, 'ca.crt'),
    certFile: path.join(dir, 'gw.crt'),
    keyFile: path.join(dir, 'gw.key'),
  };
}
