/**
 * Differential test against real Rack (Debian's ruby-rack, run as a child process by rack-read.rb):
 * generated Content-Types, multipart bodies with hostile part heads and URL-encoded bodies go to both
 * the gateway's readers and Rack, and generated key values to Ruby's strip.downcase. Wherever the
 * gateway reads a body (does not refuse it), every counted name must have the value Rack gives it.
 * Under CI=true a missing ruby/rack fails; elsewhere it skips, loudly.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bodyKindOf, mediaTypeOf } from '../../src/rails/body-peek.js';
import { startMultipartPeek } from '../../src/rails/multipart-peek.js';
import { compileWantedParams, formValues } from '../../src/rails/request-params.js';
import { ParamError } from '../../src/rails/rack-params.js';
import { normalizeParamKey } from '../../src/identity/key-normalize.js';

const SCRIPT = fileURLToPath(new URL('./rack-read.rb', import.meta.url));
const rackPresent = spawnSync('ruby', ['-e', 'require "rack"; print Rack.release'], { encoding: 'utf8' });
const rackRelease = rackPresent.status === 0 ? rackPresent.stdout : null;

if (rackRelease === null && process.env.CI !== 'true') {
  console.warn(
    '\n*** SKIPPED: the differential test against Rack needs ruby and ruby-rack (apt-get install ruby ruby-rack) ***\n',
  );
}

interface Case {
  content_type?: string;
  method?: string;
  body_base64?: string;
  query?: string;
}
type RackAnswer =
  { media_type: string | null; post: Record<string, unknown>; get: Record<string, unknown> } | { error: string };

function rack(cases: Case[]): RackAnswer[] {
  const r = spawnSync('ruby', [SCRIPT], {
    input: JSON.stringify(cases),
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`rack-read.rb failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as RackAnswer[];
}

const WANTED = ['access_token', 'bearer_token', '_method', 'user[email]'];
const wanted = compileWantedParams(WANTED);

/** What Rack's params hold at a wanted name, in the gateway's terms: a string, '' (not one value), or absent. */
function rackValue(params: Record<string, unknown>, name: string): string | undefined | 'file' {
  const path = name === 'user[email]' ? ['user', 'email'] : [name];
  let node: unknown = params;
  for (const seg of path) {
    if (typeof node !== 'object' || node === null || Array.isArray(node) || '__file__' in node) return undefined;
    node = (node as Record<string, unknown>)[seg];
  }
  if (node === undefined || node === null) return undefined;
  if (typeof node === 'string') return node;
  if (typeof node === 'object' && !Array.isArray(node) && '__file__' in node) return 'file';
  return '';
}

/** The gateway's multipart reading of a whole body: its values, or 'refused'. */
function gatewayMultipart(contentType: string, body: Buffer): Map<string, string> | 'refused' {
  let peek;
  try {
    peek = startMultipartPeek({ 'content-type': contentType }, wanted, 1 << 20);
  } catch {
    return 'refused';
  }
  peek.write(body, () => undefined);
  peek.end();
  const kind = peek.state().kind;
  if (kind === 'beyond' || kind === 'malformed') return 'refused';
  return peek.values() ?? 'refused';
}

// Generators: hostile part heads built from the pieces Rack's parsers treat specially.
const NAMES = ['_method', 'access_token', 'user[email]', 'x', '[_method]', 'user]email', '_METHOD', 'access_token[]'];
const name = fc.constantFrom(...NAMES);
const quoted = (n: string, escape: boolean) => `"${escape ? n.replace(/[a-z]/, (c) => `\\${c}`) : n}"`;
const nameParam = fc
  .tuple(
    fc.constantFrom('name', 'NAME', 'Name', ' name', 'name ', 'filename', 'name*', 'x-name'),
    name,
    fc.boolean(),
    fc.boolean(),
  )
  .map(([p, n, q, esc]) => `${p}=${q ? quoted(n, esc) : n}`);
const dispType = fc.constantFrom('form-data', 'attachment', '"form-data"', 'form-data=x', '', 'inline');
const disposition = fc
  .tuple(
    fc.constantFrom('Content-Disposition', 'content-disposition', 'X-Content-Disposition'),
    fc.constantFrom(': ', ':', ':\t', ':  '),
    dispType,
    fc.array(nameParam, { minLength: 0, maxLength: 3 }),
    fc.constantFrom('', ';', ' ; '),
  )
  .map(([h, sep, t, params, tail]) => `${h}${sep}${t}${params.map((p) => `; ${p}`).join('')}${tail}`);
const extraHeader = fc.constantFrom(
  '',
  'Content-Type: application/octet-stream',
  'Content-Type: text/plain',
  'Content-Type: _method',
  'Content-ID: <_method>',
  'X-Other: name="_method"',
);
const partHead = fc
  .tuple(fc.option(disposition, { nil: undefined }), extraHeader, fc.boolean())
  .map(([d, extra, before]) => {
    const lines = [d, extra].filter((l): l is string => l !== undefined && l !== '');
    return (before ? lines.reverse() : lines).join('\r\n');
  });
const value = fc.constantFrom('delete', 'DELETE', 'tok-1', 'Victim@Example.com', '', 'v');
const part = fc.tuple(partHead, value).map(([h, v]) => `--BND\r\n${h}\r\n\r\n${v}\r\n`);
const separatorNoise = fc.oneof(
  { weight: 6, arbitrary: fc.constant('') },
  { weight: 1, arbitrary: fc.constantFrom('junk--BND\r\n', '--BND--junk\r\n', '\r\n--BNDx\r\n', '--BND\r\n\r\n') },
);
const multipartBody = fc
  .tuple(fc.array(part, { minLength: 1, maxLength: 4 }), separatorNoise, fc.nat(3))
  .map(([parts, noise, at]) => {
    const list = [...parts];
    list.splice(Math.min(at, list.length), 0, noise);
    return `${list.join('')}--BND--\r\n`;
  });

const CONTENT_TYPES = fc
  .tuple(
    fc.constantFrom(
      'application/json',
      'application/x-www-form-urlencoded',
      'multipart/form-data',
      'text/plain',
      'APPLICATION/JSON',
      'application/vnd.api+json',
      '',
    ),
    fc.constantFrom('', ',x', ', x', ';charset=utf-8', ' ;a=b', ',multipart/form-data', ' , x; boundary=B'),
  )
  .map(([t, rest]) => `${t}${rest}`);

const describeRack = rackRelease !== null || process.env.CI === 'true' ? describe : describe.skip;

describeRack(`differential: the gateway reads what Rack ${rackRelease ?? '(missing)'} reads`, () => {
  it('ruby and ruby-rack are installed (required under CI)', () => {
    expect(rackRelease, 'install ruby and ruby-rack (.ci/run does)').not.toBeNull();
  });

  it("the media type of a Content-Type is Rack's, and every body Rack reads params from is one the gateway reads", () => {
    const types = fc
      .sample(CONTENT_TYPES, { numRuns: 300, seed: 18 })
      .map((t) => t.trim())
      .filter((t) => t !== '');
    const answers = rack(types.map((t) => ({ content_type: t, method: 'POST', body_base64: '' })));
    types.forEach((t, i) => {
      const a = answers[i]!;
      if ('error' in a) return;
      expect(mediaTypeOf(t), t).toBe((a.media_type ?? '').trim());
      const rackReads =
        a.media_type === null ||
        ['application/x-www-form-urlencoded', 'multipart/form-data', 'multipart/related', 'multipart/mixed'].includes(
          a.media_type,
        );
      if (rackReads) expect(['form', 'multipart'], t).toContain(bodyKindOf('POST', t));
    });
  });

  it('multipart: where the gateway reads a body, each counted field has the value Rack gives it', () => {
    const bodies = fc.sample(multipartBody, { numRuns: 1500, seed: 5 });
    const ct = 'multipart/form-data; boundary=BND';
    const answers = rack(
      bodies.map((b) => ({
        content_type: ct,
        method: 'POST',
        body_base64: Buffer.from(b, 'latin1').toString('base64'),
      })),
    );
    let read = 0;
    let refused = 0;
    bodies.forEach((b, i) => {
      const a = answers[i]!;
      const got = gatewayMultipart(ct, Buffer.from(b, 'latin1'));
      if (got === 'refused') return void refused++;
      if ('error' in a) return; // Rack refuses it: the upstream answers an error, nothing is counted by it
      read++;
      for (const n of WANTED) {
        const r = rackValue(a.post, n);
        expect(r, `${n} is a file in ${JSON.stringify(b)}`).not.toBe('file');
        expect(got.get(n), `${n} in ${JSON.stringify(b)}`).toBe(r);
      }
    });
    // The generator must exercise both outcomes, or the comparison proves little.
    if (process.env.DIFFERENTIAL_REPORT) console.log(`multipart: ${read} read, ${refused} refused`);
    expect(read).toBeGreaterThan(100);
    expect(refused).toBeGreaterThan(100);
  });

  it("param: key normalization is Ruby's `strip.downcase` (Rack::Attack's discriminator normalizer)", () => {
    const unit = fc.constantFrom(
      'a',
      'Z',
      ' ',
      '\0',
      '\t',
      '\n',
      '\v',
      '\f',
      '\r',
      '\u00a0',
      '\u2003',
      '\ufeff',
      'Σ',
      'İ',
      'ẞ',
      'Ǆ',
      'É',
      '@',
      '.',
    );
    const values = fc.sample(fc.string({ unit, maxLength: 8 }), { numRuns: 500, seed: 21 });
    const r = spawnSync(
      'ruby',
      ['-rjson', '-e', 'puts JSON.generate(JSON.parse($stdin.read).map { |s| s.strip.downcase })'],
      {
        input: JSON.stringify(values),
        encoding: 'utf8',
      },
    );
    expect(r.status, r.stderr).toBe(0);
    const ruby = JSON.parse(r.stdout) as string[];
    values.forEach((v, i) => expect(normalizeParamKey(v), JSON.stringify(v)).toBe(ruby[i]));
  });

  it('URL-encoded: where the gateway reads a body or query, each counted name has the value Rack gives it', () => {
    const key = fc.constantFrom(
      'access_token',
      '[access_token]',
      ']access_token',
      'access_token]',
      'user[email]',
      '[user][email]',
      'user[[email]]',
      'user]email',
      '_method',
      'x',
    );
    const pair = fc
      .tuple(key, value, fc.boolean())
      .map(([k, v, enc]) => `${enc ? encodeURIComponent(k) : k}=${encodeURIComponent(v)}`);
    const texts = fc.sample(
      fc.array(pair, { minLength: 1, maxLength: 4 }).map((p) => p.join('&')),
      { numRuns: 400, seed: 9 },
    );
    const answers = rack(
      texts.map((t) => ({
        content_type: 'application/x-www-form-urlencoded',
        method: 'POST',
        body_base64: Buffer.from(t).toString('base64'),
      })),
    );
    let read = 0;
    texts.forEach((t, i) => {
      const a = answers[i]!;
      let got;
      try {
        got = formValues(t, wanted);
      } catch (err) {
        if (err instanceof ParamError) return;
        throw err;
      }
      if (got === 'ambiguous' || 'error' in a) return;
      read++;
      for (const n of WANTED) expect(got.get(n), `${n} in ${t}`).toBe(rackValue(a.post, n));
    });
    expect(read).toBeGreaterThan(50);
  });
});
