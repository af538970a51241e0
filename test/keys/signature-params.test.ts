/** The draft-cavage `Signature:` header read as Mastodon's SignatureParser reads it: the grammar, the last duplicate, exact names. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cavageParam } from '../../src/keys/signature-params.js';
import { MAX_SIGNATURE_HEADER, signatureDomain } from '../../src/keys/signature.js';

const REAL = 'https://real.example/users/alice#main-key';
const SIGNED = `algorithm="rsa-sha256",headers="(request-target) host date digest",signature="c2ln"`;

/**
 * Mastodon's grammar written as regular expressions (the form of its parser before Parslet, which
 * MASTODON.md describes): an oracle for the one-pass reader. Ruby's `\s` is ASCII only, and Parslet's
 * `any` after a backslash takes a newline too; nothing may follow the last parameter.
 */
const TOKEN = "[0-9a-zA-Z!#$%&'*+.^_`|~-]+";
const PARAM = new RegExp(
  `(${TOKEN})[ \\t\\n\\v\\f\\r]*=[ \\t\\n\\v\\f\\r]*(?:(${TOKEN})|"((?:[^\\\\"]|\\\\[\\s\\S])*)")`,
  'y',
);
const COMMA = /[ \t\n\v\f\r]*,[ \t\n\v\f\r]*/y;
function oracle(header: string, name: string): string | undefined {
  const params = new Map<string, string>();
  let at = header.startsWith('Signature ') ? 'Signature '.length : 0;
  for (;;) {
    PARAM.lastIndex = at;
    const m = PARAM.exec(header);
    if (m === null) return undefined;
    params.set(m[1]!, m[2] ?? m[3]!);
    at = PARAM.lastIndex;
    if (at === header.length) return params.get(name);
    COMMA.lastIndex = at;
    if (COMMA.exec(header) === null) return undefined;
    at = COMMA.lastIndex;
  }
}

describe("Mastodon's reading of a Signature header", () => {
  it('reads keyId from a real delivery, with or without the old "Signature " prefix and with spaces around = and ,', () => {
    expect(cavageParam(`keyId="${REAL}",${SIGNED}`, 'keyId')).toBe(REAL);
    expect(cavageParam(`Signature keyId="${REAL}",${SIGNED}`, 'keyId')).toBe(REAL);
    expect(cavageParam(`keyId = "${REAL}" ,\t${SIGNED}`, 'keyId')).toBe(REAL);
    expect(cavageParam(`${SIGNED},keyId=${'plain-token'}`, 'keyId')).toBe('plain-token');
    expect(cavageParam(`${SIGNED},keyId=""`, 'keyId')).toBe('');
  });

  it('keeps the last of a duplicated keyId, as the parameters fill a hash in order', () => {
    expect(cavageParam(`keyId="https://f1.example/k",keyId="${REAL}",${SIGNED}`, 'keyId')).toBe(REAL);
    expect(cavageParam(`keyId="${REAL}",${SIGNED},keyId="https://f2.example/k"`, 'keyId')).toBe('https://f2.example/k');
    // Two Signature headers reach Rails joined with ", " (so does Node's request.headers): one list.
    expect(cavageParam(`keyId="https://f1.example/k",${SIGNED}, keyId="${REAL}",${SIGNED}`, 'keyId')).toBe(REAL);
  });

  it('compares names exactly: KEYID and keyid are other parameters, never the keyId', () => {
    expect(cavageParam(`KEYID="https://f1.example/k",keyId="${REAL}",${SIGNED}`, 'keyId')).toBe(REAL);
    expect(cavageParam(`keyId="${REAL}",KEYID="https://f1.example/k",${SIGNED}`, 'keyId')).toBe(REAL);
    expect(cavageParam(`KEYID="https://f1.example/k",${SIGNED}`, 'keyId')).toBeUndefined();
    expect(cavageParam(`keyid="https://f1.example/k",${SIGNED}`, 'keyId')).toBeUndefined();
    expect(cavageParam(`keyIdx="https://f1.example/k",${SIGNED}`, 'keyId')).toBeUndefined();
  });

  it('keeps a quoted value’s backslashes, and a quote escaped inside a value ends nothing', () => {
    expect(cavageParam('keyId="a\\"b"', 'keyId')).toBe('a\\"b');
    expect(cavageParam('headers="x\\",keyId=\\"https://f1.example/k",keyId="b"', 'keyId')).toBe('b');
    expect(cavageParam('headers="keyId=\\"https://f1.example/k\\""', 'keyId')).toBeUndefined();
  });

  it('reads nothing from a header that does not parse, wherever the fault (Mastodon treats the request as unsigned)', () => {
    for (const h of [
      '',
      ' keyId="a"',
      'keyId="a" ',
      'keyId="a",',
      ',keyId="a"',
      'keyId="a",,algorithm="x"',
      'keyId="a";algorithm="x"',
      'keyId="a" algorithm="x"',
      'keyId="a',
      'keyId=',
      'keyId',
      '=keyId',
      'keyId="a"x',
      'keyId=a b',
      'keyId=a/b',
      'key Id="a"',
      'keyId="a",algorithm',
      'signature keyId="a"',
      'Signature  keyId="a"',
      'Signature=x keyId="a"',
      `keyId="${REAL}",${SIGNED},junk`,
      'keyId="a",ключ="b"',
    ]) {
      expect(cavageParam(h, 'keyId'), JSON.stringify(h)).toBeUndefined();
    }
    // A parameter named Signature is a parameter (only the prefix "Signature " is dropped).
    expect(cavageParam('Signature="x",keyId="a"', 'keyId')).toBe('a');
  });

  it('agrees with the regular-expression grammar on any header built of the grammar’s pieces', () => {
    const piece = fc.constantFrom(
      'keyId',
      'KEYID',
      'algorithm',
      '=',
      ',',
      ' ',
      '\t',
      '"',
      '\\',
      '\\"',
      '"https://a.example/k"',
      '"b,c"',
      'tok',
      'Signature ',
      ';',
      'é',
      '\n',
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 14 }), (pieces) => {
        const h = pieces.join('');
        expect(cavageParam(h, 'keyId')).toBe(oracle(h, 'keyId'));
      }),
      { numRuns: 5000 },
    );
  });

  it('reads the last keyId of any well-formed list, whatever the spacing', () => {
    const name = fc.constantFrom('keyId', 'KEYID', 'keyid', 'algorithm', 'headers', 'signature');
    const value = fc.oneof(
      fc.stringMatching(/^[0-9a-zA-Z!#$%&'*+.^_`|~-]{1,12}$/),
      fc.string({ maxLength: 12 }).map((s) => `"${s.replace(/[\\"]/g, (c) => `\\${c}`)}"`),
    );
    const bws = fc.stringMatching(/^[ \t]{0,2}$/);
    fc.assert(
      fc.property(
        fc.array(fc.tuple(name, bws, bws, value), { minLength: 1, maxLength: 6 }),
        bws,
        bws,
        (params, before, after) => {
          const h = params.map(([n, a, b, v]) => `${n}${a}=${b}${v}`).join(`${before},${after}`);
          const last = params.filter(([n]) => n === 'keyId').at(-1);
          const expected = last === undefined ? undefined : last[3].startsWith('"') ? last[3].slice(1, -1) : last[3];
          expect(cavageParam(h, 'keyId')).toBe(expected);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('costs one linear pass on a hostile header', () => {
    const hostile = [
      'a='.repeat(MAX_SIGNATURE_HEADER / 2),
      `keyId="${'\\'.repeat(MAX_SIGNATURE_HEADER - 10)}`,
      'a=b,'.repeat(MAX_SIGNATURE_HEADER / 4 - 1) + 'a=b',
      'a  =  "x"  ,  '.repeat(550),
      // Many quoted values with no backslash after them, and a value of nothing but escapes: the
      // backslash search must not start over per value or per escape.
      'a="",'.repeat(1637) + 'a=""',
      `keyId="${'\\a'.repeat(4090)}"`,
    ];
    const started = performance.now();
    for (let i = 0; i < 100; i++) for (const h of hostile) cavageParam(h, 'keyId');
    // 600 scans of 8 kB: tens of ms when linear, seconds when quadratic (the bound is loose for a loaded machine).
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('gives the domain of the keyId Mastodon reads, and none for a keyId with a backslash', () => {
    expect(signatureDomain(undefined, `keyId="https://f1.example/k",keyId="${REAL}",${SIGNED}`)).toBe('real.example');
    expect(signatureDomain(undefined, `KEYID="https://f1.example/k",keyId="${REAL}",${SIGNED}`)).toBe('real.example');
    expect(signatureDomain(undefined, `KEYID="${REAL}",${SIGNED}`)).toBeUndefined();
    expect(signatureDomain(undefined, `keyId="${REAL}" junk`)).toBeUndefined();
    // WHATWG reads `\` as `/` (host f1.example); Ruby's URI parsers refuse it.
    expect(signatureDomain(undefined, 'keyId="https://f1.example\\\\@real.example/k"')).toBeUndefined();
  });
});
