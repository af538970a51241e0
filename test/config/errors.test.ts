/** @module One YAML fixture per config error, each with its exact message (as envoy-ratelimit does). */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/index.js';

const DIR = fileURLToPath(new URL('../fixtures/config/errors/', import.meta.url));

/** Fixture file → the one error it must produce, exactly as an operator reads it. */
const EXPECTED: Record<string, string> = {
  'per-param-invalid.yaml':
    'limits[0].per: invalid parameter name "user[emails][]" in per "param:user[emails][]" (Rack bracket notation naming one value, e.g. user[email]; no [] and no unclosed bracket)',
  'per-param-unclosed.yaml':
    'limits[0].per: invalid parameter name "user[email" in per "param:user[email" (Rack bracket notation naming one value, e.g. user[email]; no [] and no unclosed bracket)',
  'per-header-invalid.yaml': 'limits[0].per: invalid header name "X App" in per "header:X App"',
  'override-limit-below-cost.yaml':
    "limits[0].overrides[1].limit: limit 2 is below the rule's cost 5 (no request could ever be admitted)",
  'override-keys-per-ip.yaml':
    'limits[0].overrides[0].keys: keys apply to per: token, header:NAME, param:NAME, cookie:NAME, jwt:CLAIM and signature:domain rules (this rule is per: ip; use ips or accounts)',
  'when-unknown-key.yaml': 'limits[0].when.querry: unknown key (did you mean "query"?)',
  'format-not-at-end.yaml':
    'limits[0].match[1]: "(.:format)" is only allowed at the end of a pattern, in "/auth(.:format)/password"',
  'block-ip-invalid.yaml': 'block.ips[0]: invalid IP address or CIDR "203.0.113.0/33"',
  'proxy-protocol-with-tls.yaml':
    'server.proxyProtocol.from: is not supported with server.tls yet: terminate TLS at the balancer and send the PROXY header to the plain listener, or let the balancer pass TLS through without the PROXY protocol',
  'match-unknown-method.yaml':
    'limits[0].match: unknown method "GETT" (did you mean "GET"? a custom method must be listed in methods.custom)',
  'match-custom-method-unlisted.yaml':
    'limits[0].match[1]: unknown method "PURGE" (a custom method must be listed in methods.custom)',
  'methods-custom-unreceivable.yaml':
    'methods.custom[1]: "BREW" is not a method the gateway can receive (node:http answers 400 to it), so no rule could match it',
  'body-limit-unknown-method.yaml':
    'server.bodyLimits[0].match: unknown method "POTS" (did you mean "POST"? a custom method must be listed in methods.custom)',
  'empty-file.yaml':
    '(top level): the file is empty (write the limit table; for a gateway with no limits, say so: "limits: []")',
  'comments-only.yaml':
    '(top level): the file is empty (write the limit table; for a gateway with no limits, say so: "limits: []")',
  'account-cache-ttl-invalid.yaml':
    'clients.account.cacheTtl: invalid duration "5 minutes" (use 30s, 5m, 1h, 1d, 250ms or milliseconds)',
  'account-from-invalid.yaml': 'clients.account.from: must be one of introspect, token, header (got "cookie")',
  'account-header-required.yaml': 'clients.account.header: required when from is "header"',
  'account-header-unused.yaml': 'clients.account.header: only used with from: header (from is "introspect")',
  'admin-same-port.yaml':
    'admin.listen: "127.0.0.1:8080" overlaps listen "0.0.0.0:8080" (the admin API must have its own port)',
  'admin-token-empty.yaml': 'admin.token: must not be empty',
  'algorithm-invalid.yaml':
    'limits[0].algorithm: must be one of fixed-window, sliding-window, token-bucket (got "leaky-bucket")',
  'cost-exceeds-limit.yaml': 'limits[0].cost: cost 10 exceeds limit 5 (no request could ever be admitted)',
  'cost-fractional.yaml': 'limits[0].cost: must be an integer, got 0.5',
  'exempt-account-unsafe.yaml':
    'exempt.accounts[0]: account id 109367461358294700 is not an integer YAML can read exactly (quote it)',
  'exempt-ip-invalid.yaml': 'exempt.ips[1]: invalid IP address or CIDR "203.0.113.300"',
  'ipv6-prefix-range.yaml': 'clients.ipv6Prefix: must be at least 1, got 0',
  'limit-string.yaml': 'limits[0].limit: expected a number, got "300" (write it without quotes)',
  'limit-zero.yaml': 'limits[0].limit: must be a positive integer, got 0',
  'limits-not-list.yaml': 'limits: expected a list, got a mapping',
  'listen-invalid.yaml': 'listen: invalid address "8080" (use HOST:PORT, e.g. 0.0.0.0:8080 or [::]:8080)',
  'listen-ipv6-unbracketed.yaml': 'listen: invalid address ":::8080" (use HOST:PORT, e.g. 0.0.0.0:8080 or [::]:8080)',
  'listen-port-range.yaml': 'listen: invalid address "0.0.0.0:70000" (use HOST:PORT, e.g. 0.0.0.0:8080 or [::]:8080)',
  'log-level-invalid.yaml': 'log.level: must be one of fatal, error, warn, info, debug, trace, silent (got "verbose")',
  'match-empty-list.yaml': 'limits[0].match: must have at least one pattern',
  'match-empty-param.yaml': 'limits[0].match: empty parameter name ":" in "/api/v1/statuses/:"',
  'match-lowercase-method.yaml': 'limits[0].match: method "post" must be uppercase ("POST")',
  'match-no-leading-slash.yaml': 'limits[0].match: path must start with "/", got "api/v1/accounts"',
  'match-second-of-list.yaml':
    'limits[0].match[1]: invalid segment ".." in "/api/v1/statuses/:id/../unreblog": path contains a "." or ".." segment',
  'match-star-in-segment.yaml': 'limits[0].match: "*" must be a whole segment, in "/api/v1*"',
  'match-star-middle.yaml': 'limits[0].match: "*" is only allowed as the last segment, in "/api/*/media"',
  'match-three-words.yaml': 'limits[0].match: expected "METHOD /path" or "/path", got "POST /api/v1/accounts extra"',
  'match-trailing-slash.yaml':
    'limits[0].match: empty segment in "/api/v1/accounts/" (request paths have no "//" or trailing "/")',
  'name-duplicate.yaml': 'limits[2].name: duplicate rule name "same" (first used at limits[0].name)',
  'name-invalid.yaml': 'limits[0].name: invalid rule name "sign up" (use letters, digits, "_", "." and "-")',
  'name-not-string.yaml': 'limits[0].name: expected a string, got 42',
  'on-store-error-invalid.yaml': 'limits[0].onStoreError: must be one of local, allow, deny (got "ignore")',
  'per-invalid.yaml':
    'limits[0].per: must be one of ip, account, global, token, header:NAME, param:NAME, cookie:NAME, jwt:CLAIM, signature:domain (got "user")',
  'per-missing.yaml': 'limits[0].per: required',
  'period-fractional.yaml': 'limits[0].period: invalid duration "1.5h" (use 30s, 5m, 1h, 1d, 250ms or milliseconds)',
  'period-invalid.yaml': 'limits[2].period: invalid duration "5x" (use 30s, 5m, 1h, 1d, 250ms or milliseconds)',
  'period-missing.yaml': 'limits[0].period: required',
  'period-negative.yaml': 'limits[0].period: invalid duration -5 (use 30s, 5m, 1h, 1d, 250ms or milliseconds)',
  'period-zero.yaml': 'limits[0].period: must be at least 1ms, got "0s"',
  'responses-reset-invalid.yaml': 'responses.reset: must be one of iso8601, unix, delta (got "rfc1123")',
  'rule-not-mapping.yaml': 'limits[0]: expected a mapping, got "sign-up"',
  'rule-unknown-key.yaml': 'limits[0].shadw: unknown key (did you mean "shadow"?)',
  'section-unknown-key.yaml': 'store.timout: unknown key (did you mean "timeout"?)',
  'shadow-not-boolean.yaml': 'limits[0].shadow: expected true or false, got "yes"',
  'store-cluster-missing-port.yaml':
    'store.url: invalid store "redis-cluster://10.0.0.1:6379,10.0.0.2": cluster node "10.0.0.2" has no port (use memory, redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://… for TLS, redis+unix:///PATH/TO/redis.sock, redis-cluster://[USER:PASSWORD@]HOST:PORT,HOST:PORT, rediss-cluster://… for TLS, redis-sentinel://[USER:PASSWORD@]HOST[:PORT],HOST[:PORT]/MASTERNAME[/DB] or rediss-sentinel://… for TLS; valkey… for any redis… (valkey://, valkey-cluster://…))',
  'store-on-error-invalid.yaml': 'store.onError: must be one of local, allow, deny (got "retry")',
  'store-prefix-invalid.yaml': 'store.prefix: invalid prefix "rate{gate}" (use letters, digits, "_", ".", ":" and "-")',
  'store-url-invalid.yaml':
    'store.url: invalid store "mongodb://db:27017": unknown scheme (use memory, redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://… for TLS, redis+unix:///PATH/TO/redis.sock, redis-cluster://[USER:PASSWORD@]HOST:PORT,HOST:PORT, rediss-cluster://… for TLS, redis-sentinel://[USER:PASSWORD@]HOST[:PORT],HOST[:PORT]/MASTERNAME[/DB] or rediss-sentinel://… for TLS; valkey… for any redis… (valkey://, valkey-cluster://…))',
  'top-level-list.yaml': '(top level): expected a mapping, got a list',
  'top-unknown-key.yaml': 'limit: unknown key (did you mean "limits"?)',
  'trusted-proxy-invalid.yaml':
    'clients.trustedProxies[1]: invalid trusted proxy "10.0.0.0/33" (use loopback, private, an IP address or a CIDR)',
  'trusted-proxy-short-ipv4.yaml':
    'clients.trustedProxies[0]: invalid trusted proxy "127.1" (use loopback, private, an IP address or a CIDR)',
  'upstream-timeout-invalid.yaml':
    'upstream.timeout: invalid duration "soon" (use 30s, 5m, 1h, 1d, 250ms or milliseconds)',
  'upstream-url-invalid.yaml':
    'upstream.url: invalid upstream "ftp://files.example" (use builtin or an http:// or https:// URL)',
  'yaml-duplicate-key.yaml': 'line 5, column 5: Map keys must be unique',
  'yaml-syntax.yaml':
    'line 4, column 5: Flow sequence in block collection must be sufficiently indented and end with a ]',
  'yaml-unknown-tag.yaml': 'line 1, column 9: Unresolved tag: !env',
};

function errorsOf(file: string): string[] {
  try {
    parseConfig(readFileSync(DIR + file, 'utf8'), file);
  } catch (err) {
    if (err instanceof ConfigError) return err.errors;
    throw err;
  }
  throw new Error(`${file} loaded without errors`);
}

describe('config error fixtures', () => {
  it.each(Object.entries(EXPECTED))('%s is rejected with exactly its message', (file, message) => {
    expect(errorsOf(file)).toEqual([message]);
  });

  it('every fixture in the directory has an expected message', () => {
    expect(
      readdirSync(DIR)
        .filter((f) => f.endsWith('.yaml'))
        .sort(),
    ).toEqual(Object.keys(EXPECTED).sort());
  });

  it('the thrown message names the source and lists every error', () => {
    expect(() => parseConfig('listen: nope', 'my.yaml')).toThrow(
      'my.yaml: invalid config (1 error)\n  - listen: invalid address "nope" (use HOST:PORT, e.g. 0.0.0.0:8080 or [::]:8080)',
    );
  });
});
