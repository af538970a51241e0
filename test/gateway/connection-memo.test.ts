/**
 * What a keep-alive connection's requests share (identity/connection-memo.ts): the peer as the policy
 * resolved it, the last token's format check, and behind a trusted proxy the last X-Forwarded-For's client
 * and chain. Through the real gateway: a reload that changes the trusted proxies is read by a connection
 * open across it, each request of a proxy's connection is counted by its own X-Forwarded-For, and a junk
 * token after a good one on the same connection is never introspected (nor a good one after a junk one
 * refused).
 */
import http from 'node:http';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { VERIFY } from '../support/recording-upstream.js';
import { gatewayFixture, startTestGateway } from '../support/gateway.js';

const fx = gatewayFixture({ graceMs: 200 });

interface Got {
  status: number;
  reused: boolean;
  remaining: string | undefined;
}

/** One GET on `agent` (one socket, kept alive); whether it went on a socket already used. */
function get(url: string, agent: http.Agent, headers: Record<string, string>): Promise<Got> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: '/api/v1/x', agent, headers }, (res) => {
      res.resume();
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          reused: req.reusedSocket,
          remaining: res.headers['x-ratelimit-remaining'] as string | undefined,
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

const table = (trusted: string): string => `clients: { trustedProxies: [${trusted}] }
limits:
  - { name: per-ip, match: /api/*, per: ip, limit: 50, period: 1m }
`;

describe("a connection's memo", () => {
  it('resolves the peer again after a reload changed the trusted proxies, on a connection open across it', async () => {
    const gw = (fx.gw = await startTestGateway(table('127.0.0.1/32'), { upstream: fx.upstream.url }));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const claim = { 'x-forwarded-for': '198.51.100.7' };
      const first = await get(gw.url, agent, claim);
      expect(first.status).toBe(200);
      // Trusted: the client is the claim, and the upstream gets the chain extended by the peer.
      expect(fx.upstream.forwarded().at(-1)!.headers['x-forwarded-for']).toBe('198.51.100.7, 127.0.0.1');
      writeFileSync(gw.configPath, table('10.0.0.0/8'));
      expect(await gw.reload()).toBe(true);
      const after = await get(gw.url, agent, claim);
      expect(after.reused).toBe(true);
      expect(after.status).toBe(200);
      // No longer trusted: the claim is dropped and the peer counted, on the very same connection.
      expect(fx.upstream.forwarded().at(-1)!.headers['x-forwarded-for']).toBe('127.0.0.1');
      expect(after.remaining).toBe('49');
      const again = await get(gw.url, agent, claim);
      expect(again.reused).toBe(true);
      expect(again.remaining).toBe('48');
    } finally {
      agent.destroy();
    }
  });

  it("counts each request of a proxy's connection by its own X-Forwarded-For: a change, a return, a long chain", async () => {
    const gw = (fx.gw = await startTestGateway(table('127.0.0.1/32, 10.0.0.0/8'), { upstream: fx.upstream.url }));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    // A chain past what the memo keeps (512 characters): trusted hops left of the client.
    const long = `${Array.from({ length: 60 }, (_, i) => `10.0.${i}.1`).join(', ')}, 198.51.100.9`;
    const sent = ['198.51.100.7', '198.51.100.8', '198.51.100.7', long, long, '198.51.100.8, 10.1.1.1'];
    try {
      const got: Got[] = [];
      for (const xff of sent) got.push(await get(gw.url, agent, { 'x-forwarded-for': xff }));
      expect(got.slice(1).every((g) => g.reused)).toBe(true);
      // .7 twice; .8 twice (the second behind a trusted hop); the long chain's client .9 twice.
      expect(got.map((g) => g.remaining)).toEqual(['49', '49', '48', '49', '48', '48']);
      expect(fx.upstream.forwarded().map((f) => f.headers['x-forwarded-for'])).toEqual(
        sent.map((xff) => `${xff}, 127.0.0.1`),
      );
    } finally {
      agent.destroy();
    }
  });

  it('checks each new token of a connection: a junk one after a good one, and a good one after it, as if alone', async () => {
    const gw = (fx.gw = await startTestGateway(
      `clients: { account: { from: introspect } }
limits:
  - { name: per-account, match: /api/*, per: account, limit: 50, period: 1m }
`,
      { upstream: fx.upstream.url },
    ));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const introspections = (): number => fx.upstream.seen.filter((s) => s.url === VERIFY).length;
    try {
      const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
      expect((await get(gw.url, agent, bearer('user-41'))).status).toBe(200);
      expect(introspections()).toBe(1);
      // Not a Doorkeeper token's form (`*`, `!` are outside b64token): never asked about, on the same connection.
      for (const junk of ['user-41*', 'not!a!token', 'user-41*'])
        expect((await get(gw.url, agent, bearer(junk))).status).toBe(200);
      expect(introspections()).toBe(1);
      // The good token again: known already (no call); a new good one: asked once.
      const back = await get(gw.url, agent, bearer('user-41'));
      expect(back.reused).toBe(true);
      expect(back.remaining).toBe('48');
      expect(introspections()).toBe(1);
      expect((await get(gw.url, agent, bearer('user-42'))).remaining).toBe('49');
      expect(introspections()).toBe(2);
    } finally {
      agent.destroy();
    }
  });
});
