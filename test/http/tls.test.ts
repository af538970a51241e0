/**
 * The TLS listener (server.tls) on the real gateway, with a CA and certificates made by openssl at test
 * time, laid out as the kubelet lays out a mounted Secret (files behind a `..data` symlink swapped at
 * once): HTTPS answered with the rate-limit headers (node's client and curl), the upstream told
 * `X-Forwarded-Proto: https`, a rotated certificate served to new connections within 5 s without a
 * restart, a broken new pair refused with the old one kept, the expiry as a metric.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capturingLogger, startTestGateway, type LogLine, type TestGateway } from '../support/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { eventually } from '../support/eventually.js';
import { ConfigError } from '../../src/config/errors.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-tls-'));
/** A new P-256 key, unencrypted: the arguments both the CA and each certificate's request take. */
const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
const openssl = (...args: string[]): void => void execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });

/** A key and a certificate for gw.test (and 127.0.0.1) signed by the test CA, valid `days`. */
function issue(name: string, days: number): { cert: string; key: string; serial: string } {
  openssl('req', ...EC_KEY, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', '/CN=gw.test');
  writeFileSync(path.join(dir, `${name}.ext`), 'subjectAltName=DNS:gw.test,IP:127.0.0.1\n');
  openssl(
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    String(days),
    '-out',
    `${name}.crt`,
    '-extfile',
    `${name}.ext`,
  );
  const cert = readFileSync(path.join(dir, `${name}.crt`), 'utf8');
  return {
    cert,
    key: readFileSync(path.join(dir, `${name}.key`), 'utf8'),
    serial: new X509Certificate(cert).serialNumber,
  };
}

/** The Secret's mount: `tls.crt` and `tls.key` are symlinks through `..data`, which a swap repoints at once. */
const mount = path.join(dir, 'mount');
let generation = 0;
function publish(pair: { cert: string; key: string }): void {
  const version = path.join(mount, `..v${++generation}`);
  mkdirSync(version, { recursive: true });
  writeFileSync(path.join(version, 'tls.crt'), pair.cert);
  writeFileSync(path.join(version, 'tls.key'), pair.key);
  symlinkSync(path.basename(version), path.join(mount, '..data_tmp'));
  renameSync(path.join(mount, '..data_tmp'), path.join(mount, '..data'));
}

let ca: string;
let first: ReturnType<typeof issue>;
let second: ReturnType<typeof issue>;
let upstream: RecordingUpstream;
let gw: TestGateway;
let lines: LogLine[];
let port: number;

beforeAll(async () => {
  openssl(
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
  ca = readFileSync(path.join(dir, 'ca.crt'), 'utf8');
  first = issue('first', 30);
  second = issue('second', 90);
  mkdirSync(mount);
  publish(first);
  symlinkSync('..data/tls.crt', path.join(mount, 'tls.crt'));
  symlinkSync('..data/tls.key', path.join(mount, 'tls.key'));
  upstream = await startRecordingUpstream();
  const captured = capturingLogger();
  lines = captured.lines;
  const table = `limits:\n  - { name: per-ip, match: GET /api/v1/statuses/*, per: ip, limit: 100, period: 1h }\nserver:\n  tls: { certFile: ${mount}/tls.crt, keyFile: ${mount}/tls.key }\n`;
  gw = await startTestGateway(table, { upstream: upstream.url, logger: captured.logger });
  port = Number(new URL(gw.url).port);
});
afterAll(async () => {
  await gw?.shutdown(200);
  await upstream?.close();
});

/** A GET over a fresh TLS connection: the status, a header, and the serial of the certificate served. */
function get(urlPath: string): Promise<{ status: number; limit: string | undefined; serial: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      { host: '127.0.0.1', port, path: urlPath, servername: 'gw.test', ca, agent: false },
      (res) => {
        const serial = (res.socket as import('node:tls').TLSSocket).getPeerX509Certificate()?.serialNumber ?? '';
        res.resume();
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            limit: res.headers['x-ratelimit-limit'] as string | undefined,
            serial,
          }),
        );
      },
    );
    req.on('error', reject);
  });
}

const expiry = async (): Promise<string> =>
  gw.metrics.registry.getSingleMetricAsString('rategate_tls_certificate_expiry_timestamp_seconds');
const notAfter = (cert: string): number => Math.floor(Date.parse(new X509Certificate(cert).validTo) / 1000);

describe('the TLS listener', () => {
  it('answers HTTPS with the rate-limit headers, and tells the upstream the scheme was https', async () => {
    expect(gw.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(await get('/api/v1/statuses/1')).toEqual({ status: 200, limit: '100', serial: first.serial });
    expect(upstream.seen.at(-1)?.headers['x-forwarded-proto']).toBe('https');
    expect(await expiry()).toContain(
      `rategate_tls_certificate_expiry_timestamp_seconds{name="gw.test"} ${notAfter(first.cert)}`,
    );
  });

  it.skipIf(spawnSync('curl', ['--version']).status !== 0)('is answered to curl, verifying the test CA', async () => {
    writeFileSync(path.join(dir, 'ca.pem'), ca);
    // Asynchronously: the gateway runs in this process, and a synchronous child would hold its event loop.
    const { stdout: out } = await promisify(execFile)('curl', [
      '-sS',
      '--max-time',
      '20',
      '--cacert',
      path.join(dir, 'ca.pem'),
      '--resolve',
      `gw.test:${port}:127.0.0.1`,
      '-D',
      '-',
      '-o',
      '/dev/null',
      `https://gw.test:${port}/api/v1/statuses/2`,
    ]);
    // curl offers h2 by ALPN, and server.http2 (default on) takes it.
    expect(out).toMatch(/^HTTP\/2 200/);
    expect(out).toMatch(/x-ratelimit-remaining: \d+/i);
  });

  it('serves a certificate rotated on disk to new connections within 5 s, without a restart', async () => {
    const swapped = Date.now();
    publish(second);
    await eventually(async () => (await get('/api/v1/statuses/3')).serial === second.serial, {
      what: 'the new certificate served',
      withinMs: 5_000,
    });
    expect(Date.now() - swapped).toBeLessThan(5_000);
    expect(await expiry()).toContain(`{name="gw.test"} ${notAfter(second.cert)}`);
    expect(lines.some((l) => l.msg === 'tls: serving the new certificate')).toBe(true);
  });

  it('keeps the pair in force when the new one does not load, and says why', async () => {
    const third = issue('third', 10);
    // The new certificate beside the old key: a half-finished rotation.
    publish({ cert: third.cert, key: second.key });
    await eventually(
      () => lines.some((l) => l.msg === 'tls: the new certificate does not load; the one in force stays'),
      { what: 'the refusal logged' },
    );
    expect(String(lines.find((l) => l.msg?.startsWith('tls: the new certificate does not load'))?.reason)).toMatch(
      /do not load as a pair/,
    );
    expect(await gw.metrics.registry.getSingleMetricAsString('rategate_tls_reloads_total')).toMatch(
      /result="error"} 1/,
    );
    expect((await get('/api/v1/statuses/4')).serial).toBe(second.serial);
    expect(await expiry()).toContain(`{name="gw.test"} ${notAfter(second.cert)}`);
  });

  it('closes plain HTTP sent to the TLS port and stays up', async () => {
    await new Promise<void>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => s.write('GET /api/v1/statuses/1 HTTP/1.1\r\nHost: gw\r\n\r\n'));
      s.on('error', () => undefined);
      s.on('close', () => resolve());
      s.resume();
    });
    expect((await get('/api/v1/statuses/5')).status).toBe(200);
  });
});

it('refuses to start on a pair that does not load, naming server.tls', async () => {
  const table = `limits: []\nserver:\n  tls: { certFile: ${dir}/first.crt, keyFile: ${dir}/second.key }\n`;
  const started = startTestGateway(table, { upstream: 'http://127.0.0.1:9' });
  await expect(started).rejects.toBeInstanceOf(ConfigError);
  await expect(started).rejects.toThrow(/server\.tls: the certificate .* do not load as a pair/);
});
