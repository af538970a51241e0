/**
 * Issue 29 item 1 through the real gateway: by default only loopback may set the client's address.
 * A peer on a private address (a pod, a node that source-NATed a LoadBalancer's traffic) sending
 * `X-Forwarded-For: 127.0.0.1` is neither exempt as localhost (Mastodon's safelist) nor moved to
 * another bucket by rotating the header.
 */
import http from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/app/start.js';
import { compileCidrs } from '../../src/identity/cidr.js';
import { gatewayFixture } from '../support/gateway.js';

/** Mastodon's table exempts the host itself; one per-IP rule small enough to run out. */
const TABLE = `
exempt: { ips: [127.0.0.1, "::1"] }
limits:
  - { name: per-ip, match: GET /api/*, per: ip, limit: 2, period: 5m }
`;

/** An address of this host in a private range (10/8, 172.16/12, 192.168/16, fc00::/7), not loopback. */
function privateAddressOfThisHost(): string | undefined {
  const privateRanges = compileCidrs(['private']);
  for (const list of Object.values(os.networkInterfaces()))
    for (const a of list ?? [])
      if (!a.internal && !a.address.startsWith('fe80') && privateRanges.contains(a.address)) return a.address;
  return undefined;
}
const PRIVATE = privateAddressOfThisHost();

const fx = gatewayFixture<RunningGateway>({ graceMs: 500 });

async function gatewayOn(host: string, yaml: string): Promise<RunningGateway> {
  const configPath = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-tp-')), 'limits.yaml');
  writeFileSync(configPath, yaml);
  const listen = host.includes(':') ? `[${host}]:0` : `${host}:0`;
  return startGateway({
    configPath,
    overrides: { listen, adminListen: '127.0.0.1:0', upstream: fx.upstream.url, logLevel: 'silent' },
    logger: pino({ level: 'silent' }),
    defaultMetrics: false,
    watch: false,
  });
}

/** One GET from `from` (the TCP peer the gateway sees) with the given X-Forwarded-For. */
function getFrom(gw: RunningGateway, from: string, xff: string): Promise<number> {
  const u = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname.replace(/^\[|\]$/g, ''),
        port: Number(u.port),
        path: '/api/v1/timelines/public',
        localAddress: from,
        agent: false,
        headers: { 'X-Forwarded-For': xff },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('the default trusted proxies', () => {
  it.skipIf(PRIVATE === undefined)(
    'ignore X-Forwarded-For from a peer on a private address: no localhost exemption, no fresh bucket per spoofed address (needs a private address on this host)',
    async () => {
      const from = PRIVATE!;
      fx.gw = await gatewayOn(from, TABLE);
      // Claiming to be localhost: counted as the private peer, limited on the third request.
      expect([
        await getFrom(fx.gw, from, '127.0.0.1'),
        await getFrom(fx.gw, from, '127.0.0.1'),
        await getFrom(fx.gw, from, '127.0.0.1'),
      ]).toEqual([200, 200, 429]);
      // Rotating the claim does not buy a fresh bucket either.
      expect(await getFrom(fx.gw, from, '198.51.100.7')).toBe(429);
      expect(await getFrom(fx.gw, from, '198.51.100.8')).toBe(429);
      // The upstream saw the peer, never the claim.
      expect(fx.upstream.forwarded().map((r) => r.headers['x-forwarded-for'])).toEqual([from, from]);
    },
  );

  it('still trust loopback: a proxy on the same host names the client, and the gateway keeps answering', async () => {
    fx.gw = await gatewayOn('127.0.0.1', TABLE);
    expect([
      await getFrom(fx.gw, '127.0.0.1', '198.51.100.7'),
      await getFrom(fx.gw, '127.0.0.1', '198.51.100.7'),
    ]).toEqual([200, 200]);
    expect(await getFrom(fx.gw, '127.0.0.1', '198.51.100.7')).toBe(429);
    // Another client behind the same proxy has its own bucket.
    expect(await getFrom(fx.gw, '127.0.0.1', '198.51.100.8')).toBe(200);
  });
});

describe('an explicit list', () => {
  it('trusts exactly the proxies it names: a spoofed X-Forwarded-For from any other peer is ignored', async () => {
    fx.gw = await gatewayOn('127.0.0.1', `${TABLE}\nclients: { trustedProxies: [10.0.0.0/8] }\n`);
    // The loopback peer is not named: its claim to be 127.0.0.1 is ignored, and so is a rotation.
    const statuses = [];
    for (const xff of ['127.0.0.1', '198.51.100.1', '198.51.100.2', '198.51.100.3'])
      statuses.push(await getFrom(fx.gw, '127.0.0.1', xff));
    // The peer itself is 127.0.0.1, exempt by the table: every request passes, none counted under a claim.
    expect(statuses).toEqual([200, 200, 200, 200]);
    const bucket = (await (await fetch(`${fx.gw.adminUrl}/admin/buckets?rule=per-ip&key=198.51.100.1`)).json()) as {
      limit: number;
      remaining: number;
    };
    expect(bucket.limit - bucket.remaining).toBe(0);
    expect(fx.upstream.forwarded().every((r) => r.headers['x-forwarded-for'] === '127.0.0.1')).toBe(true);
  });
});
