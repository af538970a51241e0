/** @module The parameter parser: key syntax, the tree it builds, value readers, and each encoding over HTTP. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fromJson,
  getBool,
  getHash,
  getInt,
  getString,
  getStringArray,
  isHash,
  MAX_DEPTH,
  MAX_PARAMS,
  mergeParams,
  pairsToHash,
  parseKey,
  parseRequest,
  parseUrlEncoded,
  toBool,
  ParamError,
  type IncomingFile,
  type ParamValue,
} from '../../src/mastodon/params.js';
import { HttpError, sendJson } from '../../src/mastodon/reply.js';

/** Plain JSON copy of a parsed tree, so null-prototype objects compare with literals. */
function plain(v: unknown): unknown {
  return JSON.parse(JSON.stringify(v)) as unknown;
}

function statusOf(fn: () => unknown): number | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof HttpError || err instanceof ParamError ? err.status : -1;
  }
}

describe('parseKey', () => {
  it('reads a plain name as one segment', () => {
    expect(parseKey('status')).toEqual(['status']);
  });

  it('reads brackets as hash keys and empty brackets as array appends', () => {
    expect(parseKey('poll[options][]')).toEqual(['poll', 'options', '']);
    expect(parseKey('h[k][j]')).toEqual(['h', 'k', 'j']);
  });

  it('treats unbalanced or leading brackets as part of a literal name, as Rack does', () => {
    expect(parseKey('a[b')).toEqual(['a[b']);
    expect(parseKey('a[b]c')).toEqual(['a[b]c']);
    expect(parseKey('[a]')).toEqual(['[a]']);
    expect(parseKey('')).toBeUndefined();
  });
});

describe('pairsToHash', () => {
  it('collects repeated a[] into an array in order', () => {
    expect(
      plain(
        pairsToHash([
          ['a[]', 'x'],
          ['a[]', 'y'],
        ]),
      ),
    ).toEqual({ a: ['x', 'y'] });
  });

  it('builds nested hashes from h[k]=v and h[k][j]=v', () => {
    const tree = pairsToHash([
      ['h[k]', 'v'],
      ['h[n][j]', 'w'],
    ]);
    expect(plain(tree)).toEqual({ h: { k: 'v', n: { j: 'w' } } });
  });

  it('builds arrays inside hashes from h[k][]=v', () => {
    const tree = pairsToHash([
      ['poll[options][]', 'yes'],
      ['poll[options][]', 'no'],
      ['poll[expires_in]', '300'],
    ]);
    expect(plain(tree)).toEqual({ poll: { options: ['yes', 'no'], expires_in: '300' } });
  });

  it('groups a[][x] pairs into one hash until a key repeats', () => {
    const tree = pairsToHash([
      ['f[][name]', 'a'],
      ['f[][value]', '1'],
      ['f[][name]', 'b'],
      ['f[][value]', '2'],
    ]);
    expect(plain(tree)).toEqual({
      f: [
        { name: 'a', value: '1' },
        { name: 'b', value: '2' },
      ],
    });
  });

  it('lets the last plain value win', () => {
    expect(
      plain(
        pairsToHash([
          ['a', '1'],
          ['a', '2'],
        ]),
      ),
    ).toEqual({ a: '2' });
  });

  it('refuses a name used both as text and as a hash or array with 400', () => {
    expect(
      statusOf(() =>
        pairsToHash([
          ['a', '1'],
          ['a[b]', '2'],
        ]),
      ),
    ).toBe(400);
    expect(
      statusOf(() =>
        pairsToHash([
          ['a', '1'],
          ['a[]', '2'],
        ]),
      ),
    ).toBe(400);
  });

  it('refuses nesting deeper than the limit with 400', () => {
    const key = `a${'[b]'.repeat(MAX_DEPTH)}`;
    expect(statusOf(() => pairsToHash([[key, '1']]))).toBe(400);
  });

  it('refuses more pairs than the limit with 413', () => {
    const pairs = Array.from({ length: MAX_PARAMS + 1 }, (_, i) => [`k${i}`, 'v'] as const);
    expect(statusOf(() => pairsToHash(pairs))).toBe(413);
  });

  it('drops __proto__, constructor and prototype segments and builds null-prototype hashes', () => {
    const tree = pairsToHash([
      ['__proto__[polluted]', 'yes'],
      ['constructor[prototype][polluted]', 'yes'],
      ['h[__proto__][polluted]', 'yes'],
      ['ok', '1'],
    ]);
    expect(Object.keys(tree)).toEqual(['ok']);
    expect(Object.getPrototypeOf(tree)).toBeNull();
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });

  it('never throws anything but a ParamError and never touches Object.prototype, whatever the keys', () => {
    const segment = fc.oneof(
      fc.constantFrom('__proto__', 'constructor', 'prototype', '', 'a', '0'),
      fc.string({ maxLength: 4 }),
    );
    const key = fc
      .tuple(segment, fc.array(fc.oneof(segment, fc.constant('')), { maxLength: 5 }))
      .map(([head, rest]) => head + rest.map((s) => `[${s}]`).join(''));
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.oneof(key, fc.string({ maxLength: 12 })), fc.string({ maxLength: 4 })), { maxLength: 20 }),
        (pairs) => {
          try {
            pairsToHash(pairs);
          } catch (err) {
            expect(err).toBeInstanceOf(ParamError);
          }
          expect(Object.keys(Object.prototype)).toEqual([]);
          expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('toBool', () => {
  it.each(['0', 'f', 'F', 'false', 'FALSE', 'off', 'OFF'])('reads %j as false', (v) => {
    expect(toBool(v)).toBe(false);
  });

  it.each(['1', 't', 'true', 'on', 'yes', 'anything', ' '])('reads %j as true', (v) => {
    expect(toBool(v)).toBe(true);
  });

  it('reads an empty string as not given', () => {
    expect(toBool('')).toBeUndefined();
  });

  it('passes JSON true and false through and reads null as not given', () => {
    expect(toBool(true)).toBe(true);
    expect(toBool(false)).toBe(false);
    expect(toBool(null)).toBeUndefined();
    expect(toBool(undefined)).toBeUndefined();
  });

  it('refuses a hash or array with 422', () => {
    expect(statusOf(() => toBool(['1']))).toBe(422);
    expect(statusOf(() => toBool(pairsToHash([['a', '1']])))).toBe(422);
  });
});

describe('value readers', () => {
  const tree = fromJson({
    s: 'x',
    n: 42,
    b: true,
    nul: null,
    h: { k: 'v' },
    a: ['1', 2],
    bad: [{ x: 1 }],
    i: '300',
    f: '1.5',
  });

  it('reads scalars as text and null as not given', () => {
    expect(getString(tree, 's')).toBe('x');
    expect(getString(tree, 'n')).toBe('42');
    expect(getString(tree, 'b')).toBe('true');
    expect(getString(tree, 'nul')).toBeUndefined();
    expect(getString(tree, 'missing')).toBeUndefined();
  });

  it('answers 422 when a hash or array stands where text is expected', () => {
    expect(statusOf(() => getString(tree, 'h'))).toBe(422);
    expect(statusOf(() => getString(tree, 'a'))).toBe(422);
  });

  it('reads arrays of scalars and refuses text or nested hashes with 422', () => {
    expect(getStringArray(tree, 'a')).toEqual(['1', '2']);
    expect(statusOf(() => getStringArray(tree, 's'))).toBe(422);
    expect(statusOf(() => getStringArray(tree, 'bad'))).toBe(422);
  });

  it('reads hashes and refuses text with 422', () => {
    expect(plain(getHash(tree, 'h'))).toEqual({ k: 'v' });
    expect(statusOf(() => getHash(tree, 's'))).toBe(422);
  });

  it('reads whole numbers from text or JSON and refuses fractions with 422', () => {
    expect(getInt(tree, 'i')).toBe(300);
    expect(getInt(tree, 'n')).toBe(42);
    expect(statusOf(() => getInt(tree, 'f'))).toBe(422);
    expect(getBool(tree, 'b')).toBe(true);
  });
});

describe('fromJson and mergeParams', () => {
  it('drops an own __proto__ key that JSON.parse created', () => {
    const tree = fromJson(JSON.parse('{"__proto__":{"polluted":1},"a":{"constructor":{"prototype":{"polluted":1}}}}'));
    expect(Object.keys(tree)).toEqual(['a']);
    expect(isHash(tree['a'])).toBe(true);
    expect(Object.keys(tree['a'] as object)).toEqual([]);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });

  it('refuses a top level that is not an object, and deep nesting, with 400', () => {
    expect(statusOf(() => fromJson([1, 2]))).toBe(400);
    expect(statusOf(() => fromJson('x'))).toBe(400);
    let deep: ParamValue = 1;
    for (let i = 0; i < MAX_DEPTH + 2; i++) deep = [deep];
    expect(statusOf(() => fromJson({ deep }))).toBe(400);
  });

  it('lets body params win over query params of the same name', () => {
    const merged = mergeParams(parseUrlEncoded('a=query&b=query'), parseUrlEncoded('a=body'));
    expect(plain(merged)).toEqual({ a: 'body', b: 'query' });
  });
});

describe('parseRequest over HTTP', () => {
  let server: http.Server;
  let base = '';

  interface Echo {
    params: unknown;
    files: Record<string, { filename: string | undefined; size: number; text: string }>;
  }

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      req.on('error', () => undefined);
      const rawQuery = (req.url ?? '').split('?')[1] ?? '';
      const onFile = async (
        file: IncomingFile,
      ): Promise<{ filename: string | undefined; size: number; text: string }> => {
        let size = 0;
        let text = '';
        for await (const chunk of file.stream as AsyncIterable<Buffer>) {
          size += chunk.length;
          if (text.length < 64) text += chunk.toString('utf8');
        }
        return { filename: file.filename, size, text: text.slice(0, 64) };
      };
      parseRequest(req, rawQuery, { onFile, maxBodyBytes: 1024, maxFileBytes: 4096, maxFiles: 2 }).then(
        ({ params, files }) => sendJson(res, 200, { params, files: Object.fromEntries(files) }),
        (err: unknown) =>
          err instanceof HttpError
            ? sendJson(res, err.status, err.body, err.closeConnection)
            : err instanceof ParamError
              ? sendJson(res, err.status, { error: err.message })
              : sendJson(res, 500, { error: String(err) }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  });

  async function echo(
    init: RequestInit & { query?: string } = {},
  ): Promise<{ status: number; body: Echo & { error?: string } }> {
    const res = await fetch(`${base}/echo${init.query ?? ''}`, { method: 'POST', ...init });
    return { status: res.status, body: (await res.json()) as Echo & { error?: string } };
  }

  it('reads arrays and nested hashes from the query string', async () => {
    const { status, body } = await echo({
      method: 'GET',
      query: '?a[]=x&a[]=y&h[k]=v&h[k2][j]=w&h[list][]=1&plain=%20s+p',
    });
    expect(status).toBe(200);
    expect(body.params).toEqual({ a: ['x', 'y'], h: { k: 'v', k2: { j: 'w' }, list: ['1'] }, plain: ' s p' });
  });

  it('reads a URL-encoded body and lets it override the query', async () => {
    const { body } = await echo({
      query: '?a=query&q=only',
      headers: { 'content-type': 'application/x-www-form-urlencoded; charset=UTF-8' },
      body: 'a=body&arr[]=1&arr[]=2&h[k]=v',
    });
    expect(body.params).toEqual({ a: 'body', q: 'only', arr: ['1', '2'], h: { k: 'v' } });
  });

  it('reads JSON bodies with their own types', async () => {
    const { body } = await echo({
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ b: true, n: 1.5, nul: null, arr: [1, 'x'], h: { k: { j: false } } }),
    });
    expect(body.params).toEqual({ b: true, n: 1.5, nul: null, arr: [1, 'x'], h: { k: { j: false } } });
  });

  it('reads multipart fields with the same bracket rules and hands files over as streams', async () => {
    const form = new FormData();
    form.append('a[]', 'x');
    form.append('a[]', 'y');
    form.append('h[k]', 'v');
    form.append('upload', new Blob(['hello file']), 'hello.txt');
    const { status, body } = await echo({ body: form });
    expect(status).toBe(200);
    expect(body.params).toEqual({ a: ['x', 'y'], h: { k: 'v' } });
    expect(body.files).toEqual({ upload: { filename: 'hello.txt', size: 10, text: 'hello file' } });
  });

  it('treats an empty JSON body as no params and ignores bodies of unknown types', async () => {
    expect((await echo({ headers: { 'content-type': 'application/json' }, body: '' })).body.params).toEqual({});
    expect((await echo({ headers: { 'content-type': 'text/plain' }, body: 'a=1' })).body.params).toEqual({});
  });

  it('answers 400 with an error body for malformed JSON', async () => {
    const { status, body } = await echo({ headers: { 'content-type': 'application/json' }, body: '{"a":' });
    expect(status).toBe(400);
    expect(body.error).toMatch(/Invalid JSON/);
  });

  it('answers 400 for a JSON array at the top level', async () => {
    const { status } = await echo({ headers: { 'content-type': 'application/json' }, body: '[1,2]' });
    expect(status).toBe(400);
  });

  it('answers 413 for a body over the cap, declared or streamed', async () => {
    const declared = await echo({
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ a: 'x'.repeat(2000) }),
    });
    expect(declared.status).toBe(413);
    const chunked = await echo({
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new ReadableStream({
        start(controller) {
          for (let i = 0; i < 4; i++) controller.enqueue(new TextEncoder().encode(`k${i}=${'v'.repeat(500)}&`));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(413);
  });

  it('answers 413 for a multipart file over its cap and for too many files', async () => {
    const big = new FormData();
    big.append('upload', new Blob([new Uint8Array(5000)]), 'big.bin');
    expect((await echo({ body: big })).status).toBe(413);
    const many = new FormData();
    for (let i = 0; i < 3; i++) many.append(`f${i}`, new Blob(['x']), 'x.txt');
    expect((await echo({ body: many })).status).toBe(413);
  });

  it('answers 400 for a multipart body without a boundary or cut short', async () => {
    expect((await echo({ headers: { 'content-type': 'multipart/form-data' }, body: 'x' })).status).toBe(400);
    const cut = await echo({
      headers: { 'content-type': 'multipart/form-data; boundary=XYZ' },
      body: '--XYZ\r\nContent-Disposition: form-data; name="a"\r\n\r\nvalue',
    });
    expect(cut.status).toBe(400);
  });

  it('keeps __proto__ and constructor keys out of the tree in every encoding', async () => {
    const query = await echo({
      method: 'GET',
      query: '?__proto__[polluted]=1&constructor[prototype][polluted]=1&ok=1',
    });
    const json = await echo({
      headers: { 'content-type': 'application/json' },
      body: '{"__proto__":{"polluted":1},"ok":1}',
    });
    const form = new FormData();
    form.append('__proto__[polluted]', '1');
    form.append('ok', '1');
    const multipart = await echo({ body: form });
    expect(query.body.params).toEqual({ ok: '1' });
    expect(json.body.params).toEqual({ ok: 1 });
    expect(multipart.body.params).toEqual({ ok: '1' });
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });
});
