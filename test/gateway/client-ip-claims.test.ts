/**
 * Issue 11 item 7 through the real gateway: client-IP claims from an untrusted peer never reach the
 * upstream; from a trusted proxy, `Forwarded` names the client when X-Forwarded-For does not.
 */
import { describe, expect, it } from 'vitest';
import { send } from '../support/http.js';
import { startTestGateway, gatewayFixture } from '../support/gateway.js';
import { CLIENT_IP_CLAIMS, REBUILT_HEADERS, SCHEME_CLAIMS } from '../../src/proxy/client-ip-headers.js';
import { ENV_ECHO_DIR, startPuma, whyNoPuma } from '../support/puma.js';

const RULE = `
limits:
  - name: per-ip
    match: GET /api/v1/timelines/public
    per: ip
    limit: 100
    period: 5m
`;
/** The test client is 127.0.0.1: with only 10/8 trusted it is an ordinary, untrusted client. */
const UNTRUSTED = `${RULE}\nclients: { trustedProxies: [10.0.0.0/8] }\n`;
/** The default trusts loopback: the test client plays a trusted proxy. */
const TRUSTED = RULE;
/** Loopback and one more proxy range named (the default trusts loopback only): hops in 10/8 are walked past. */
const TRUSTED_HOPS = `${RULE}\nclients: { trustedProxies: [loopback, 10.0.0.0/8] }\n`;

const CLAIMS = {
  Forwarded: 'for=198.51.100.1',
  'X-Real-IP': '198.51.100.2',
  'True-Client-IP': '198.51.100.3',
  'Client-IP': '198.51.100.4',
  'X-Client-IP': '198.51.100.5',
  'X-Forwarded-For': '198.51.100.6',
};

const fx = gatewayFixture({ graceMs: 500 });

async function get(headers: Record<string, string>) {
  const a = await send(fx.gw!.url, { path: '/api/v1/timelines/public', headers });
  expect(a.status).toBe(200);
  return fx.upstream.forwarded().at(-1)!.headers;
}

/** How many requests the per-ip bucket of `ip` has counted. */
async function counted(ip: string): Promise<number> {
  const r = await fetch(`${fx.gw!.adminUrl}/admin/buckets?rule=per-ip&key=${encodeURIComponent(ip)}`);
  const b = (await r.json()) as { limit: number; remaining: number };
  return b.limit - b.remaining;
}

describe('from an untrusted peer', () => {
  it('drops Forwarded, X-Real-IP, True-Client-IP, Client-IP and X-Client-IP, and rebuilds X-Forwarded-For', async () => {
    fx.gw = await startTestGateway(UNTRUSTED, { upstream: fx.upstream.url });
    const seen = await get(CLAIMS);
    for (const name of ['forwarded', 'x-real-ip', 'true-client-ip', 'client-ip', 'x-client-ip'])
      expect(seen[name], name).toBeUndefined();
    expect(seen['x-forwarded-for']).toBe('127.0.0.1');
    expect(await counted('127.0.0.1')).toBe(1);
    expect(await counted('198.51.100.1')).toBe(0);
  });
});

describe('from an untrusted peer, whatever the case of the names', () => {
  /** `name` with every other letter upper-cased, starting with the first (the upstream copy's filter reads names case-insensitively). */
  const mixed = (name: string): string => [...name].map((c, i) => (i % 2 === 0 ? c.toUpperCase() : c)).join('');

  it('drops every client-IP claim and rebuilds X-Forwarded-*, upper-case or mixed; a look-alike name passes', async () => {
    fx.gw = await startTestGateway(UNTRUSTED, { upstream: fx.upstream.url });
    const claims = [...CLIENT_IP_CLAIMS, ...REBUILT_HEADERS];
    for (const spell of [(n: string) => n.toUpperCase(), mixed]) {
      const headers: Record<string, string> = { 'X-REAL-IQ': 'look-alike', 'x-request-ID': 'not an id' };
      for (const name of claims) headers[spell(name)] = '198.51.100.9';
      const seen = await get(headers);
      for (const name of CLIENT_IP_CLAIMS) expect(seen[name], spell(name)).toBeUndefined();
      expect(seen.forwarded).toBeUndefined();
      expect(seen['x-forwarded-for']).toBe('127.0.0.1');
      expect(seen['x-forwarded-proto']).toBe('http');
      expect(seen['x-forwarded-host']).not.toBe('198.51.100.9');
      // Same length and first letter as X-Real-IP, yet another header: copied as it came.
      expect(seen['x-real-iq']).toBe('look-alike');
      // An id the gateway does not take (spaces) is replaced, not forwarded beside the gateway's.
      expect(seen['x-request-id']).toMatch(/^[\x21-\x7e]+$/);
    }
    expect(await counted('127.0.0.1')).toBe(2);
  });
});

/** `name` spelled with `_` for every `-`, in mixed case: Puma reads `X_Real_IP` as X-Real-IP (HTTP_X_REAL_IP). */
const underscored = (name: string): string =>
  name
    .split('-')
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('_');

/** Every name the gateway drops from an untrusted peer, each in its underscore spelling, claiming 6.6.6.6 or https. */
function underscoreClaims(): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of [...CLIENT_IP_CLAIMS, ...REBUILT_HEADERS]) headers[underscored(name)] = '6.6.6.6';
  headers.X_Forwarded_Proto = 'https';
  headers.X_Forwarded_Scheme = 'https';
  headers.X_Forwarded_Ssl = 'on';
  headers.Front_End_Https = 'on';
  headers.X_Forwarded_Port = '443';
  return headers;
}

/** `seen` (lower-case names) with `_` read as `-`, as Puma reads them: the value of every spelling of a name. */
function asPumaReads(seen: Record<string, unknown>): Map<string, unknown[]> {
  const out = new Map<string, unknown[]>();
  for (const [k, v] of Object.entries(seen)) {
    const name = k.replaceAll('_', '-');
    out.set(name, [...(out.get(name) ?? []), v]);
  }
  return out;
}

describe('from an untrusted peer, names spelled with underscores (issue 38 finding 5)', () => {
  it('drops every claim in its underscore spelling, and X-Forwarded-Scheme/-Ssl/-Port and Front-End-Https in either spelling; rebuilds Proto, Port and Ssl', async () => {
    fx.gw = await startTestGateway(UNTRUSTED, { upstream: fx.upstream.url });
    const dashed = {
      'X-Forwarded-Scheme': 'https',
      'X-Forwarded-Ssl': 'on',
      'Front-End-Https': 'on',
      'X-Forwarded-Port': '443',
    };
    for (const headers of [underscoreClaims(), dashed]) {
      const seen = asPumaReads(await get(headers));
      for (const name of [...CLIENT_IP_CLAIMS, ...SCHEME_CLAIMS, 'forwarded'])
        expect(seen.get(name), name).toBeUndefined();
      expect(seen.get('x-forwarded-for')).toEqual(['127.0.0.1']);
      expect(seen.get('x-forwarded-proto')).toEqual(['http']);
      expect(seen.get('x-forwarded-ssl')).toEqual(['off']);
      // The port of the Host the client connected to (as X-Forwarded-Host says), not the client's claim.
      expect(seen.get('x-forwarded-port')).toEqual([new URL(fx.gw.url).port]);
    }
    expect(await counted('127.0.0.1')).toBe(2);
  });

  it('drops an underscore spelling of the method override, which the gateway does not read', async () => {
    fx.gw = await startTestGateway(UNTRUSTED, { upstream: fx.upstream.url });
    const a = await send(fx.gw.url, {
      method: 'POST',
      path: '/api/v1/statuses',
      headers: { X_HTTP_Method_Override: 'DELETE', 'content-length': '0' },
    });
    expect(a.status).toBe(200);
    const seen = fx.upstream.forwarded().at(-1)!.headers;
    expect(asPumaReads(seen).get('x-http-method-override')).toBeUndefined();
  });

  it.skipIf(whyNoPuma() !== null)(
    "leaves no claim in the env real Puma builds, and Rack reads http on the listener's port; the gateway still answers",
    async () => {
      const puma = await startPuma(ENV_ECHO_DIR);
      try {
        fx.gw = await startTestGateway(UNTRUSTED, { upstream: puma.url });
        const a = await send(fx.gw.url, { path: '/api/v1/timelines/public', headers: underscoreClaims() });
        expect(a.status).toBe(200);
        const env = a.json<Record<string, unknown>>();
        for (const [k, v] of Object.entries(env)) expect(v, k).not.toBe('6.6.6.6');
        for (const k of [
          'HTTP_X_REAL_IP',
          'HTTP_CLIENT_IP',
          'HTTP_TRUE_CLIENT_IP',
          'HTTP_X_CLIENT_IP',
          'HTTP_CF_CONNECTING_IP',
          'HTTP_X_CLUSTER_CLIENT_IP',
          'HTTP_X_FORWARDED_SCHEME',
          'HTTP_FRONT_END_HTTPS',
        ])
          expect(env[k], k).toBeUndefined();
        expect(env.HTTP_X_FORWARDED_FOR).toBe('127.0.0.1');
        expect(env['rack.scheme']).toBe('http');
        expect(env['rack.ssl']).toBe(false);
        expect(env['rack.port']).toBe(Number(new URL(fx.gw.url).port));
        expect((await send(fx.gw.url, { path: '/api/v1/timelines/public' })).status).toBe(200);
      } finally {
        await fx.gw?.shutdown(500);
        fx.gw = undefined;
        await puma.stop();
      }
    },
  );
});

describe('from a trusted proxy', () => {
  it('passes X-Real-IP and the other claims on, as the proxy wrote them', async () => {
    fx.gw = await startTestGateway(TRUSTED, { upstream: fx.upstream.url });
    const { Forwarded: _f, 'X-Forwarded-For': _x, ...claims } = CLAIMS;
    const seen = await get(claims);
    expect(seen['x-real-ip']).toBe('198.51.100.2');
    expect(seen['client-ip']).toBe('198.51.100.4');
  });

  it('keeps its X-Forwarded-Proto, -Port and -Ssl, and passes X-Forwarded-Scheme and Front-End-Https on', async () => {
    fx.gw = await startTestGateway(TRUSTED, { upstream: fx.upstream.url });
    const seen = await get({
      'X-Forwarded-For': '192.0.2.7',
      'X-Forwarded-Proto': 'https',
      'X-Forwarded-Port': '8443',
      'X-Forwarded-Scheme': 'https',
      'Front-End-Https': 'on',
    });
    expect(seen['x-forwarded-proto']).toBe('https');
    expect(seen['x-forwarded-port']).toBe('8443');
    expect(seen['x-forwarded-ssl']).toBe('on');
    expect(seen['x-forwarded-scheme']).toBe('https');
    expect(seen['front-end-https']).toBe('on');
  });

  it('counts by the Forwarded for= node, and tells the upstream the same chain plus its own hop', async () => {
    fx.gw = await startTestGateway(TRUSTED, { upstream: fx.upstream.url });
    const seen = await get({ Forwarded: 'for=192.0.2.60;proto=http;by=203.0.113.43' });
    expect(await counted('192.0.2.60')).toBe(1);
    expect(await counted('127.0.0.1')).toBe(0);
    expect(seen.forwarded).toBe('for=192.0.2.60;proto=http;by=203.0.113.43, for=127.0.0.1');
    // Rails' RemoteIp reads only X-Forwarded-For: it gets the same chain.
    expect(seen['x-forwarded-for']).toBe('192.0.2.60, 127.0.0.1');
  });

  it('reads a quoted IPv6 node with a port, and walks past trusted hops right to left', async () => {
    fx.gw = await startTestGateway(TRUSTED_HOPS, { upstream: fx.upstream.url });
    await get({ Forwarded: 'for="[2001:db8:cafe::17]:4711"' });
    expect(await counted('2001:db8:cafe::1')).toBe(1); // the same /64
    await get({ Forwarded: 'for=203.0.113.9, for=198.51.100.70, for=10.1.2.3' });
    expect(await counted('198.51.100.70')).toBe(1);
    expect(await counted('203.0.113.9')).toBe(0);
  });

  it('stops at unknown or obfuscated nodes: the hop that passed them is counted', async () => {
    fx.gw = await startTestGateway(TRUSTED, { upstream: fx.upstream.url });
    await get({ Forwarded: 'for=198.51.100.80, for=unknown' });
    const seen = await get({ Forwarded: 'for=198.51.100.80, for=_gateway-7, for=10.9.9.9' });
    expect(await counted('10.9.9.9')).toBe(1);
    // The X-Forwarded-For the upstream gets stops where the walk stopped.
    expect(seen['x-forwarded-for']).toBe('10.9.9.9, 127.0.0.1');
    expect(await counted('127.0.0.1')).toBe(1);
    expect(await counted('198.51.100.80')).toBe(0);
  });

  it('lets X-Forwarded-For win over Forwarded, and then sends the upstream no Forwarded to disagree with it', async () => {
    fx.gw = await startTestGateway(TRUSTED, { upstream: fx.upstream.url });
    const seen = await get({ Forwarded: 'for=198.51.100.90', 'X-Forwarded-For': '192.0.2.91' });
    expect(await counted('192.0.2.91')).toBe(1);
    expect(await counted('198.51.100.90')).toBe(0);
    expect(seen.forwarded).toBeUndefined();
    expect(seen['x-forwarded-for']).toBe('192.0.2.91, 127.0.0.1');
  });
});
