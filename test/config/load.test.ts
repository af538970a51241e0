/** @module Loading a limit table: defaults, overrides, the shipped file, error collection and robustness. */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  formatDuration,
  loadConfigFile,
  parseConfig,
  parseDuration,
  validateConfig,
  type Config,
} from '../../src/config/index.js';
import { SEED_TABLE } from '../support/seed-table.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/config/', import.meta.url));
const SHIPPED = fileURLToPath(new URL('../../config/limits.yaml', import.meta.url));

function errorsOf(text: string, overrides?: Parameters<typeof parseConfig>[2]): string[] {
  try {
    parseConfig(text, 'test.yaml', overrides);
  } catch (err) {
    if (err instanceof ConfigError) return err.errors;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

const DEFAULTS: Config = {
  listen: '0.0.0.0:8080',
  admin: {
    listen: '127.0.0.1:9464',
    token: null,
    tokenFile: null,
    tokens: [],
    allowedHosts: [],
    maxPrefix: { ipv4: 16, ipv6: 32 },
  },
  upstreams: {},
  routes: [],
  upstream: { url: 'builtin', timeout: 30_000, connectTimeout: 5_000, healthPath: '/' },
  store: {
    url: 'memory',
    prefix: 'rategate',
    timeout: 250,
    onError: 'local',
    failReadiness: false,
    lease: true,
    gateways: 2,
    sentinelPassword: null,
    sentinelPasswordFile: null,
  },
  methods: { custom: [] },
  clients: {
    trustedProxies: ['loopback'],
    ipv6Prefix: 64,
    account: {
      from: 'introspect',
      path: '/api/v1/accounts/verify_credentials',
      cacheTtl: 300_000,
      connections: 32,
      introspection: { budget: { limit: 20, window: 300_000 }, invalidTtl: 60_000 },
    },
  },
  responses: { reset: 'iso8601', standardHeaders: true, body: { error: 'Too many requests' } },
  exempt: { ips: [], accounts: [] },
  block: { ips: [] },
  log: { level: 'info', requests: 'info', client: 'off' },
  server: {
    maxHeaderSize: 16_384,
    headersTimeout: 10_000,
    requestTimeout: 300_000,
    keepAliveTimeout: 65_000,
    maxConnections: 10_000,
    maxBodySize: 100 * 1024 * 1024,
    bodyLimits: [],
    paramPeekBytes: 64 * 1024,
    minBodyRate: 1024,
    minBodyRateGrace: 10_000,
    upstreamQueueTimeout: 5_000,
    tls: null,
    http2: true,
    proxyProtocol: { from: [] },
    drainGrace: 10_000,
    maxUpstreamConnectionsPerIp: 32,
  },
  readiness: { upstream: false },
  limits: [],
  bans: [],
  concurrency: [],
  surges: [],
};

describe('defaults', () => {
  it('an empty limit table, said so, gives every default and no rules', () => {
    const snap = parseConfig('limits: []', 'empty.yaml');
    expect(snap.config).toEqual(DEFAULTS);
    expect(snap.rules).toEqual([]);
    expect(snap.source).toBe('empty.yaml');
  });

  it('an empty file is refused, with or without overrides, and so is one of comments only', async () => {
    const message =
      '(top level): the file is empty (write the limit table; for a gateway with no limits, say so: "limits: []")';
    expect(errorsOf('')).toEqual([message]);
    expect(errorsOf('\n  \n', { store: 'memory' })).toEqual([message]);
    await expect(loadConfigFile(`${FIXTURES}defaults.yaml`)).rejects.toThrow(message);
  });

  it('refuses an introspection path undici would refuse (a refused request leaks a pool slot) and a pool of 0', () => {
    expect(errorsOf('clients: { account: { path: "/api/v1/verify credentials" } }\nlimits: []').join('\n')).toMatch(
      /clients\.account\.path: must be printable ASCII/,
    );
    expect(errorsOf('clients: { account: { path: "/api/v1/€" } }\nlimits: []').join('\n')).toMatch(
      /clients\.account\.path/,
    );
    expect(errorsOf('clients: { account: { connections: 0 } }\nlimits: []').join('\n')).toMatch(
      /clients\.account\.connections/,
    );
  });

  it('validates the introspection budget like other limits, and reserves its rule name (issue 37)', () => {
    const budget = (b: string) =>
      parseConfig(`clients: { account: { introspection: { budget: ${b} } } }`, 't').config.clients.account.introspection
        .budget;
    expect(budget('{ limit: 5, window: 1m }')).toEqual({ limit: 5, window: 60_000 });
    expect(budget('{ window: 10m }')).toEqual({ limit: 20, window: 600_000 });
    expect(budget('null')).toBeNull();
    expect(errorsOf('clients: { account: { introspection: { budget: { limit: 0 } } } }').join('\n')).toMatch(
      /clients\.account\.introspection\.budget\.limit/,
    );
    expect(errorsOf('clients: { account: { introspection: { budget: { window: soon } } } }').join('\n')).toMatch(
      /clients\.account\.introspection\.budget\.window/,
    );
    expect(errorsOf('clients: { account: { introspection: { invalidTtl: -1 } } }').join('\n')).toMatch(
      /clients\.account\.introspection\.invalidTtl/,
    );
    expect(
      errorsOf('limits: [{ name: introspection-budget, match: /*, per: ip, limit: 1, period: 1m }]').join('\n'),
    ).toMatch(/limits\[0\]\.name: rule name "introspection-budget" is the introspection budget's/);
  });

  it('a partly written section keeps the defaults of its other keys', () => {
    const cfg = parseConfig('store: { url: "redis://cache:6379" }\nclients: { account: { from: token } }', 't').config;
    expect(cfg.store).toEqual({ ...DEFAULTS.store, url: 'redis://cache:6379' });
    expect(cfg.clients.account).toEqual({ ...DEFAULTS.clients.account, from: 'token' });
  });

  it('limits may be missing, an empty list, or left empty in YAML', () => {
    for (const text of ['listen: 0.0.0.0:1', 'limits: []', 'limits:\n']) {
      expect(parseConfig(text, 't').rules).toEqual([]);
    }
  });

  it('bans, concurrency and surges may be left empty in YAML too (every entry commented out)', () => {
    const { config } = parseConfig('bans:\n  # - { name: b }\nconcurrency:\nsurges:\n', 't');
    expect([config.bans, config.concurrency, config.surges]).toEqual([[], [], []]);
  });

  it('a rule gets the default algorithm, cost and shadow, and a single match becomes a list', () => {
    const [rule] = parseConfig('limits: [{ name: a, match: /a, per: ip, limit: 3, period: 1s }]', 't').config.limits;
    expect(rule).toEqual({
      name: 'a',
      match: ['/a'],
      per: 'ip',
      limit: 3,
      period: 1000,
      algorithm: 'fixed-window',
      cost: 1,
      shadow: false,
    });
  });
});

describe('a fully written file', () => {
  it('keeps every value it sets, with durations in milliseconds', async () => {
    const snap = await loadConfigFile(`${FIXTURES}full.yaml`);
    expect(snap.config).toEqual({
      listen: '[::]:8081',
      admin: {
        listen: '127.0.0.1:9000',
        token: 's3cret',
        tokenFile: null,
        tokens: [],
        allowedHosts: [],
        maxPrefix: { ipv4: 16, ipv6: 32 },
      },
      upstream: { url: 'http://127.0.0.1:3000', timeout: 10_000, connectTimeout: 1_500, healthPath: '/' },
      upstreams: { streaming: { url: 'http://127.0.0.1:4000', timeout: 0, connectTimeout: 5_000 } },
      routes: [{ match: ['/api/v1/streaming/*'], upstream: 'streaming' }],
      store: {
        url: 'redis-cluster://10.0.0.1:6379,10.0.0.2:6379',
        prefix: 'rg',
        timeout: 25,
        onError: 'deny',
        failReadiness: true,
        lease: true,
        gateways: 2,
        sentinelPassword: null,
        sentinelPasswordFile: null,
      },
      clients: {
        trustedProxies: ['loopback', '10.0.0.0/8', '2001:db8::/32', '192.0.2.1'],
        ipv6Prefix: 56,
        account: {
          from: 'header',
          header: 'X-Account-Id',
          path: '/api/v1/accounts/verify_credentials',
          cacheTtl: 5_400_000,
          connections: 8,
          introspection: { budget: { limit: 20, window: 300_000 }, invalidTtl: 60_000 },
        },
      },
      responses: { reset: 'unix', standardHeaders: false, body: { error: 'Slow down', code: 429 } },
      exempt: { ips: ['203.0.113.7', '2001:db8::/64'], accounts: ['109367461358294711', '42'] },
      block: { ips: [] },
      log: { level: 'debug', requests: 'info', client: 'off' },
      bans: [],
      concurrency: [],
      surges: [],
      server: {
        maxHeaderSize: 8192,
        headersTimeout: 5_000,
        requestTimeout: 0,
        keepAliveTimeout: 65_000,
        maxConnections: 500,
        maxBodySize: 1024 * 1024,
        bodyLimits: [{ match: ['POST /api/v1/media', 'POST /api/v2/media'], maxBodySize: 40 * 1024 * 1024 }],
        paramPeekBytes: 64 * 1024,
        minBodyRate: 4096,
        minBodyRateGrace: 20_000,
        upstreamQueueTimeout: 250,
        tls: null,
        http2: false,
        proxyProtocol: { from: [] },
        drainGrace: 45_000,
        maxUpstreamConnectionsPerIp: 0,
      },
      methods: { custom: ['PURGE'] },
      readiness: { upstream: false },
      limits: [
        {
          name: 'burst.v2',
          match: ['GET /api/v1/timelines/*'],
          per: 'global',
          limit: 100,
          period: 250,
          algorithm: 'token-bucket',
          cost: 2,
          shadow: true,
          onStoreError: 'allow',
        },
        {
          name: 'cache-purge',
          match: ['PURGE /cache/*'],
          per: 'ip',
          limit: 10,
          period: 60_000,
          algorithm: 'fixed-window',
          cost: 1,
          shadow: false,
        },
      ],
    });
    expect(snap.rules[0]).toMatchObject({
      index: 0,
      periodMs: 250,
      onStoreError: 'allow',
      policyItem: '"burst.v2";q=100;w=1',
    });
  });
});

describe('the shipped config/limits.yaml', () => {
  it('loads and compiles to the seed’s five rules', async () => {
    const snap = await loadConfigFile(SHIPPED);
    expect(
      snap.rules.map((r) => [
        r.index,
        r.name,
        r.key.label,
        r.limit,
        r.periodMs,
        r.algorithm,
        r.cost,
        r.shadow,
        r.onStoreError,
        r.patterns,
      ]),
    ).toEqual([
      [0, 'account-access', 'account', 300, 300_000, 'fixed-window', 1, false, undefined, ['/api/*']],
      [1, 'ip-access', 'ip', 300, 300_000, 'fixed-window', 1, false, undefined, ['/api/*']],
      [2, 'sign-up', 'ip', 5, 1_800_000, 'fixed-window', 1, false, undefined, ['POST /api/v1/accounts']],
      [
        3,
        'uploading',
        'account',
        30,
        1_800_000,
        'fixed-window',
        1,
        false,
        undefined,
        ['POST /api/v1/media', 'POST /api/v2/media'],
      ],
      [
        4,
        'deletion',
        'account',
        30,
        1_800_000,
        'fixed-window',
        1,
        false,
        undefined,
        ['DELETE /api/v1/statuses/:id', 'POST /api/v1/statuses/:id/unreblog'],
      ],
    ]);
    expect(snap.rules.map((r) => r.policyItem)).toEqual([
      '"account-access";q=300;w=300',
      '"ip-access";q=300;w=300',
      '"sign-up";q=5;w=1800',
      '"uploading";q=30;w=1800',
      '"deletion";q=30;w=1800',
    ]);
    expect(snap.matcher.match('POST', '/api/v1/accounts').map((r) => r.name)).toEqual([
      'account-access',
      'ip-access',
      'sign-up',
    ]);
  });

  it('is the seed’s table byte for byte, comments included', () => {
    expect(readFileSync(SHIPPED, 'utf8')).toBe(SEED_TABLE);
  });
});

describe('the snapshot', () => {
  it('is deeply frozen, rules and config alike', () => {
    const snap = parseConfig('limits: [{ name: a, match: [/a, /b], per: ip, limit: 3, period: 1s }]', 't');
    expect(Object.isFrozen(snap)).toBe(true);
    expect(Object.isFrozen(snap.config.clients.trustedProxies)).toBe(true);
    expect(Object.isFrozen(snap.config.responses.body)).toBe(true);
    expect(Object.isFrozen(snap.config.limits[0]?.match)).toBe(true);
    expect(Object.isFrozen(snap.rules)).toBe(true);
    expect(Object.isFrozen(snap.rules[0])).toBe(true);
    expect(Object.isFrozen(snap.rules[0]?.patterns)).toBe(true);
    expect(() => {
      (snap.config as { listen: string }).listen = 'x';
    }).toThrow(TypeError);
  });

  it('rounds a sub-second or fractional period up in the policy item', () => {
    const snap = parseConfig(
      'limits: [{ name: a, match: /a, per: ip, limit: 3, period: 1500 }, { name: b, match: /b, per: ip, limit: 3, period: 1ms }]',
      't',
    );
    expect(snap.rules.map((r) => r.policyItem)).toEqual(['"a";q=3;w=2', '"b";q=3;w=1']);
  });
});

describe('durations', () => {
  it.each([
    ['30s', 30_000],
    ['5m', 300_000],
    ['1h', 3_600_000],
    ['1d', 86_400_000],
    ['50ms', 50],
    ['1h30m', 5_400_000],
    ['"1500"', 1_500],
    ['1500', 1_500],
  ])('%s is read as %i ms', (written, ms) => {
    expect(parseConfig(`upstream: { timeout: ${written} }`, 't').config.upstream.timeout).toBe(ms);
  });

  it('a zero cacheTtl is allowed (no caching) but a zero timeout is not', () => {
    expect(parseConfig('clients: { account: { cacheTtl: 0 } }', 't').config.clients.account.cacheTtl).toBe(0);
    expect(errorsOf('store: { timeout: 0 }')).toEqual(['store.timeout: must be at least 1ms, got 0']);
  });

  it('a duration too large for exact arithmetic is refused', () => {
    expect(errorsOf('upstream: { timeout: 99999999999999999d }')).toEqual([
      'upstream.timeout: invalid duration "99999999999999999d" (use 30s, 5m, 1h, 1d, 250ms or milliseconds)',
    ]);
  });

  it('formatDuration writes the shortest exact form and parseDuration reads it back', () => {
    expect([300_000, 1_800_000, 5_400_000, 250, 1_500, 0, 90_061_001].map(formatDuration)).toEqual([
      '5m',
      '30m',
      '1h30m',
      '250ms',
      '1s500ms',
      '0ms',
      '1d1h1m1s1ms',
    ]);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 45 }), (ms) => {
        expect(parseDuration(formatDuration(ms))).toBe(ms);
      }),
    );
  });
});

describe('error collection', () => {
  it('reports every error of a file at once, in the order of the file', async () => {
    await expect(loadConfigFile(`${FIXTURES}multiple-errors.yaml`)).rejects.toSatisfy((err: unknown) => {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).errors).toEqual([
        'listen: expected a string, got 8080',
        'store.onError: must be one of local, allow, deny (got "maybe")',
        'limits[0].match: method "post" must be uppercase ("POST")',
        'limits[0].limit: must be a positive integer, got 0',
        'limits[0].period: invalid duration "5x" (use 30s, 5m, 1h, 1d, 250ms or milliseconds)',
        'limits[1].name: duplicate rule name "sign-up" (first used at limits[0].name)',
        'limits[1].match: "*" is only allowed as the last segment, in "/api/*/x"',
        'limits[1].per: must be one of ip, account, global, token, header:NAME, param:NAME, cookie:NAME, jwt:CLAIM, signature:domain (got "someone")',
        'limits[1].cots: unknown key (did you mean "cost"?)',
      ]);
      return true;
    });
  });

  it('a YAML syntax error carries its line and column', () => {
    const errors = errorsOf('limits:\n  - name: a\n    match: "/a\n');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^line \d+, column \d+: /);
  });

  it('several YAML documents in one file are an error', () => {
    expect(errorsOf('listen: 0.0.0.0:1\n---\nlisten: 0.0.0.0:2\n')[0]).toMatch(
      /^line 2, column 1: Source contains multiple documents/,
    );
  });

  it('a __proto__ key is reported as unknown rather than changing the object', () => {
    expect(errorsOf('__proto__: { listen: "0.0.0.0:1" }')).toEqual([
      '__proto__: unknown key (expected one of: listen, admin, upstream, upstreams, routes, store, clients, responses, exempt, block, log, server, methods, readiness, limits, bans, concurrency, surges)',
    ]);
  });

  it('a missing file is a ConfigError naming the file', async () => {
    await expect(loadConfigFile(`${FIXTURES}does-not-exist.yaml`)).rejects.toThrow(
      /does-not-exist\.yaml: invalid config \(1 error\)\n {2}- cannot read the config file: no such file/,
    );
  });
});

describe('overrides', () => {
  const file =
    'listen: 0.0.0.0:8080\nadmin: { listen: 127.0.0.1:9464 }\nupstream: { url: builtin }\nstore: { url: memory }';

  it('win over the file', () => {
    const cfg = parseConfig(file, 't', {
      listen: '127.0.0.1:0',
      adminListen: '127.0.0.1:9999',
      upstream: 'https://mastodon.example',
      store: 'redis://cache:6379/0',
    }).config;
    expect([cfg.listen, cfg.admin.listen, cfg.upstream.url, cfg.store.url]).toEqual([
      '127.0.0.1:0',
      '127.0.0.1:9999',
      'https://mastodon.example',
      'redis://cache:6379/0',
    ]);
  });

  it('apply to sections the file does not have', () => {
    const cfg = parseConfig('limits: []', 't', { adminListen: '[::1]:9000', store: 'rediss://cache:6380' }).config;
    expect(cfg.admin).toEqual({
      listen: '[::1]:9000',
      token: null,
      tokenFile: null,
      tokens: [],
      allowedHosts: [],
      maxPrefix: { ipv4: 16, ipv6: 32 },
    });
    expect(cfg.store.url).toBe('rediss://cache:6380');
  });

  it('are validated like the file, and say they came from an override', () => {
    expect(errorsOf(file, { listen: 'localhost', store: 'memcached://x' })).toEqual([
      'listen: invalid address "localhost" (use HOST:PORT, e.g. 0.0.0.0:8080 or [::]:8080) (set by an override)',
      'store.url: invalid store "memcached://x": unknown scheme (use memory, redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://… for TLS, redis+unix:///PATH/TO/redis.sock, redis-cluster://[USER:PASSWORD@]HOST:PORT,HOST:PORT, rediss-cluster://… for TLS, redis-sentinel://[USER:PASSWORD@]HOST[:PORT],HOST[:PORT]/MASTERNAME[/DB] or rediss-sentinel://… for TLS; valkey… for any redis… (valkey://, valkey-cluster://…)) (set by an override)',
    ]);
  });

  it('fix a file whose own value is invalid', () => {
    expect(parseConfig('listen: nonsense', 't', { listen: '0.0.0.0:1' }).config.listen).toBe('0.0.0.0:1');
  });

  it('do not modify the object they are applied to', () => {
    const raw = { listen: '0.0.0.0:8080', store: { url: 'memory' } };
    const result = validateConfig(raw, { listen: '0.0.0.0:1', store: 'redis://h:1' });
    expect(result.ok).toBe(true);
    expect(raw).toEqual({ listen: '0.0.0.0:8080', store: { url: 'memory' } });
  });
});

describe('robustness', () => {
  function onlyConfigError(run: () => unknown): void {
    try {
      run();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      expect(err.errors.length).toBeGreaterThan(0);
      for (const e of err.errors) expect(typeof e).toBe('string');
    }
  }

  it('arbitrary text never throws anything but ConfigError', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (text) =>
        onlyConfigError(() => parseConfig(text, 't')),
      ),
      {
        numRuns: 500,
      },
    );
  });

  it('arbitrary JSON-ish documents never throw anything but ConfigError', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), (value) =>
        onlyConfigError(() => parseConfig(JSON.stringify(value), 't')),
      ),
      { numRuns: 300 },
    );
  });

  it('config-shaped documents with wrong and odd values never throw anything but ConfigError', () => {
    const leaf = fc.oneof(
      fc.constantFrom<unknown>(
        '5m',
        '0',
        '-1',
        'builtin',
        'memory',
        '0.0.0.0:8080',
        '[::]:1',
        'POST /a/:id/*',
        '/*',
        ':',
        '*',
        null,
        true,
      ),
      fc.string({ maxLength: 12 }),
      fc.integer(),
      fc.double(),
      fc.array(fc.string({ maxLength: 8 }), { maxLength: 3 }),
    );
    const section = (keys: readonly string[]) => fc.dictionary(fc.constantFrom(...keys, 'typo'), leaf, { maxKeys: 5 });
    const rule = section(['name', 'match', 'per', 'limit', 'period', 'algorithm', 'cost', 'shadow', 'onStoreError']);
    const doc = fc.record(
      {
        listen: leaf,
        admin: fc.oneof(section(['listen', 'token']), leaf),
        upstream: section(['url', 'timeout', 'connectTimeout']),
        store: section([
          'url',
          'prefix',
          'timeout',
          'onError',
          'failReadiness',
          'lease',
          'gateways',
          'sentinelPassword',
        ]),
        clients: fc.record(
          { trustedProxies: leaf, ipv6Prefix: leaf, account: section(['from', 'path', 'cacheTtl', 'header']) },
          {
            requiredKeys: [],
          },
        ),
        exempt: section(['ips', 'accounts']),
        limits: fc.oneof(fc.array(rule, { maxLength: 4 }), leaf),
      },
      { requiredKeys: [] },
    );
    const overrides = fc.record(
      {
        listen: fc.string({ maxLength: 10 }),
        adminListen: fc.string({ maxLength: 10 }),
        store: fc.string({ maxLength: 10 }),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(doc, overrides, (value, o) => onlyConfigError(() => parseConfig(stringify(value), 't', o))),
      { numRuns: 500 },
    );
  });
});
