/** `per: signature:domain` as a pure reading: the keyId's host from both header forms, within bounds, and the kind's place in the table. */
import { describe, expect, it } from 'vitest';
import { compileKey, perError, PER_PATTERN, typedTags } from '../../src/keys/index.js';
import { keyIdDomain, MAX_SIGNATURE_HEADER, quotedParam, signatureDomain } from '../../src/keys/signature.js';
import { keyFacts } from '../support/key-facts.js';

const CAVAGE =
  'keyId="https://Mastodon.Example/users/alice#main-key",algorithm="rsa-sha256",headers="(request-target) host date digest",signature="c2ln"';
const RFC9421 =
  'sig1=("@method" "@target-uri" "content-digest");created=1618884473;keyid="https://Pleroma.Example/users/bob#main-key";alg="ed25519"';

describe('reading the signing server from an HTTP signature', () => {
  it('reads the lower-cased keyId host of draft-cavage and RFC 9421 headers', () => {
    expect(signatureDomain(undefined, CAVAGE)).toBe('mastodon.example');
    expect(signatureDomain(RFC9421, undefined)).toBe('pleroma.example');
    // RFC 9421 first when both are sent; a Signature-Input without keyid leaves the Signature header.
    expect(signatureDomain(RFC9421, CAVAGE)).toBe('pleroma.example');
    expect(signatureDomain('sig1=("@method");alg="ed25519"', CAVAGE)).toBe('mastodon.example');
    expect(signatureDomain(undefined, 'keyId="https://a.example./actor#main-key"')).toBe('a.example');
    expect(signatureDomain(undefined, 'keyId="https://[2001:DB8::1]:8443/actor"')).toBe('[2001:db8::1]');
    expect(signatureDomain(undefined, 'keyId="https://bücher.example/actor"')).toBe('xn--bcher-kva.example');
    expect(signatureDomain(undefined, 'keyId="acct:relay@Social.Example"')).toBe('social.example');
    expect(quotedParam('a="x\\"keyid=\\"evil", keyid="real"', 'keyid')).toBe('real');
  });

  it('reads nothing from what names no server, within bounds', () => {
    for (const h of [
      '',
      'keyId=https://a.example/actor',
      'keyId="https://a.example/actor',
      'xkeyId="https://a.example/actor"',
      'headers="keyId=\\"https://a.example/\\""',
      'keyId="test-key-rsa-pss"',
      'keyId="acct:alice"',
      'keyId="acct:alice@a.example/x"',
      'keyId="ftp://a.example/key"',
      'keyId="https://a{b}.example/key"',
      `keyId="https://${'a'.repeat(2100)}.example/"`,
      `keyId="https://a.example/actor",${' '.repeat(MAX_SIGNATURE_HEADER)}`,
    ]) {
      expect(signatureDomain(undefined, h), h.slice(0, 60)).toBeUndefined();
    }
    expect(keyIdDomain('https://a|b.example/')).toBeUndefined();
  });

  it('costs a linear scan on a hostile header', () => {
    const hostile = [
      '"'.repeat(MAX_SIGNATURE_HEADER),
      ';keyid='.repeat(1100),
      '\\'.repeat(MAX_SIGNATURE_HEADER),
      ',"a'.repeat(2700),
    ];
    const started = performance.now();
    for (let i = 0; i < 100; i++) for (const h of hostile) signatureDomain(h, h);
    // 800 scans of 8 kB: a backtracking reader would take seconds; a linear one a few ms (bound loose for a loaded machine).
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('is a kind of the table: its syntax, its tag and what an operator types', () => {
    expect(PER_PATTERN.test('signature:domain')).toBe(true);
    expect(perError('signature:key')).toMatch(
      /invalid signature part name "key" in per "signature:key" \(signature:domain is the one form\)/,
    );
    const key = compileKey('signature:domain');
    const facts = keyFacts({ ipKey: '203.0.113.7', headers: { signature: CAVAGE } });
    expect(key.tag(facts)).toBe('sig:mastodon.example');
    expect(key.tag({ ...facts, header: () => undefined })).toBeNull();
    const ctx = { ipv6Prefix: 64, accountFrom: 'introspect' as const };
    expect(typedTags(key, 'Mastodon.Example', ctx)).toEqual(['sig:mastodon.example']);
    expect(typedTags(key, 'https://mastodon.example/users/x#main-key', ctx)).toEqual(['sig:mastodon.example']);
    expect(typedTags(key, 'not a domain', ctx)).toEqual({
      hint: 'the signing server’s domain (e.g. mastodon.example)',
    });
  });
});
