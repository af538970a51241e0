/** @module The `server:` section of `limits.yaml`: the proxy listener's bounds against hostile clients, TLS, HTTP/2, the PROXY protocol and the drain. */
import * as z from 'zod';
import { checked, duration, size } from './formats.js';
import { patterns } from './rule.js';
import { checkProxyProtocolPeer } from './validators.js';

export const bodyLimitShape = {
  match: patterns.describe('Pattern(s) as in limits[].match.'),
  maxBodySize: size().describe('Largest request body for these routes (bytes, 16kB, 10MB, 1GB); 0: no limit.'),
};
export const serverShape = {
  maxHeaderSize: z
    .number()
    .int()
    .min(1024)
    .max(1024 * 1024)
    .default(16 * 1024)
    .describe('Largest request head in bytes; larger → 431.'),
  headersTimeout: duration(1)
    .prefault('10s')
    .describe('Time allowed to send the request head (against slowloris); then 408.'),
  requestTimeout: duration(0).prefault('5m').describe('Time allowed for a whole request including its body; 0: none.'),
  keepAliveTimeout: duration(1).prefault('65s').describe('Idle keep-alive connections are closed after this.'),
  maxConnections: z.number().int().min(1).default(10_000).describe('Connections beyond this are closed at once.'),
  maxBodySize: size()
    .prefault('100MB')
    .describe('Default largest request body (bytes, 16kB, 10MB, 1GB); larger → 413; 0: no limit.'),
  bodyLimits: z
    .array(z.object(bodyLimitShape).strict())
    .default([])
    .describe('Per-route body limits; the first match wins.'),
  paramPeekBytes: size()
    .prefault('64kB')
    .refine((n) => n >= 1024 && n <= 16 * 1024 * 1024, { error: 'must be from 1kB to 16MB' })
    .describe(
      'Bytes of a URL-encoded or JSON body held to read its parameters (a token, _method, param: rules); a body whose parameter may lie beyond is answered 400. Multipart bodies are read up to their first file part, within this bound.',
    ),
  minBodyRate: size()
    .prefault('1kB')
    .describe(
      'Bytes per second a request body must keep up while the gateway reads it (16kB = 16384 B/s); slower over a whole minBodyRateGrace → 408 and the connection closed; 0: no minimum. Default 1kB: any live link passes, a client trickling bytes to hold connections does not.',
    ),
  minBodyRateGrace: duration(1000)
    .prefault('10s')
    .describe(
      'The span over which minBodyRate is measured (a slow start and a short stall are forgiven within it). Default 10s, a mobile link’s usual stall.',
    ),
  upstreamQueueTimeout: duration(0)
    .prefault('5s')
    .describe(
      'How long a request may wait for a free upstream connection (every pool has 128; requests whose body is still arriving hold at most half); then 503 with Retry-After: 1. 0: no waiting. Default 5s: far longer than a connection stays busy at normal upstream latency, so only an overloaded upstream sheds load.',
    ),
  tls: z
    .object({
      certFile: z
        .string()
        .min(1)
        .describe('PEM certificate (the leaf, or the leaf followed by its chain), e.g. a mounted Secret’s tls.crt.'),
      keyFile: z.string().min(1).describe('PEM private key of certFile, e.g. tls.key.'),
      caFile: z
        .string()
        .min(1)
        .nullable()
        .default(null)
        .describe('PEM certificates sent after the leaf (the chain), when certFile holds the leaf alone.'),
      minVersion: z.enum(['TLSv1.2', 'TLSv1.3']).default('TLSv1.2').describe('Oldest TLS version accepted.'),
    })
    .strict()
    .nullable()
    .default(null)
    .describe(
      'The listener speaks TLS (HTTPS) with this certificate instead of plain HTTP. The files are watched: a rotated pair is served to new connections within seconds; a pair that does not load keeps the one in force (logged, rategate_tls_reloads_total{result="error"}). null (default): plain HTTP.',
    ),
  http2: z
    .boolean()
    .default(true)
    .describe(
      'HTTP/2 beside HTTP/1.1 on the proxy port: negotiated by ALPN (h2) with server.tls, and with prior knowledge (h2c: a connection that opens with the HTTP/2 preface) on plain HTTP. The upstream is spoken to in HTTP/1.1 either way; WebSocket stays on HTTP/1.1. false: HTTP/1.1 only.',
    ),
  proxyProtocol: z
    .object({
      from: z
        .array(checked(checkProxyProtocolPeer))
        .default([])
        .describe(
          'Peers (loopback, private, IPs or CIDRs) whose connections must open with a PROXY protocol header (v1 or v2), whose source address becomes the peer; from them a connection without one is closed. Empty (default): off, and a PROXY header from anyone is answered 400.',
        ),
    })
    .strict()
    .prefault({})
    .describe('The PROXY protocol, for a TCP load balancer in front (HAProxy send-proxy / send-proxy-v2, AWS NLB, …).'),
  drainGrace: duration(0)
    .prefault('10s')
    .describe(
      'After SIGTERM, how long in-flight requests may finish (new requests get 503); the rest are then cut, logged with error DRAIN_TIMEOUT and counted in rategate_drain_cut_total. An upper bound, not a wait: the process exits once the last request is done. Read at shutdown, so a reload changes it. The chart derives terminationGracePeriodSeconds from it.',
    ),
  maxUpstreamConnectionsPerIp: z
    .number()
    .int()
    .min(0)
    .default(32)
    .describe(
      'Requests one client IP (an IPv6 client: its ipv6Prefix network) may have waiting for or holding upstream connections, per upstream; more → 429 with Retry-After: 1. 0: no cap. Default 32, a quarter of a pool: no one client can take it, and a NAT of many users still has room.',
    ),
};
