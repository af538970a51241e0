/**
 * Property tests (fast-check) of the gateway's Rack readers against the Rack rules they implement:
 * the media type split, the multipart splitter, and the part-head readings of Rack 2.2 and 3.2.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mediaTypeOf } from '../../src/rails/body-peek.js';
import { PartSplitter } from '../../src/rails/multipart-split.js';
import { rack2Reading, rack3Reading } from '../../src/rails/rack-part-head.js';
import { startMultipartPeek } from '../../src/rails/multipart-peek.js';
import { compileWantedParams } from '../../src/rails/request-params.js';

describe('mediaTypeOf', () => {
  it("is Rails' /^([^,;]*)/, trimmed and lower-cased, for any header value", () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('a', 'B', '/', ';', ',', ' ', '\t', '=', '+', 'j') }), (ct) => {
        expect(mediaTypeOf(ct)).toBe(/^([^,;]*)/.exec(ct)![1]!.trim().toLowerCase());
      }),
      { numRuns: 2000 },
    );
  });

  it("is Rack's split(/\\s*[;,]\\s*/).first for a value without surrounding space (Node trims header values)", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom('a', 'X', '/', ';', ',', ' ', '-', 'n') }).map((s) => s.trim()),
        (ct) => {
          fc.pre(ct !== '' && !/^[;,]/.test(ct));
          expect(mediaTypeOf(ct)).toBe(ct.split(/\s*[;,]\s*/)[0]!.toLowerCase());
        },
      ),
      { numRuns: 2000 },
    );
  });
});

interface Split {
  heads: string[];
  fields: string[];
  malformed: string | null;
}

function split(boundary: string, body: Buffer, step: number): Split {
  const out: Split = { heads: [], fields: [], malformed: null };
  const s = new PartSplitter(
    boundary,
    {
      head: (h) => {
        out.heads.push(h);
        return true;
      },
      field: (b) => void out.fields.push(b.toString('latin1')),
      malformed: (r) => void (out.malformed = r),
    },
    1 << 20,
  );
  for (let i = 0; i < body.length; i += step) s.write(body.subarray(i, i + step));
  s.end();
  return out;
}

const BOUNDARY = 'b0UND';
/** Part contents that never hold the delimiter, as a form's random boundary guarantees. */
const content = fc
  .string({ unit: fc.constantFrom('a', '-', '\r', '\n', 'b', '0', 'U', 'N', 'D', '\0', 'x') })
  .filter((s) => !s.includes(`--${BOUNDARY}`));
const headLine = fc
  .string({ unit: fc.constantFrom('a', ':', ' ', ';', '=', '"', 'n') })
  .filter((s) => !s.includes(`--${BOUNDARY}`))
  .map((s) => `Content-Disposition: form-data; name="${s.replace(/"/g, '')}"`);

describe('PartSplitter', () => {
  it('splits a well-formed body into exactly its parts, however it is chunked', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(headLine, content), { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 1, max: 40 }),
        (parts, step) => {
          const body = Buffer.from(
            parts.map(([h, c]) => `--${BOUNDARY}\r\n${h}\r\n\r\n${c}\r\n`).join('') + `--${BOUNDARY}--\r\n`,
            'latin1',
          );
          const got = split(BOUNDARY, body, step);
          expect(got.malformed).toBeNull();
          expect(got.heads).toEqual(parts.map(([h]) => `${h}\r\n`));
          expect(got.fields).toEqual(parts.map(([, c]) => c));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('gives the same verdict for any bytes, whatever the chunking (a hostile body cannot depend on packet sizes)', () => {
    const noise = fc.array(
      fc.constantFrom(
        `--${BOUNDARY}`,
        `--${BOUNDARY}--`,
        '\r\n',
        '\r\n\r\n',
        'Content-Disposition: form-data; name=a',
        'x',
        '-',
        '\n',
      ),
      {
        maxLength: 14,
      },
    );
    fc.assert(
      fc.property(noise, fc.integer({ min: 1, max: 9 }), (pieces, step) => {
        const body = Buffer.from(pieces.join(''), 'latin1');
        expect(split(BOUNDARY, body, step)).toEqual(split(BOUNDARY, body, body.length || 1));
      }),
      { numRuns: 1000 },
    );
  });

  it('refuses a boundary that is not a proper delimiter, an empty head, and a part after the close', () => {
    for (const bad of [
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name=a\r\n\r\nx--${BOUNDARY}\r\n--${BOUNDARY}--\r\n`,
      `--${BOUNDARY}\r\n\r\nvalue\r\n--${BOUNDARY}--\r\n`,
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--${BOUNDARY}--junk\r\n--${BOUNDARY}\r\n`,
      `x --${BOUNDARY}\r\n--${BOUNDARY}\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--${BOUNDARY}--\r\n`,
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name=a\r\n\r\n1`,
    ]) {
      expect(split(BOUNDARY, Buffer.from(bad, 'latin1'), 3).malformed, JSON.stringify(bad)).not.toBeNull();
    }
  });

  it('keeps a boundary followed by anything but CRLF or "--" as content, as every Rack does', () => {
    const body = `--${BOUNDARY}\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--${BOUNDARY}x--${BOUNDARY}y\r\n--${BOUNDARY}--\r\n`;
    expect(split(BOUNDARY, Buffer.from(body, 'latin1'), 2)).toEqual({
      heads: ['Content-Disposition: form-data; name=a\r\n'],
      fields: [`1\r\n--${BOUNDARY}x--${BOUNDARY}y`],
      malformed: null,
    });
  });
});

describe('part-head readings', () => {
  const head = (disposition: string, extra = '') => `Content-Disposition: ${disposition}\r\n${extra}`;

  it('read the cases of issue 18 as both Racks do', () => {
    for (const [d, name] of [
      ['attachment; name="_method"', '_method'],
      ['; name=_method', '_method'],
      ['"form-data"; name=_method', '_method'],
      ['form-data=x; name=_method', '_method'],
      ['form-data; name="a"; name="_method"', '_method'],
      ['form-data; name="_met\\hod"', '_method'],
      ['form-data; name="a\\"b"', 'a"b'],
    ] as const) {
      expect(rack2Reading(head(d)), d).toEqual({ kind: 'field', name });
      expect(rack3Reading(head(d)), d).toEqual({ kind: 'field', name });
    }
    const octet = head('form-data; name="access_token"', 'Content-Type: application/octet-stream\r\n');
    expect(rack2Reading(octet)).toEqual({ kind: 'field', name: 'access_token' });
    expect(rack3Reading(octet)).toEqual({ kind: 'field', name: 'access_token' });
  });

  it('tell files from fields, and name a nameless part after its Content-Type', () => {
    expect(rack2Reading(head('form-data; name="f"; filename="a.png"'))).toEqual({ kind: 'file', name: 'f' });
    expect(rack3Reading(head('form-data; name="f"; filename="a.png"'))).toEqual({ kind: 'file', name: 'f' });
    expect(rack3Reading(head('form-data; name="f"; filename*=UTF-8\'\'a.png'))).toEqual({ kind: 'file', name: 'f' });
    expect(rack2Reading('Content-Type: image/png\r\n')).toEqual({ kind: 'field', name: 'image/png[]' });
    expect(rack3Reading('Content-Type: image/png\r\n')).toEqual({ kind: 'field', name: 'image/png[]' });
  });

  it('differ where the Racks differ (so the peek refuses a counted name there)', () => {
    // Rack 2's regex is case-insensitive and unanchored; Rack 3 compares `name` exactly, per line.
    expect(rack2Reading(head('form-data; NAME="_method"'))).toEqual({ kind: 'field', name: '_method' });
    expect(rack3Reading(head('form-data; NAME="_method"'))).toEqual({ kind: 'field', name: 'text/plain[]' });
    expect(rack2Reading('X-Content-Disposition: ; name="_method"\r\n')).toEqual({ kind: 'field', name: '_method' });
    expect(rack3Reading('X-Content-Disposition: ; name="_method"\r\n')).toEqual({
      kind: 'field',
      name: 'text/plain[]',
    });
    // Rack 3.2 raises on a disposition without parameters.
    expect(rack3Reading(head('form-data'))).toEqual({ kind: 'error' });
  });

  it('never throw, and read a generated name back through quoting and escaping', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('a', '"', '\\', ';', '=', ' ', 'n', '\r', '\n', ':') }), (h) => {
        rack2Reading(h);
        rack3Reading(h);
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('a', 'b', '_', '[', ']', '"', '\\', ' ', ';') }), (name) => {
        fc.pre(name !== '');
        const escaped = name.replace(/["\\]/g, (c) => `\\${c}`);
        expect(rack3Reading(head(`form-data; name="${escaped}"`))).toEqual({ kind: 'field', name });
      }),
      { numRuns: 1000 },
    );
  });
});

describe('the multipart peek on hostile bytes', () => {
  const wanted = compileWantedParams(['access_token', '_method', 'user[email]']);
  const piece = fc.constantFrom(
    '--B',
    '--B--',
    '\r\n',
    '\r\n\r\n',
    'Content-Disposition: form-data; name=_method',
    'Content-Disposition: attachment; name="access_token"; filename="f"',
    'Content-Type: access_token',
    '; NAME=user[email]',
    '"',
    '\\',
    'x',
    '\0',
    '\xff',
  );
  it('never throws, whatever the bytes and chunking, and ends read, done or refused', () => {
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 30 }), fc.integer({ min: 1, max: 17 }), (pieces, step) => {
        const body = Buffer.from(pieces.join(''), 'latin1');
        const peek = startMultipartPeek({ 'content-type': 'multipart/form-data; boundary=B' }, wanted, 256);
        for (let i = 0; i < body.length; i += step) peek.write(body.subarray(i, i + step), () => undefined);
        peek.end();
        expect(['done', 'beyond', 'malformed']).toContain(peek.state().kind);
        if (peek.state().kind === 'done') peek.values();
      }),
      { numRuns: 1500 },
    );
  });
});
