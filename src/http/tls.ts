/**
 * @module The TLS listener's certificate (`server.tls`): read and checked as a pair, and watched, so that a
 * certificate rotated on disk (cert-manager's Secret, whose files the kubelet swaps by a symlink; certbot's
 * renewal) is served to new connections within seconds, without a restart. A new pair that does not load
 * (half written, a key of another certificate) keeps the one in force and says why, as a bad limit table does.
 */
import { X509Certificate, createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import tls from 'node:tls';

export interface TlsSettings {
  readonly certFile: string;
  readonly keyFile: string;
  /** Certificates sent after the leaf (the chain), for a certFile that holds the leaf alone. */
  readonly caFile: string | null;
  readonly minVersion: 'TLSv1.2' | 'TLSv1.3';
}

/** A pair that loaded: what the listener serves, and what the metrics and logs say of it. */
export interface CertificatePair {
  readonly key: Buffer;
  readonly cert: Buffer;
  /** The certificate's first DNS name (else its subject's CN, else the file's path): the metric's `name`. */
  readonly name: string;
  /** Its notAfter, in epoch seconds. */
  readonly expires: number;
  /** SHA-256 of what was loaded, so an unchanged rewrite is not a reload. */
  readonly digest: string;
}

/** Reads and checks `s`'s pair; throws an Error naming the file or the mismatch. */
export async function loadCertificatePair(s: TlsSettings): Promise<CertificatePair> {
  const [leaf, key, chain] = await Promise.all([
    read(s.certFile, 'certFile'),
    read(s.keyFile, 'keyFile'),
    s.caFile === null ? null : read(s.caFile, 'caFile'),
  ]);
  const cert = chain === null ? leaf : Buffer.concat([leaf, Buffer.from('\n'), chain]);
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(leaf);
  } catch (err) {
    throw new Error(`certFile "${s.certFile}" holds no PEM certificate (${(err as Error).message})`);
  }
  try {
    // Throws on a key that is not the certificate's, or unreadable PEM: what the listener would meet.
    tls.createSecureContext({ key, cert, minVersion: s.minVersion });
  } catch (err) {
    throw new Error(
      `the certificate "${s.certFile}" and key "${s.keyFile}" do not load as a pair (${(err as Error).message})`,
    );
  }
  return {
    key,
    cert,
    name: certificateName(x509, s.certFile),
    expires: Math.floor(Date.parse(x509.validTo) / 1000),
    digest: createHash('sha256').update(cert).update(key).digest('hex'),
  };
}

async function read(file: string, key: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new Error(
      `${key} "${file}" cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
}

function certificateName(x509: X509Certificate, file: string): string {
  const dns = /(?:^|, )DNS:([^,]+)/.exec(x509.subjectAltName ?? '')?.[1];
  if (dns !== undefined) return dns;
  return /(?:^|\n)CN=([^\n]+)/.exec(x509.subject)?.[1] ?? file;
}

/** The options a secure context (and the listener) takes from a loaded pair. */
export function secureOptions(s: TlsSettings, pair: CertificatePair): tls.SecureContextOptions {
  return { key: pair.key, cert: pair.cert, minVersion: s.minVersion };
}

export interface CertificateWatch {
  stop(): void;
}

/**
 * Looks at the files every `intervalMs` (their inode, size and mtime, through symlinks): on a change, loads
 * the pair again; a pair that loads is handed to `onLoaded` (which swaps the listener's context), one that
 * does not to `onRejected`, once per change, while the pair in force stays. Polling rather than fs.watch:
 * a kubelet swap replaces a symlink in a parent directory, which inotify on the files does not see.
 */
export function watchCertificatePair(
  s: TlsSettings,
  current: CertificatePair,
  intervalMs: number,
  on: { onLoaded(pair: CertificatePair): void; onRejected(reason: string): void },
): CertificateWatch {
  let inForce = current;
  let seen: string | undefined;
  let busy = false;
  const files = [s.certFile, s.keyFile, ...(s.caFile === null ? [] : [s.caFile])];
  const look = async (): Promise<void> => {
    const marks = await Promise.all(
      files.map((f) =>
        stat(f).then(
          (st) => `${st.ino}:${st.size}:${st.mtimeMs}`,
          () => 'missing',
        ),
      ),
    );
    const mark = marks.join('|');
    if (seen === undefined || mark === seen) {
      seen = mark;
      return;
    }
    seen = mark;
    try {
      const pair = await loadCertificatePair(s);
      if (pair.digest === inForce.digest) return;
      inForce = pair;
      on.onLoaded(pair);
    } catch (err) {
      on.onRejected((err as Error).message);
    }
  };
  const tick = (): void => {
    if (busy) return;
    busy = true;
    look()
      .catch((err: unknown) => on.onRejected(err instanceof Error ? err.message : String(err)))
      .finally(() => (busy = false));
  };
  tick();
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
