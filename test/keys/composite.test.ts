/** Composite keys (`per: [KIND, KIND, …]`) and `missing: ip` as pure logic: the tag, what an operator types, how keys are shown, and the config's checks with their place. */
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/index.js';
import { compileKey, displayKey, keyShown, keyWhat, typedTags, type KeyFacts } from '../../src/keys/index.js';
import { keyFacts } from '../support/key-facts.js';

const SIGNED = 'keyId="https://Mastodon.Example/users/alice#main-key",signature="c2ln"';

function facts(headers: Record<string, string> = {}, ipKey = '203.0.113.7'): KeyFacts {
  return keyFacts({ ipKey, headers });
}

const ctx = { ipv6Prefix: 64, accountFrom: 'introspect' as const };

describe('composite keys', () => {
  it('makes one bucket per combination, and none when a part is missing', () => {
    const key = compileKey(['signature:domain', 'ip']);
    expect(key.label).toBe('[signature:domain, ip]');
    expect(key.tag(facts({ signature: SIGNED }))).toBe('sig:mastodon.example|ip:203.0.113.7');
    expect(key.tag(facts({ signature: SIGNED }, '198.51.100.1'))).toBe('sig:mastodon.example|ip:198.51.100.1');
    expect(key.tag(facts())).toBeNull();
    expect(keyWhat(key, facts())).toBe('HTTP signature keyId');
    expect(keyShown(key, facts({ signature: SIGNED }), 'sig:mastodon.example|ip:203.0.113.7')).toBe(
      'signature domain mastodon.example (claimed, unverified) + ip 203.0.113.7',
    );
    expect(displayKey('inbox:{sig:mastodon.example|ip:203.0.113.7}')).toBe('signature mastodon.example + 203.0.113.7');
    expect(displayKey('inbox:o0:{sig:mastodon.example|ip:203.0.113.7}')).toBe(
      'signature mastodon.example + 203.0.113.7 (override 0)',
    );
  });

  it('counts a request without the part per IP under missing: ip', () => {
    const alone = compileKey('signature:domain', 'ip');
    expect(alone.tag(facts({ signature: SIGNED }))).toBe('sig:mastodon.example');
    expect(alone.tag(facts())).toBe('ip:203.0.113.7');
    expect(keyShown(alone, facts(), 'ip:203.0.113.7')).toBe('ip 203.0.113.7 (no HTTP signature keyId: missing: ip)');
    // A key with an ip part already keeps that one: the missing part adds nothing.
    const pair = compileKey(['signature:domain', 'ip'], 'ip');
    expect(pair.tag(facts())).toBe('ip:203.0.113.7');
    expect(keyShown(pair, facts(), 'ip:203.0.113.7')).toBe('ip 203.0.113.7 (no HTTP signature keyId: missing: ip)');
    expect(compileKey(['signature:domain', 'header:x-app'], 'ip').tag(facts({ 'x-app': 'a' }))).toMatch(
      /^ip:203\.0\.113\.7\|hdr:[0-9a-f]{64}$/,
    );
    expect(compileKey('signature:domain', 'skip').tag(facts())).toBeNull();
  });

  it('turns an operator’s tuple into the tag a request makes, or says what it must be', () => {
    const key = compileKey(['signature:domain', 'ip']);
    expect(typedTags(key, ['Mastodon.Example', '203.0.113.7'], ctx)).toEqual(['sig:mastodon.example|ip:203.0.113.7']);
    const hint = {
      hint: 'one value per part of [signature:domain, ip]: the signing server’s domain (e.g. mastodon.example), then an IP address',
    };
    expect(typedTags(key, 'mastodon.example', ctx)).toEqual(hint);
    expect(typedTags(key, ['mastodon.example', 'nope'], ctx)).toEqual(hint);
    // A token part stands for two forms (digest or raw token): every combination.
    expect(typedTags(compileKey(['token', 'ip']), ['ab'.repeat(32), '203.0.113.7'], ctx)).toHaveLength(2);
  });
});

function errorsOf(yaml: string): string[] {
  try {
    parseConfig(yaml, 'limits.yaml');
  } catch (e) {
    if (e instanceof ConfigError) return e.errors;
    throw e;
  }
  return [];
}

describe('composite keys in the config', () => {
  const rule = (per: string, extra = '') =>
    `limits:\n  - { name: inbox, match: POST /inbox, per: ${per}, limit: 5, period: 1m${extra} }\n`;

  it('accepts a composite per, missing: ip and tuple override keys in limits, bans and in-flight limits', () => {
    expect(
      errorsOf(
        rule(
          '[signature:domain, ip]',
          ', missing: ip, overrides: [{ keys: [[mastodon.example, 203.0.113.7]], limit: 50 }]',
        ),
      ),
    ).toEqual([]);
    const guard = `limits: []\nbans:\n  - { name: b, match: POST /inbox, per: [signature:domain, ip], on: { status: [401] }, limit: 3, period: 1m, ban: 1h }\nconcurrency:\n  - { name: c, match: POST /inbox, per: [signature:domain, ip], missing: ip, max: 2 }\n`;
    expect(errorsOf(guard)).toEqual([]);
  });

  it('refuses malformed composite keys with their place', () => {
    const msg = (yaml: string) => errorsOf(yaml).join('\n');
    expect(errorsOf(rule('[ip]', ', overrides: [{ keys: [a], limit: 2 }]'))).toEqual([
      'limits[0].per: a composite key lists two or more kinds (write one kind without brackets)',
    ]);
    expect(msg(rule('[ip, ip]'))).toMatch(/limits\[0\]\.per: lists ip twice/);
    expect(msg(rule('[global, ip]'))).toMatch(/limits\[0\]\.per: global is one bucket for everyone/);
    expect(msg(rule('[signature:domain, ips]'))).toMatch(/limits\[0\]\.per\[1\]: must be one of/);
    expect(msg(rule('[signature:key, ip]'))).toMatch(/limits\[0\]\.per\[0\]: invalid signature part name "key"/);
    expect(msg(rule('[ip, account]', ', missing: account'))).toMatch(/limits\[0\]\.missing/);
    expect(msg(rule('[signature:domain, ip]', ', overrides: [{ keys: [mastodon.example], limit: 9 }]'))).toMatch(
      /limits\[0\]\.overrides\[0\]\.keys\[0\]: a composite per of 2 kinds takes a list of 2 values/,
    );
    expect(msg(rule('signature:domain', ', overrides: [{ keys: [[a.example, b.example]], limit: 9 }]'))).toMatch(
      /limits\[0\]\.overrides\[0\]\.keys\[0\]: a list of values names a key of a composite per/,
    );
  });
});
