/** `rategate explain`: the rules a described request would be counted by, and why the others would not. */
import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadConfigFile, parseConfig } from '../../src/config/index.js';
import { explain } from '../../src/cli/explain.js';
import { cliArgs } from '../support/process.js';
import { scaledMs } from '../support/speed.js';

const EXAMPLE = fileURLToPath(new URL('../../config/examples/mastodon.yaml', import.meta.url));
const mastodon = await loadConfigFile(EXAMPLE);

describe('rategate explain', () => {
  it('lists every rule in table order: the ones that count the request with their key, the others with why not', async () => {
    const lines = await explain(mastodon, {
      request: 'POST /auth/password.json',
      headers: [],
      ip: '203.0.113.9',
      body: '{"user":{"email":" A@Example.COM\\u0000"}}',
    });
    expect(lines[0]).toBe('POST /auth/password.json  from 203.0.113.9');
    expect(lines[1]).toBe('  account: none (no bearer token)');
    expect(lines).toContain('   1. authenticated-api: no (path: not /api/*)');
    expect(lines).toContain('   7. authenticated-paging: no (when.authenticated: the request has no account)');
    expect(lines).toContain(
      '   8. unauthenticated-paging: no (when.query: none of page, min_id, max_id, since_id is in the query string or a form body)',
    );
    expect(lines).toContain('  11. password-resets-ip: yes, per ip, 25/5m, key: ip 203.0.113.9');
    expect(lines.find((l) => l.startsWith('  12.'))).toMatch(
      /^ {2}12\. password-resets-email: yes, per param:user\[email\], 5\/30m, key: parameter user\[email\] "a@example\.com", digest [0-9a-f]{12}…$/,
    );
    // The digest is the normalized value's: every capitalisation and NUL-padded variant is one bucket.
    const digest = createHash('sha256').update('a@example.com').digest('hex').slice(0, 12);
    expect(lines.find((l) => l.startsWith('  12.'))).toContain(`digest ${digest}…`);
    // The rule order is the table's: 22 rules, then the headers.
    expect(lines.filter((l) => /^ +\d+\. /.test(l))).toHaveLength(22);
    expect(lines.at(-2)).toBe(
      '  headers: X-RateLimit-* of password-resets-email (limit 5) while buckets are fresh; at run time the one closest to exhaustion',
    );
    // The header as the gateway sends it: the bucket closest to exhaustion first.
    expect(lines.at(-1)).toBe(
      '  RateLimit-Policy: "password-resets-email";q=5;w=1800, "password-resets-ip";q=25;w=300',
    );
  });

  it('says when a rule lacks its key, when the method is wrong, and which override applies', async () => {
    const snap = parseConfig(
      `limits:
  - { name: apps, match: /api/*, per: "header:X-App-Id", limit: 10, period: 5m }
  - { name: deletes, match: DELETE /api/v1/statuses/:id, per: account, limit: 30, period: 30m }
  - name: api
    match: /api/*
    per: ip
    limit: 300
    period: 5m
    overrides: [{ ips: [203.0.113.0/24], limit: 3000 }]
`,
      't.yaml',
    );
    const lines = await explain(snap, { request: 'GET /api/v1/statuses/1', headers: [], ip: '203.0.113.5' });
    expect(lines).toEqual([
      'GET /api/v1/statuses/1  from 203.0.113.5',
      '  account: none (no bearer token)',
      '   1. apps: no (no key: the request has no header x-app-id)',
      '   2. deletes: no (method: GET is not DELETE)',
      '   3. api: yes, per ip (+1 override), 3000/5m (overrides[0], own bucket), key: ip 203.0.113.5',
      '  headers: X-RateLimit-* of api (limit 3000) while buckets are fresh; at run time the one closest to exhaustion',
      '  RateLimit-Policy: "api";q=3000;w=300',
    ]);
    const withHeader = await explain(snap, {
      request: 'GET /api/v1/statuses/1',
      headers: ['X-App-Id: a1'],
      ip: '198.51.100.1',
    });
    expect(withHeader[2]).toMatch(
      /^ {3}1\. apps: yes, per header:x-app-id, 10\/5m, key: header x-app-id "[^"]+", digest [0-9a-f]{12}…$/,
    );
  });

  it('says a blocked client is refused before any rule', async () => {
    const snap = parseConfig(
      'block: { ips: [203.0.113.0/24] }\nlimits:\n  - { name: api, match: /api/*, per: ip, limit: 1, period: 1m }\n',
      't.yaml',
    );
    expect(await explain(snap, { request: 'GET /api/v1/x', headers: [], ip: '203.0.113.1' })).toEqual([
      'GET /api/v1/x  from 203.0.113.1',
      '  blocked (block.ips): answered 403 {"error":"Forbidden"}; no rule counts it, nothing is forwarded',
    ]);
  });
});

describe('the command line', () => {
  const run = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, cliArgs(args), { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout!.on('data', (d) => (stdout += d));
      child.stderr!.on('data', (d) => (stderr += d));
      child.once('exit', (code) => resolve({ code, stdout, stderr }));
    });

  it(
    'rategate check accepts the Mastodon example and rategate explain prints its rules for a request',
    async () => {
      const [check, explained, bad] = await Promise.all([
        run(['check', '--config', 'config/examples/mastodon.yaml']),
        run([
          'explain',
          '--config',
          'config/examples/mastodon.yaml',
          'POST /auth/sign_in.json',
          '-H',
          'User-Agent: x',
          '--ip',
          '203.0.113.4',
          '--body',
          'user[email]=a@example.com',
        ]),
        run(['explain', '--config', 'config/examples/mastodon.yaml', 'nonsense']),
      ]);
      expect(check.code).toBe(0);
      expect(check.stdout).toContain('password-resets-email');
      expect(explained.code).toBe(0);
      expect(explained.stdout).toContain('  16. login-attempts-ip: yes, per ip, 25/5m, key: ip 203.0.113.4');
      expect(explained.stdout).toMatch(
        / {2}17\. login-attempts-email: yes, per param:user\[email\], 25\/1h, key: parameter user\[email\] "a@example\.com", digest [0-9a-f]{12}…/,
      );
      expect(bad.code).toBe(64);
      expect(bad.stderr).toContain('rategate explain: expected "METHOD /path?query", got "nonsense"');
    },
    scaledMs(30_000),
  );
});

describe('rategate explain reads the method as serve does (issue 27 item 7)', () => {
  const snap = parseConfig(
    `limits:
  - { name: search, match: GET /api/v2/search, per: ip, limit: 10, period: 1m }
  - { name: posts, match: POST /api/v2/search, per: ip, limit: 3, period: 1m }
`,
    't.yaml',
  );

  it('counts a POST with a form _method=GET as the GET it is routed as', async () => {
    const lines = await explain(snap, {
      request: 'POST /api/v2/search',
      headers: [],
      ip: '203.0.113.9',
      body: '_method=GET&q=x',
    });
    expect(lines[1]).toBe("  counted and routed as GET (the form's _method, as Rack::MethodOverride reads it)");
    expect(lines).toContain('   1. search: yes, per ip, 10/1m, key: ip 203.0.113.9');
    expect(lines).toContain('   2. posts: no (method: GET is not POST)');
  });

  it('counts a POST with X-HTTP-Method-Override: GET as a GET, and a GET with one as the GET it stays', async () => {
    const header = await explain(snap, {
      request: 'POST /api/v2/search',
      headers: ['X-HTTP-Method-Override: get'],
      ip: '203.0.113.9',
    });
    expect(header[1]).toBe('  counted and routed as GET (X-HTTP-Method-Override, as Rack::MethodOverride reads it)');
    expect(header).toContain('   1. search: yes, per ip, 10/1m, key: ip 203.0.113.9');
    // Rack overrides only a POST, and `_method` only from a form body (not JSON, not the query).
    const get = await explain(snap, {
      request: 'GET /api/v2/search',
      headers: ['X-HTTP-Method-Override: POST'],
      ip: '203.0.113.9',
    });
    expect(get).toContain('   2. posts: no (method: GET is not POST)');
    const json = await explain(snap, {
      request: 'POST /api/v2/search?_method=GET',
      headers: [],
      ip: '203.0.113.9',
      body: '{"_method":"GET"}',
    });
    expect(json).toContain('   2. posts: yes, per ip, 3/1m, key: ip 203.0.113.9');
  });
});
