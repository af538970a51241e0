/**
 * Issue 38, finding 1: any web page could write to the admin API. With the documented default (admin on
 * loopback, no token) a cross-site "simple" request (text/plain body, a foreign Origin) and a DNS-rebinding
 * page (a foreign Host) were obeyed. Now the admin listener refuses a Host that names none of its
 * addresses, and a write from another origin or whose body is not JSON; its own clients (curl, the CLI,
 * the status page) still pass. Raw HTTP with forged headers here; a real browser in status-browser.test.ts.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { canonicalHost, listenerNames } from '../../src/admin/browser-check.js';
import { SEED_TABLE, gatewayFixture, startTestGateway, type TestGateway } from '../support/gateway.js';
import { send, statusFor, type Answer } from '../support/http.js';

const fx = gatewayFixture({ graceMs: 200 });
const LIMITED = '192.0.2.77';
const EVERYONE = JSON.stringify({ cidr: '0.0.0.0/0', for: '1h', reason: 'pwned' });

async function gateway(extra = ''): Promise<TestGateway> {
  return (fx.gw = await startTestGateway(`${SEED_TABLE}\n${extra}\n`, { upstream: fx.upstream.url }));
}

function admin(
  g: TestGateway,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<Answer> {
  return send(g.adminUrl, {
    method,
    path,
    headers: { ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}), ...headers },
    ...(body !== undefined ? { body } : {}),
  });
}

/** Sign-up is 5 per 30 minutes per IP: the sixth is limited. */
async function limitedClient(g: TestGateway): Promise<void> {
  for (let i = 0; i < 5; i++)
    expect(await statusFor(`${g.url}/api/v1/accounts`, LIMITED, { method: 'POST' })).not.toBe(429);
  expect(await statusFor(`${g.url}/api/v1/accounts`, LIMITED, { method: 'POST' })).toBe(429);
}

async function runtimeEntries(g: TestGateway, section: 'blocks' | 'exemptions'): Promise<unknown[]> {
  const list = (await (await fetch(`${g.adminUrl}/admin/${section}`)).json()) as { entries: { source: string }[] };
  return list.entries.filter((e) => e.source === 'runtime');
}

async function stillServes(g: TestGateway): Promise<void> {
  expect((await fetch(`${g.adminUrl}/healthz`)).status).toBe(200);
  expect((await fetch(`${g.adminUrl}/admin/blocks`)).status).toBe(200);
}

describe('a cross-site "simple" write to the admin API (no token, loopback listener)', () => {
  it('is refused: POST /admin/exemptions {"cidr":"0.0.0.0/0"} as text/plain from another origin exempts nobody', async () => {
    const g = await gateway();
    await limitedClient(g);
    const host = new URL(g.adminUrl).host;
    const crossSite = await admin(
      g,
      'POST',
      '/admin/exemptions',
      { host, origin: 'http://evil.example', 'content-type': 'text/plain' },
      EVERYONE,
    );
    expect(crossSite.status).toBe(403);
    expect(crossSite.json<{ error: string }>().error).toMatch(/cross-origin.*evil\.example/);
    // The same body from no browser at all, still text/plain (what a form-less page could not set otherwise): 415.
    const textPlain = await admin(
      g,
      'POST',
      '/admin/exemptions',
      { host, 'content-type': 'text/plain;charset=UTF-8' },
      EVERYONE,
    );
    expect(textPlain.status).toBe(415);
    expect(textPlain.json<{ error: string }>().error).toMatch(/application\/json/);
    const form = await admin(
      g,
      'POST',
      '/admin/blocks',
      { host, 'content-type': 'application/x-www-form-urlencoded' },
      'cidr=0.0.0.0/0',
    );
    expect(form.status).toBe(415);
    const noType = await admin(g, 'POST', '/admin/blocks', { host }, EVERYONE);
    expect(noType.status).toBe(415);
    expect(await runtimeEntries(g, 'exemptions')).toEqual([]);
    expect(await runtimeEntries(g, 'blocks')).toEqual([]);
    expect(await statusFor(`${g.url}/api/v1/accounts`, LIMITED, { method: 'POST' })).toBe(429);
    await stillServes(g);
  });

  it('is refused when Sec-Fetch-Site says cross-site or same-site (another port of 127.0.0.1), even with a JSON body', async () => {
    const g = await gateway();
    const host = new URL(g.adminUrl).host;
    for (const site of ['cross-site', 'same-site']) {
      const r = await admin(
        g,
        'POST',
        '/admin/blocks',
        { host, 'sec-fetch-site': site, 'content-type': 'application/json' },
        EVERYONE,
      );
      expect(r.status, site).toBe(403);
      expect(r.json<{ error: string }>().error).toMatch(/Sec-Fetch-Site/);
    }
    // An Origin on another port, and the opaque `null` of a sandboxed frame or a redirect.
    const port = Number(new URL(g.adminUrl).port);
    for (const origin of [`http://127.0.0.1:${port + 1}`, 'null', `http://localhost:${port}`]) {
      expect((await admin(g, 'DELETE', '/admin/blocks/198.51.100.1', { host, origin })).status, origin).toBe(403);
    }
    expect((await admin(g, 'POST', `/admin/surges/none/start`, { host, origin: 'http://evil.example' })).status).toBe(
      403,
    );
    expect(await runtimeEntries(g, 'blocks')).toEqual([]);
    await stillServes(g);
  });

  it('still takes a write from its own origin (the status page) and from clients that are no browser (curl, the CLI)', async () => {
    const g = await gateway();
    const host = new URL(g.adminUrl).host;
    const json = { host, 'content-type': 'application/json; charset=utf-8' };
    const own = await admin(
      g,
      'POST',
      '/admin/blocks',
      { ...json, origin: `http://${host}`, 'sec-fetch-site': 'same-origin' },
      JSON.stringify({ ip: '198.51.100.1' }),
    );
    expect(own.status).toBe(201);
    expect((await admin(g, 'POST', '/admin/blocks', json, JSON.stringify({ ip: '198.51.100.2' }))).status).toBe(201);
    // A write without a body (a removal, a surge's start) needs no content type.
    expect((await admin(g, 'DELETE', '/admin/blocks/198.51.100.1', { host, origin: `http://${host}` })).status).toBe(
      200,
    );
    expect((await admin(g, 'DELETE', '/admin/blocks/198.51.100.2', { host })).status).toBe(200);
  });
});

describe('a DNS-rebinding page (a foreign Host on the admin listener)', () => {
  const REBIND = 'rebind.evil.example:9464';

  it('can neither write nor read: blocks, exemptions, the status page and its JSON, bans, limited are refused 421', async () => {
    const g = await gateway();
    await limitedClient(g);
    const json = { host: REBIND, 'content-type': 'application/json' };
    expect((await admin(g, 'POST', '/admin/exemptions', json, EVERYONE)).status).toBe(421);
    const block = await admin(g, 'POST', '/admin/blocks', { ...json, origin: `http://${REBIND}` }, EVERYONE);
    expect(block.status).toBe(421);
    expect(block.json<{ error: string }>().error).toMatch(/admin\.allowedHosts/);
    for (const path of [
      '/status.json',
      '/',
      '/status',
      '/admin/bans',
      '/admin/blocks',
      '/admin/exemptions',
      '/admin/limited?rule=sign-up',
      '/admin/buckets?rule=sign-up&key=192.0.2.77',
    ]) {
      const r = await admin(g, 'GET', path, { host: REBIND });
      expect(r.status, path).toBe(421);
      expect(r.body, path).not.toContain(LIMITED);
    }
    expect(await runtimeEntries(g, 'exemptions')).toEqual([]);
    expect(await runtimeEntries(g, 'blocks')).toEqual([]);
    expect(await statusFor(`${g.url}/api/v1/accounts`, LIMITED, { method: 'POST' })).toBe(429);
    // Metrics and probes carry no address and stay open to any Host (scrapes name pods and Services).
    expect((await admin(g, 'GET', '/metrics', { host: REBIND })).status).toBe(200);
    expect((await admin(g, 'GET', '/healthz', { host: REBIND })).status).toBe(200);
    await stillServes(g);
  });

  it('answers the listener’s own names: its address, localhost on any port, [::1] and its long form, and no Host (HTTP/1.0)', async () => {
    const g = await gateway();
    for (const host of [
      new URL(g.adminUrl).host,
      'localhost:19464',
      'LOCALHOST',
      'localhost.',
      '[::1]:9464',
      '[0:0:0:0:0:0:0:1]',
      '127.0.0.1',
    ]) {
      expect((await admin(g, 'GET', '/status.json', { host })).status, host).toBe(200);
    }
    for (const host of [
      '127.0.0.1.evil.example',
      'localhost@evil.example',
      '127.1',
      '0x7f.0.0.1',
      'evil.example',
      '[::1',
      'a b',
    ]) {
      expect((await admin(g, 'GET', '/admin/blocks', { host })).status, JSON.stringify(host)).toBe(421);
    }
    const http10 = await rawRequest(g.adminUrl, 'GET /admin/blocks HTTP/1.0\r\n\r\n');
    expect(http10).toMatch(/^HTTP\/1\.1 200 /);
    const empty = await rawRequest(g.adminUrl, 'GET /admin/blocks HTTP/1.1\r\nHost: \r\nConnection: close\r\n\r\n');
    expect(empty).toMatch(/^HTTP\/1\.1 421 /);
    await stillServes(g);
  });

  it('answers a name listed in admin.allowedHosts, its port not compared', async () => {
    const g = await gateway('admin: { allowedHosts: [rategate-metrics.ops.svc, "2001:db8::9"] }');
    expect((await admin(g, 'GET', '/status.json', { host: 'rategate-metrics.ops.svc:9464' })).status).toBe(200);
    expect((await admin(g, 'GET', '/status.json', { host: 'Rategate-Metrics.ops.svc' })).status).toBe(200);
    expect((await admin(g, 'GET', '/status.json', { host: '[2001:db8:0::9]:9464' })).status).toBe(200);
    expect((await admin(g, 'GET', '/status.json', { host: 'other.ops.svc' })).status).toBe(421);
  });
});

describe('the names of a listener', () => {
  const interfaces = {
    lo: [{ address: '127.0.0.1' }, { address: '::1' }],
    eth0: [{ address: '10.1.2.3' }, { address: 'fe80::1' }],
  } as unknown as NodeJS.Dict<import('node:os').NetworkInterfaceInfo[]>;

  it('are every interface address and localhost for 0.0.0.0 and ::, the address (and localhost on loopback) otherwise', () => {
    expect([...listenerNames('0.0.0.0:9464', interfaces)].sort()).toEqual([
      '10.1.2.3',
      '127.0.0.1',
      '::1',
      'fe80::1',
      'localhost',
    ]);
    expect([...listenerNames('[::]:9464', interfaces)].sort()).toEqual([
      '10.1.2.3',
      '127.0.0.1',
      '::1',
      'fe80::1',
      'localhost',
    ]);
    expect([...listenerNames('127.0.0.1:9464', interfaces)].sort()).toEqual(['127.0.0.1', '::1', 'localhost']);
    expect([...listenerNames('10.1.2.3:9464', interfaces)]).toEqual(['10.1.2.3']);
  });

  it('are compared in one canonical form', () => {
    expect(canonicalHost('[::FFFF:127.0.0.1]:1')).toBe('127.0.0.1');
    expect(canonicalHost('Example.COM.:80')).toBe('example.com');
    expect(canonicalHost('x@127.0.0.1')).toBeNull();
    expect(canonicalHost('[fe80::1%25eth0]')).toBeNull();
  });
});

/** One request written by hand (fetch and node:http always send a Host); the raw answer. */
function rawRequest(url: string, text: string): Promise<string> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(Number(u.port), u.hostname, () => socket.end(text));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.on('error', reject);
  });
}
