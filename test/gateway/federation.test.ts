/**
 * Federation deliveries through the real gateway over loopback: inbox POSTs signed with real keys
 * (node:crypto, RSA-SHA256 in draft-cavage's `Signature:` form, Ed25519 in RFC 9421's
 * `Signature-Input:`/`Signature:` form), keyed `per: signature:domain` and `per: [signature:domain, ip]`:
 * buckets per remote server, a forger's deliveries from another IP, requests without a signature,
 * `missing: ip`, composite bans, the operator's views part by part, and hostile headers.
 */
import { createHash, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import type http from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { explain } from '../../src/cli/explain.js';
import { FakeClock } from '../support/clock.js';
import { send, type Answer } from '../support/http.js';
import { capturingLogger, gatewayFixture, startTestGateway } from '../support/gateway.js';
import { serve } from '../support/servers.js';
import { skipRedis, redisFixture } from '../support/redis.js';
import { eventually } from '../support/eventually.js';

const fx = gatewayFixture({ graceMs: 200 });

const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ed = generateKeyPairSync('ed25519');

interface Server {
  readonly domain: string;
  readonly form: 'cavage' | 'rfc9421';
  readonly key: KeyObject;
}
const MASTODON: Server = { domain: 'mastodon.example', form: 'cavage', key: rsa.privateKey };
const PLEROMA: Server = { domain: 'pleroma.example', form: 'rfc9421', key: ed.privateKey };

/** The headers a server signs a delivery of `body` to `path` with, as Mastodon (cavage) or an RFC 9421 sender does. */
function signedHeaders(
  from: Server,
  path: string,
  body: string,
  keyId = `https://${from.domain}/users/relay#main-key`,
): Record<string, string> {
  const date = new Date().toUTCString();
  const digest = createHash('sha256').update(body).digest('base64');
  if (from.form === 'cavage') {
    const signing = `(request-target): post ${path}\nhost: gateway.example\ndate: ${date}\ndigest: SHA-256=${digest}`;
    const signature = sign('sha256', Buffer.from(signing), from.key).toString('base64');
    return {
      Host: 'gateway.example',
      Date: date,
      Digest: `SHA-256=${digest}`,
      Signature: `keyId="${keyId}",algorithm="rsa-sha256",headers="(request-target) host date digest",signature="${signature}"`,
    };
  }
  const params = `("@method" "@target-uri" "content-digest");created=${Math.floor(Date.now() / 1000)};keyid="${keyId}";alg="ed25519"`;
  const base = `"@method": POST\n"@target-uri": https://gateway.example${path}\n"content-digest": sha-256=:${digest}:\n"@signature-params": ${params}`;
  const signature = sign(null, Buffer.from(base), from.key).toString('base64');
  return {
    Host: 'gateway.example',
    'Content-Digest': `sha-256=:${digest}:`,
    'Signature-Input': `sig1=${params}`,
    Signature: `sig1=:${signature}:`,
  };
}

const ACTIVITY = JSON.stringify({ type: 'Create', actor: 'https://mastodon.example/users/relay' });

function deliver(
  from: Server | null,
  ip: string,
  path = '/inbox',
  extra: Record<string, string> = {},
  url = fx.gw!.url,
): Promise<Answer> {
  const headers = {
    'Content-Type': 'application/activity+json',
    'X-Forwarded-For': ip,
    ...(from ? signedHeaders(from, path, ACTIVITY) : {}),
    ...extra,
  };
  return send(url, { method: 'POST', path, headers, body: ACTIVITY });
}

const admin = async <T>(path: string): Promise<T> => (await (await fetch(`${fx.gw!.adminUrl}${path}`)).json()) as T;

const PAIR = `limits:
  - name: inbox
    match: [POST /inbox, POST /users/:name/inbox, POST /actor/inbox]
    per: [signature:domain, ip]
    limit: 3
    period: 10m
    overrides: [{ keys: [[friends.example, 198.51.100.77]], limit: 6 }]
`;

describe('per: [signature:domain, ip]: a remote server from one address', () => {
  it('keeps one bucket per server and IP, for RSA draft-cavage and Ed25519 RFC 9421 signatures, on every inbox route', async () => {
    fx.gw = await startTestGateway(PAIR, { upstream: fx.upstream.url, now: new FakeClock().now });
    const paths = ['/inbox', '/users/alice/inbox', '/actor/inbox'];
    for (const from of [MASTODON, PLEROMA]) {
      for (const path of paths)
        expect((await deliver(from, '203.0.113.1', path)).status, `${from.domain} ${path}`).toBe(200);
      const fourth = await deliver(from, '203.0.113.1');
      expect(fourth.status, from.domain).toBe(429);
      expect(fourth.headers['ratelimit-policy']).toBe('"inbox";q=3;w=600');
      // The same server from another address, and nobody else, still pass.
      expect((await deliver(from, '203.0.113.2')).headers['x-ratelimit-remaining']).toBe('2');
    }
    // The deliveries reached the upstream with their signatures untouched.
    const seen = fx.upstream.seen.find((s) => s.headers['signature-input'] !== undefined)!;
    expect(seen.headers['signature-input']).toContain('keyid="https://pleroma.example/users/relay#main-key"');
    // A tuple in overrides.keys gives that server at that address its own limit.
    const friend: Server = { domain: 'friends.example', form: 'cavage', key: rsa.privateKey };
    for (let i = 0; i < 6; i++) expect((await deliver(friend, '198.51.100.77')).headers['x-ratelimit-limit']).toBe('6');
    expect((await deliver(friend, '198.51.100.77')).status).toBe(429);
    expect((await deliver(friend, '198.51.100.78')).headers['x-ratelimit-limit']).toBe('3');
  });

  it('resets the composite buckets holding a lifted IP (those that refused it), with /admin/blocks …?resetBuckets=true', async () => {
    fx.gw = await startTestGateway(PAIR, { upstream: fx.upstream.url, now: new FakeClock().now });
    const ip = '203.0.113.40';
    for (let i = 0; i < 3; i++) expect((await deliver(MASTODON, ip)).status).toBe(200);
    expect((await deliver(MASTODON, ip)).status).toBe(429);
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${fx.gw!.adminUrl}${path}`, {
        method,
        ...(body ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
      });
    expect((await call('POST', '/admin/blocks', { ip })).status).toBe(201);
    const lifted = (await (await call('DELETE', `/admin/blocks/${ip}?resetBuckets=true`)).json()) as {
      bucketsReset: number;
    };
    expect(lifted.bucketsReset).toBe(1);
    const again = await deliver(MASTODON, ip);
    expect(again.status).toBe(200);
    expect(again.headers['x-ratelimit-remaining']).toBe('2');
  });

  it('does not let a forger who names a victim server from another IP spend the victim’s budget', async () => {
    fx.gw = await startTestGateway(
      `${PAIR}  - { name: server-alone, match: POST /inbox, per: signature:domain, limit: 5, period: 10m, shadow: true }\n`,
      {
        upstream: fx.upstream.url,
        now: new FakeClock().now,
      },
    );
    // The forger holds no key of mastodon.example: it signs with its own and claims the victim's keyId.
    const forger: Server = {
      domain: 'mastodon.example',
      form: 'rfc9421',
      key: generateKeyPairSync('ed25519').privateKey,
    };
    const refused = [];
    for (let i = 0; i < 10; i++) refused.push((await deliver(forger, '192.0.2.66')).status);
    expect(refused.filter((s) => s === 429).length).toBe(7);
    // The real server, from its own address, has its whole budget.
    for (let i = 0; i < 3; i++) expect((await deliver(MASTODON, '203.0.113.10')).status).toBe(200);
    // A rule on the domain alone (here in shadow) was spent by the forger: what the IP part prevents.
    const alone = await admin<{ remaining: number; limited: boolean }>(
      '/admin/buckets?rule=server-alone&key=mastodon.example',
    );
    expect(alone).toMatchObject({ remaining: 0, limited: true });
    const own = await admin<{ key: string; remaining: number }>(
      '/admin/buckets?rule=inbox&key=mastodon.example&key=203.0.113.10',
    );
    expect(own).toMatchObject({ key: 'inbox:{sig:mastodon.example|ip:203.0.113.10}', remaining: 0 });
    const forged = await admin<{ remaining: number }>('/admin/buckets?rule=inbox&key=Mastodon.Example&key=192.0.2.66');
    expect(forged.remaining).toBe(0);
    // The buckets API says what a composite key takes when given one value.
    const wrong = await fetch(`${fx.gw.adminUrl}/admin/buckets?rule=inbox&key=mastodon.example`);
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as { error: string }).error).toMatch(/one value per part of \[signature:domain, ip\]/);
    // /admin/limited shows the limited keys part by part.
    const limited = await admin<{ top: { key: string }[] }>('/admin/limited?rule=inbox');
    expect(limited.top.map((k) => k.key)).toEqual(['signature mastodon.example + 192.0.2.66']);
  });
});

/** A cavage delivery whose `Signature:` header is `signature` (one header, or several lines). */
const claiming = (ip: string, signature: string | string[]) =>
  deliver(MASTODON, ip, '/inbox', { Signature: signature as string });
const REAL_KEY =
  'keyId="https://mastodon.example/users/relay#main-key",algorithm="rsa-sha256",headers="(request-target) host date digest",signature="c2ln"';

describe('the Signature header read as Mastodon reads it (issue 38, finding 2)', () => {
  it('keys a duplicated keyId on the last one, as Mastodon’s parameter hash keeps it: a fake first keyId escapes nothing', async () => {
    fx.gw = await startTestGateway(PAIR, { upstream: fx.upstream.url, now: new FakeClock().now });
    const ip = '203.0.113.101';
    for (let i = 0; i < 3; i++) expect((await deliver(MASTODON, ip)).status).toBe(200);
    for (let i = 0; i < 4; i++) {
      const r = await claiming(ip, `keyId="https://f${i}.example/users/x#main-key",${REAL_KEY}`);
      expect(r.status, `fake first keyId ${i}`).toBe(429);
    }
    // Two Signature headers reach Rails joined with ", " (Puma, as Node): one list, its last keyId.
    const twoLines = await claiming(ip, [`keyId="https://f9.example/k",signature="c2ln"`, REAL_KEY]);
    expect(twoLines.status).toBe(429);
    // And the other way round: a real-looking first keyId does not spend the real pair's bucket.
    const other = await claiming('203.0.113.102', `${REAL_KEY},keyId="https://elsewhere.example/k"`);
    expect(other.status).toBe(200);
    const bucket = await admin<{ remaining: number }>(
      '/admin/buckets?rule=inbox&key=elsewhere.example&key=203.0.113.102',
    );
    expect(bucket.remaining).toBe(2);
    expect((await fetch(`${fx.gw.adminUrl}/healthz`)).status).toBe(200);
  });

  it('reads KEYID as another parameter, never the keyId, and a header Mastodon cannot parse as no signature', async () => {
    fx.gw = await startTestGateway(PAIR, { upstream: fx.upstream.url, now: new FakeClock().now });
    const ip = '203.0.113.103';
    for (let i = 0; i < 3; i++) expect((await deliver(MASTODON, ip)).status).toBe(200);
    for (let i = 0; i < 3; i++) {
      expect(
        (await claiming(ip, `KEYID="https://g${i}.example/users/x#main-key",${REAL_KEY}`)).status,
        `KEYID ${i}`,
      ).toBe(429);
    }
    // KEYID alone, or a header with trailing junk, is unsigned to Mastodon: the per-pair rule does not apply.
    for (const h of [
      `KEYID="https://g9.example/k",signature="c2ln"`,
      `${REAL_KEY} junk`,
      `keyid="https://mastodon.example/k"`,
    ]) {
      const r = await claiming(ip, h);
      expect(r.status, h).toBe(200);
      expect(r.headers['ratelimit-policy'], h).toBeUndefined();
    }
    expect((await fetch(`${fx.gw.adminUrl}/healthz`)).status).toBe(200);
  });

  it('is read the same by explain: the last keyId, KEYID ignored, an unparsable header unsigned', async () => {
    const snap = parseConfig(PAIR, 't.yaml');
    const shown = async (signature: string) =>
      (await explain(snap, { request: 'POST /inbox', headers: [`Signature: ${signature}`], ip: '203.0.113.9' })).join(
        '\n',
      );
    expect(await shown(`keyId="https://f1.example/k",KEYID="https://f2.example/k",${REAL_KEY}`)).toContain(
      'key: signature domain mastodon.example (claimed, unverified)',
    );
    expect(await shown(`${REAL_KEY},keyId="https://f3.example/k"`)).toContain(
      'key: signature domain f3.example (claimed, unverified)',
    );
    expect(await shown(`${REAL_KEY},`)).toContain('no (no key: the request has no HTTP signature keyId)');
  });
});

describe('per: signature:domain: a remote server whatever its address', () => {
  it('limits one server delivering from 12 IPs while another server’s deliveries pass', async () => {
    const table =
      'limits:\n  - { name: per-server, match: [POST /inbox, POST /users/:name/inbox], per: signature:domain, limit: 24, period: 10m }\n';
    fx.gw = await startTestGateway(table, { upstream: fx.upstream.url, now: new FakeClock().now });
    for (let round = 0; round < 2; round++) {
      for (let i = 1; i <= 12; i++)
        expect((await deliver(MASTODON, `203.0.113.${i}`, '/users/bob/inbox')).status).toBe(200);
    }
    for (let i = 1; i <= 12; i++) expect((await deliver(MASTODON, `203.0.113.${i}`)).status).toBe(429);
    for (let i = 1; i <= 12; i++) expect((await deliver(PLEROMA, `198.51.100.${i}`)).status).toBe(200);
  });

  it('skips a request without a signature, or counts it per IP with missing: ip', async () => {
    const table = `limits:
  - { name: signed, match: POST /inbox, per: signature:domain, limit: 2, period: 10m }
  - { name: signed-or-ip, match: POST /inbox, per: signature:domain, missing: ip, limit: 4, period: 10m }
`;
    fx.gw = await startTestGateway(table, { upstream: fx.upstream.url, now: new FakeClock().now });
    const unsigned = await deliver(null, '203.0.113.50');
    expect(unsigned.headers['ratelimit-policy']).toBe('"signed-or-ip";q=4;w=600');
    for (const keyId of ['test-key-rsa-pss', 'acct:relay', 'ftp://mastodon.example/key']) {
      // A keyId that names no server is no signature domain either.
      const r = await deliver(MASTODON, '203.0.113.50', '/inbox', { Signature: `keyId="${keyId}",signature="c2ln"` });
      expect(r.headers['ratelimit-policy']).toBe('"signed-or-ip";q=4;w=600');
    }
    expect((await deliver(null, '203.0.113.50')).headers['x-ratelimit-remaining']).toBe('0');
    expect((await deliver(null, '203.0.113.50')).status).toBe(429);
    // Another address has its own per-IP bucket; a signed delivery from the limited address counts per server.
    expect((await deliver(null, '203.0.113.51')).status).toBe(200);
    const signed = await deliver(MASTODON, '203.0.113.50');
    expect(signed.status).toBe(200);
    expect(signed.headers['ratelimit-policy']).toBe('"signed";q=2;w=600, "signed-or-ip";q=4;w=600');
    const fallback = await admin<{ key: string; remaining: number }>(
      '/admin/buckets?rule=signed-or-ip&key=mastodon.example',
    );
    expect(fallback).toMatchObject({ key: 'signed-or-ip:{sig:mastodon.example}', remaining: 3 });
  });
});

describe('composite keys in bans, explain and the access log', () => {
  it('bans one server at one address, not the server elsewhere nor the address for others', async () => {
    const table = `limits: []
bans:
  - { name: inbox-flood, match: POST /inbox, per: [signature:domain, ip], limit: 3, period: 1m, ban: 1h }
`;
    fx.gw = await startTestGateway(table, { upstream: fx.upstream.url, now: new FakeClock().now });
    for (let i = 0; i < 4; i++) await deliver(MASTODON, '203.0.113.5');
    // The ban starts once the fourth answer is counted: the next deliveries are refused.
    await eventually(async () => (await deliver(MASTODON, '203.0.113.5')).status, {
      what: 'the server banned at that address',
      until: (s) => s === 403,
    });
    expect((await deliver(MASTODON, '203.0.113.6')).status).toBe(200);
    expect((await deliver(PLEROMA, '203.0.113.5')).status).toBe(200);
    expect((await deliver(null, '203.0.113.5')).status).toBe(200);
    // The ban is listed by its key, part by part, and lifted by it.
    const listed = await admin<{ bans: { ban: string; key: string }[] }>('/admin/bans');
    expect(listed.bans.map((b) => `${b.ban} ${b.key}`)).toEqual(['inbox-flood sig:mastodon.example|ip:203.0.113.5']);
    const lift = await fetch(
      `${fx.gw.adminUrl}/admin/bans/inbox-flood/${encodeURIComponent('sig:mastodon.example|ip:203.0.113.5')}`,
      { method: 'DELETE' },
    );
    expect(lift.status).toBe(200);
    expect((await deliver(MASTODON, '203.0.113.5')).status).toBe(200);
  });

  it('holds one in-flight slot per server and IP', async () => {
    const held: http.ServerResponse[] = [];
    fx.upstream.route('/slow/inbox', (req, res) => {
      req.resume();
      held.push(res);
    });
    const table =
      'limits: []\nconcurrency:\n  - { name: inbox-slots, match: POST /slow/inbox, per: [signature:domain, ip], max: 1 }\n';
    fx.gw = await startTestGateway(table, { upstream: fx.upstream.url, now: new FakeClock().now });
    const first = deliver(MASTODON, '203.0.113.60', '/slow/inbox');
    await eventually(() => held.length >= 1, { what: 'the first delivery held upstream' });
    const second = await deliver(MASTODON, '203.0.113.60', '/slow/inbox');
    expect(second.status).toBe(429);
    expect(second.headers['retry-after']).toBe('1');
    // Another address of the same server, and another server at the same address, have their own slots.
    const others = [deliver(MASTODON, '203.0.113.61', '/slow/inbox'), deliver(PLEROMA, '203.0.113.60', '/slow/inbox')];
    await eventually(() => held.length >= 3, { what: '3 deliveries held upstream' });
    expect(held.length).toBe(3);
    for (const res of held) res.writeHead(202).end();
    expect((await Promise.all([first, ...others])).map((a) => a.status)).toEqual([202, 202, 202]);
    // The slot is free again once the answer ended.
    const again = deliver(MASTODON, '203.0.113.60', '/slow/inbox');
    await eventually(() => held.length >= 4, { what: '4 deliveries held upstream' });
    held[3]!.writeHead(202).end();
    expect((await again).status).toBe(202);
  });

  it('logs the key of a 429 part by part, and explain shows it', async () => {
    const { logger, lines } = capturingLogger();
    fx.gw = await startTestGateway(`${PAIR}log: { client: digest }\n`, {
      upstream: fx.upstream.url,
      now: new FakeClock().now,
      logger,
    });
    for (let i = 0; i < 4; i++) await deliver(MASTODON, '203.0.113.9');
    const limited = lines.filter((l) => l.msg === 'request' && l.status === 429).at(-1)!;
    const ipDigest = createHash('sha256').update('203.0.113.9').digest('hex').slice(0, 16);
    expect(limited.client).toBe(ipDigest);
    expect(limited.key).toBe(`signature mastodon.example + ${ipDigest}`);
    expect(lines.filter((l) => l.msg === 'request' && l.status === 200).every((l) => l.key === undefined)).toBe(true);

    const snap = parseConfig(PAIR, 't.yaml');
    const headers = Object.entries(signedHeaders(MASTODON, '/inbox', ACTIVITY)).map(([k, v]) => `${k}: ${v}`);
    const shown = await explain(snap, { request: 'POST /inbox', headers, ip: '203.0.113.9' });
    expect(shown.join('\n')).toContain(
      '1. inbox: yes, per [signature:domain, ip] (+1 override), 3/10m, key: signature domain mastodon.example (claimed, unverified) + ip 203.0.113.9',
    );
    const unsigned = await explain(snap, { request: 'POST /inbox', headers: [], ip: '203.0.113.9' });
    expect(unsigned).toContain('   1. inbox: no (no key: the request has no HTTP signature keyId)');
  });
});

/**
 * An upstream that verifies RFC 9421 deliveries as Mastodon does (the key of the claimed keyid, over the
 * signature base), answering 401 to a bad signature: the test's servers' public keys stand for the key
 * fetch. `@target-uri` is the URL as Rails reads it behind proxies (X-Forwarded-Proto and -Host).
 */
function verifyingInbox(req: http.IncomingMessage, res: http.ServerResponse): void {
  const keys: Record<string, KeyObject> = { 'mastodon.example': rsa.publicKey, 'pleroma.example': ed.publicKey };
  const h = (n: string) => String(req.headers[n] ?? '');
  req.resume();
  req.on('end', () => {
    const input = /^sig1=(.*;keyid="https:\/\/([^/]+)\/[^"]*".*)$/.exec(h('signature-input'));
    let ok = false;
    if (input) {
      const base = `"@method": POST\n"@target-uri": ${h('x-forwarded-proto')}://${h('x-forwarded-host')}${req.url}\n"content-digest": ${h('content-digest')}\n"@signature-params": ${input[1]}`;
      const key = keys[input[2]!];
      ok =
        key !== undefined &&
        verify(null, Buffer.from(base), key, Buffer.from(/^sig1=:(.*):$/.exec(h('signature'))?.[1] ?? '', 'base64'));
    }
    res.writeHead(ok ? 202 : 401).end();
  });
}

describe('a ban on the upstream’s verdict', () => {
  it('bans the pair whose signatures the upstream refuses, never the real server', async () => {
    fx.upstream.route('/verified/inbox', verifyingInbox);
    const table = `limits: []
bans:
  - { name: bad-signatures, match: POST /verified/inbox, per: [signature:domain, ip], on: { status: [401] }, limit: 3, period: 10m, ban: 1h }
`;
    fx.gw = await startTestGateway(table, { upstream: fx.upstream.url, now: new FakeClock().now });
    const forger: Server = {
      domain: 'pleroma.example',
      form: 'rfc9421',
      key: generateKeyPairSync('ed25519').privateKey,
    };
    // The TLS proxy in front (loopback: trusted) names the scheme and host the sender signed.
    const proxied = { 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'gateway.example' };
    const forged: number[] = [];
    for (let i = 0; i < 4; i++) forged.push((await deliver(forger, '192.0.2.66', '/verified/inbox', proxied)).status);
    expect(forged.slice(0, 3)).toEqual([401, 401, 401]);
    if (forged[3] !== 403) {
      await eventually(async () => (await deliver(forger, '192.0.2.66', '/verified/inbox', proxied)).status, {
        what: 'the forger banned',
        until: (s) => s === 403,
      });
    }
    // The real server's deliveries verify and pass, many more than the ban's limit.
    for (let i = 0; i < 6; i++)
      expect((await deliver(PLEROMA, '203.0.113.40', '/verified/inbox', proxied)).status).toBe(202);
  });
});

/** An upstream that verifies draft-cavage deliveries as Mastodon does: the signed headers as they arrive, `host` among them. */
function verifyingCavageInbox(req: http.IncomingMessage, res: http.ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const sig = String(req.headers.signature ?? '');
    const param = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(sig)?.[1] ?? '';
    const digestOk =
      req.headers.digest === `SHA-256=${createHash('sha256').update(Buffer.concat(chunks)).digest('base64')}`;
    const signed = param('headers')
      .split(' ')
      .map((h) =>
        h === '(request-target)'
          ? `${h}: ${req.method!.toLowerCase()} ${req.url}`
          : `${h}: ${String(req.headers[h] ?? '')}`,
      )
      .join('\n');
    const ok =
      digestOk &&
      param('keyId').startsWith('https://mastodon.example/') &&
      verify('sha256', Buffer.from(signed), rsa.publicKey, Buffer.from(param('signature'), 'base64'));
    res.writeHead(ok ? 202 : 401).end();
  });
}

describe('draft-cavage deliveries signed over Host', () => {
  it('reach a verifying upstream intact with upstream.host: client, and fail without it', async () => {
    fx.upstream.route('/cavage/inbox', verifyingCavageInbox);
    const table =
      'limits:\n  - { name: inbox, match: POST /cavage/inbox, per: [signature:domain, ip], limit: 3, period: 10m }\n';
    fx.gw = await startTestGateway(`${table}upstream: { host: client }\n`, {
      upstream: fx.upstream.url,
      now: new FakeClock().now,
    });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await deliver(MASTODON, '203.0.113.90', '/cavage/inbox')).status);
    expect(statuses).toEqual([202, 202, 202, 429]);
    await fx.gw.shutdown(200);
    // The upstream's own Host is not the one signed: the upstream refuses the delivery.
    fx.gw = await startTestGateway(table, { upstream: fx.upstream.url, now: new FakeClock().now });
    expect((await deliver(MASTODON, '203.0.113.90', '/cavage/inbox')).status).toBe(401);
  });
});

describe('hostile signature headers', () => {
  it('answers huge, malformed and binary signature headers, and the process stays alive', async () => {
    const table =
      'limits:\n  - { name: inbox, match: POST /inbox, per: [signature:domain, ip], missing: ip, limit: 1000, period: 10m }\n';
    fx.gw = await startTestGateway(table, { upstream: fx.upstream.url, now: new FakeClock().now });
    const hostile = [
      '"'.repeat(12_000),
      `keyId="https://a.example/${'x'.repeat(9000)}"`,
      'keyId="https://' + 'a.'.repeat(4000) + 'example/"',
      ';keyid='.repeat(1500),
      '\\'.repeat(12_000),
      'keyId="https://{evil}.example/"',
      'keyId="https://a.example|ip:1.2.3.4/"',
      'keyId="javascript:alert(1)"',
      'keyId="https://[::1/"',
      'keyid=',
      '=',
      ',,,,,,,,',
    ];
    for (const h of hostile) {
      const r = await deliver(null, '203.0.113.77', '/inbox', { Signature: h, 'Signature-Input': `sig1=();${h}` });
      expect([200, 431], h.slice(0, 40)).toContain(r.status);
    }
    const binary = await send(fx.gw.url, {
      method: 'POST',
      path: '/inbox',
      headers: {
        'X-Forwarded-For': '203.0.113.78',
        Signature: Buffer.from([0x6b, 0x65, 0x79, 0x49, 0x64, 0x3d, 0x22, 0xff, 0xfe, 0x22]).toString('latin1'),
      },
      body: '{}',
    });
    expect(binary.status).toBe(200);
    // Every one of them counted per IP (missing: ip), none under a made-up server.
    const bucket = await admin<{ remaining: number }>('/admin/buckets?rule=inbox&key=a.example&key=203.0.113.77');
    expect(bucket.remaining).toBe(1000);
    expect((await deliver(MASTODON, '203.0.113.77')).status).toBe(200);
    expect((await fetch(`${fx.gw.adminUrl}/healthz`)).status).toBe(200);
  });
});

const EXAMPLE = readFileSync(fileURLToPath(new URL('../../config/examples/mastodon.yaml', import.meta.url)), 'utf8');
/** The shipped example with its inbox figures lowered to a test's scale (each replaced once, checked). */
function exampleWith(figures: Record<string, string>): string {
  return Object.entries(figures).reduce((text, [from, to]) => {
    expect(text.split(from).length, from).toBe(2);
    return text.replace(from, to);
  }, EXAMPLE);
}
/** A delivery claiming a made-up server, new each time, as a client rotating its claim sends it. */
const rotating = (ip: string, n: number, path = '/inbox', url = fx.gw!.url) =>
  send(url, {
    method: 'POST',
    path,
    headers: {
      'Content-Type': 'application/activity+json',
      'X-Forwarded-For': ip,
      Signature: `keyId="https://f${n}.example/users/x#main-key",algorithm="rsa-sha256",headers="(request-target) host date digest",signature="c2ln"`,
    },
    body: ACTIVITY,
  });

describe('the shipped Mastodon example: inbox rules on by default (issue 31, issue 38)', () => {
  it('counts deliveries per remote server and IP in front of the built-in upstream', async () => {
    fx.gw = await startTestGateway(exampleWith({ 'limit: 3000': 'limit: 5' }), {
      upstream: 'builtin',
      now: new FakeClock().now,
    });
    for (let i = 0; i < 5; i++)
      expect((await deliver(MASTODON, '203.0.113.20', '/users/admin/inbox')).status).not.toBe(429);
    expect((await deliver(MASTODON, '203.0.113.20', '/actor/inbox')).status).toBe(429);
    expect((await deliver(MASTODON, '203.0.113.21')).status).not.toBe(429);
    expect((await deliver(PLEROMA, '203.0.113.20')).status).not.toBe(429);
  });

  it('counts /inbox.json and /users/:name/inbox.json, which Rails routes to the inboxes, in the same buckets', async () => {
    fx.gw = await startTestGateway(exampleWith({ 'limit: 3000': 'limit: 2' }), {
      upstream: fx.upstream.url,
      now: new FakeClock().now,
    });
    const ip = '203.0.113.22';
    const statuses = [];
    for (const path of [
      '/inbox.json',
      '/users/alice/inbox.json',
      '/inbox.json',
      '/actor/inbox.json',
      '/inbox',
      '/inbox.json',
    ]) {
      statuses.push((await deliver(MASTODON, ip, path)).status);
    }
    expect(statuses).toEqual([200, 200, 429, 429, 429, 429]);
    expect((await deliver(MASTODON, '203.0.113.23', '/inbox.json')).headers['ratelimit-policy']).toBe(
      '"inbox-per-server";q=2;w=300, "inbox-per-address";q=6000;w=300',
    );
    expect((await fetch(`${fx.gw.adminUrl}/healthz`)).status).toBe(200);
  });

  it('limits an address that claims a new server per delivery: 6 of 20 forwarded, the real server elsewhere untouched', async () => {
    fx.gw = await startTestGateway(exampleWith({ 'limit: 3000': 'limit: 3', 'limit: 6000': 'limit: 6' }), {
      upstream: fx.upstream.url,
      now: new FakeClock().now,
    });
    const statuses = [];
    for (let n = 0; n < 20; n++) statuses.push((await rotating('192.0.2.66', n)).status);
    expect(statuses.filter((s) => s === 200).length).toBe(6);
    expect(statuses.slice(6).every((s) => s === 429)).toBe(true);
    expect(fx.upstream.seen.filter((r) => r.url === '/inbox').length).toBe(6);
    // Unsigned deliveries from that address are the same address: refused too.
    expect((await deliver(null, '192.0.2.66')).status).toBe(429);
    for (let i = 0; i < 3; i++) expect((await deliver(MASTODON, '203.0.113.24')).status).toBe(200);
    expect((await fetch(`${fx.gw.adminUrl}/healthz`)).status).toBe(200);
  });

  it('bans an address whose made-up servers all fail verification, though no pair is ever banned', async () => {
    const verifying = await serve(verifyingCavageInbox);
    try {
      const table = exampleWith({ 'limit: 20\n': 'limit: 3\n', 'limit: 60\n': 'limit: 5\n' });
      fx.gw = await startTestGateway(table, { upstream: verifying.url, now: new FakeClock().now });
      const forged: number[] = [];
      for (let n = 0; n < 5; n++) forged.push((await rotating('192.0.2.77', n)).status);
      expect(forged).toEqual([401, 401, 401, 401, 401]);
      await eventually(async () => (await rotating('192.0.2.77', 100)).status, {
        what: 'the address banned',
        until: (s) => s === 403,
      });
      const bans = await admin<{ bans: { ban: string }[] }>('/admin/bans');
      expect(bans.bans.map((b) => b.ban)).toEqual(['bad-signatures-per-address']);
      // A claim from another server, or none, from that address is the same address: banned.
      expect((await rotating('192.0.2.77', 101)).status).toBe(403);
      expect((await deliver(MASTODON, '192.0.2.77')).status).toBe(403);
      // The real server, from its own address, verifies and passes.
      for (let i = 0; i < 6; i++) expect((await deliver(MASTODON, '203.0.113.25')).status).toBe(202);
      expect((await fetch(`${fx.gw.adminUrl}/healthz`)).status).toBe(200);
    } finally {
      await fx.gw?.shutdown(200);
      fx.gw = undefined;
      await verifying.close();
    }
  });
});

const noRedis = skipRedis('composite keys on Redis');
describe.skipIf(noRedis)('composite keys on Redis, two gateways', () => {
  const redis = redisFixture();

  it('shares one bucket per server and IP across replicas', async () => {
    const table = PAIR.replace('limit: 3', 'limit: 4');
    fx.gw = await startTestGateway(table, { upstream: fx.upstream.url, store: redis.url });
    const other = await startTestGateway(table, { upstream: fx.upstream.url, store: redis.url });
    try {
      const urls = [fx.gw.url, other.url];
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++)
        statuses.push((await deliver(PLEROMA, '203.0.113.30', '/inbox', {}, urls[i % 2])).status);
      expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
      expect((await deliver(PLEROMA, '203.0.113.31', '/inbox', {}, other.url)).status).toBe(200);
      expect((await deliver(MASTODON, '203.0.113.30', '/inbox', {}, other.url)).status).toBe(200);
      const bucket = (await (
        await fetch(`${other.adminUrl}/admin/buckets?rule=inbox&key=pleroma.example&key=203.0.113.30`)
      ).json()) as Record<string, unknown>;
      expect(bucket).toMatchObject({ key: 'inbox:{sig:pleroma.example|ip:203.0.113.30}', remaining: 0, limited: true });
    } finally {
      await other.shutdown(200);
    }
  });
});
