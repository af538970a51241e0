/**
 * @module The proxy listener, set up: HTTP/1.1 (or HTTPS with a watched certificate pair), HTTP/2 beside it,
 * the PROXY protocol, refusals before the pipeline counted and logged, upgrades routed.
 */
import type http from 'node:http';
import type https from 'node:https';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { parseHostPort, type Config } from '../config/index.js';
import { ConfigError } from '../config/errors.js';
import type { Metrics } from '../observability/metrics.js';
import { RefusalLog } from '../observability/refusal-log.js';
import type { createDrain } from '../http/drain.js';
import { createProxyServer, listenOn, type ParserRefusal } from '../http/listener.js';
import { createH2Edge, type H2Edge } from '../http/h2.js';
import { serveH2OnAlpn, sniffH2Preface } from '../http/h2-handoff.js';
import { requireProxyHeader } from '../http/proxy-protocol.js';
import {
  loadCertificatePair,
  secureOptions,
  watchCertificatePair,
  type CertificatePair,
  type TlsSettings,
} from '../http/tls.js';
import { compileCidrs } from '../identity/cidr.js';
import type { Gateway } from '../pipeline/gateway.js';
import { isWebSocketUpgrade, serveAsPlainRequest } from '../pipeline/plain-upgrade.js';

/** How often the TLS listener's certificate files are looked at: a rotation is served within this (and a read). */
const CERTIFICATE_POLL_MS = 1_000;

/** The proxy listener: requests, `Expect: 100-continue` and upgrades go to the gateway. */
export async function listenProxy(
  cfg: Config,
  gateway: Gateway,
  { metrics, log, configPath }: { metrics: Metrics; log: Logger; configPath: string },
  drain: ReturnType<typeof createDrain>,
): Promise<{ server: http.Server; h2: H2Edge | undefined }> {
  const tls =
    cfg.server.tls === null
      ? undefined
      : { settings: cfg.server.tls, pair: await certificateAtStart(cfg.server.tls, configPath) };
  const secure = tls === undefined ? undefined : secureOptions(tls.settings, tls.pair);
  // Refusals before the pipeline are counted and logged, the log sampled per reason (refusal-log.ts).
  const refusals = new RefusalLog(log);
  const onParserRefusal = (status: number, reason: ParserRefusal, code: string): void => {
    metrics.countGatewayAnswer(status);
    refusals.refused(reason, `refused ${status}: ${PARSER_REFUSALS[reason]}`, { status, code });
  };
  const onFragmented = (): void => metrics.fragmentedBodies.inc();
  const server = createProxyServer(
    cfg.server,
    gateway.handle,
    onParserRefusal,
    drain.ServerResponse,
    onFragmented,
    secure,
    cfg.server.http2,
  );
  server.once('close', () => refusals.flush());
  if (tls !== undefined) watchCertificate(server as https.Server, tls.settings, tls.pair, metrics, log);
  // HTTP/2 beside HTTP/1.1: chosen by ALPN over TLS, by the connection preface on plain TCP (after
  // the PROXY header, whose reader wraps what is set up here).
  const h2 = cfg.server.http2
    ? createH2Edge(cfg.server, gateway.handle, (reason) =>
        reason === 'fragmented_body' ? onFragmented() : metrics.http2Closed.labels(reason).inc(),
      )
    : undefined;
  if (h2 !== undefined && tls !== undefined) serveH2OnAlpn(server as https.Server, h2);
  else if (h2 !== undefined) sniffH2Preface(server, h2, cfg.server.headersTimeout);
  requireProxyHeader(server, compileCidrs(cfg.server.proxyProtocol.from), cfg.server.headersTimeout, (reason) => {
    metrics.proxyProtocolRefused.labels(reason).inc();
    refusals.refused(
      `proxy_protocol_${reason}`,
      `connection closed: ${reason === 'timeout' ? 'no PROXY header in time' : 'no valid PROXY header'}`,
    );
  });
  server.on('checkContinue', gateway.handle);
  // WebSocket is tunnelled; any other upgrade is served as the HTTP/1.1 request it also is.
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) =>
    isWebSocketUpgrade(req)
      ? gateway.handleUpgrade(req, socket, head)
      : serveAsPlainRequest(server, req, socket, head, metrics.countGatewayAnswer),
  );
  const listen = parseHostPort(cfg.listen)!;
  await listenOn(server, listen.host, listen.port);
  return { server, h2 };
}

/** The human reading of each parser refusal, for the log line's `msg`. */
const PARSER_REFUSALS: Record<ParserRefusal, string> = {
  headers_too_large: 'request header fields too large (server.maxHeaderSize)',
  request_timeout: 'the request did not arrive within server.headersTimeout or server.requestTimeout',
  unknown_method: 'unknown method',
  malformed: 'malformed request',
};

/** The TLS listener's pair at start: one that does not load is a config error, as a bad table is. */
async function certificateAtStart(s: TlsSettings, configPath: string): Promise<CertificatePair> {
  try {
    return await loadCertificatePair(s);
  } catch (err) {
    throw new ConfigError(configPath, [`server.tls: ${(err as Error).message}`]);
  }
}

/** A rotated pair is served to new connections; a broken one keeps the pair in force and says why. */
function watchCertificate(
  server: https.Server,
  s: TlsSettings,
  pair: CertificatePair,
  metrics: Metrics,
  log: Logger,
): void {
  const expiry = (p: CertificatePair): void => {
    metrics.tlsExpiry.reset();
    metrics.tlsExpiry.labels(p.name).set(p.expires);
  };
  expiry(pair);
  for (const result of ['success', 'error']) metrics.tlsReloads.labels(result).inc(0);
  const watch = watchCertificatePair(s, pair, CERTIFICATE_POLL_MS, {
    onLoaded(next) {
      server.setSecureContext(secureOptions(s, next));
      expiry(next);
      metrics.tlsReloads.labels('success').inc();
      log.info(
        { certFile: s.certFile, name: next.name, expires: new Date(next.expires * 1000).toISOString() },
        'tls: serving the new certificate',
      );
    },
    onRejected(reason) {
      metrics.tlsReloads.labels('error').inc();
      log.error({ certFile: s.certFile, reason }, 'tls: the new certificate does not load; the one in force stays');
    },
  });
  server.once('close', () => watch.stop());
}
