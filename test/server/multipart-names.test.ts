/** Raw part heads, read loosely enough to catch a name busboy and Rack could read differently. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { candidateNames, nameParamCount, PartHeadScanner, strictBoundary } from '../../src/server/multipart-names.js';

describe('strictBoundary', () => {
  it('reads one plain or quoted boundary', () => {
    expect(strictBoundary('multipart/form-data; boundary=abc-123')).toBe('abc-123');
    expect(strictBoundary('multipart/form-data; boundary="a b:c"')).toBe('a b:c');
  });

  it('refuses a missing, repeated or unusual boundary, which parsers could read two ways', () => {
    expect(strictBoundary('multipart/form-data')).toBeNull();
    expect(strictBoundary('multipart/form-data; boundary=a; boundary=b')).toBeNull();
    expect(strictBoundary('multipart/form-data; boundary="a,b"')).toBeNull();
    expect(strictBoundary(`multipart/form-data; boundary=${'x'.repeat(71)}`)).toBeNull();
  });
});

describe('candidateNames and nameParamCount', () => {
  it('sees every name a parser could take, including Content-ID', () => {
    const head = 'Content-Disposition: form-data; name="description"; name="access_token"';
    expect(candidateNames(head)).toEqual(['description', 'access_token']);
    expect(nameParamCount(head)).toBe(2);
    expect(candidateNames('Content-Disposition: form-data\r\nContent-ID: <access_token>')).toEqual(['access_token']);
    expect(nameParamCount('Content-Disposition: form-data; name="file"; filename="a.png"')).toBe(1);
  });
});

describe('PartHeadScanner', () => {
  const body =
    '--XB\r\nContent-Disposition: form-data; name="a"\r\n\r\nvalue\r\n' +
    '--XB\r\nContent-Disposition: form-data; name="f"; filename="x.bin"\r\nContent-Type: application/octet-stream\r\n\r\n\x00\x01--X\r\n-\r\n' +
    '--XB--\r\nepilogue without a blank line';

  it('finds each part head once, however the body is split, and ignores the epilogue', () => {
    for (const step of [1, 2, 3, 7, 1000]) {
      const heads: (string | null)[] = [];
      const s = new PartHeadScanner('XB', (h) => heads.push(h));
      const buf = Buffer.from(body, 'latin1');
      for (let i = 0; i < buf.length; i += step) s.write(buf.subarray(i, i + step));
      s.end();
      expect(heads.length, `step ${step}`).toBe(2);
      expect(heads[0]).toContain('name="a"');
      expect(heads[1]).toContain('filename="x.bin"');
    }
  });

  it('reports a head longer than 16 KiB as null', () => {
    const heads: (string | null)[] = [];
    const s = new PartHeadScanner('XB', (h) => heads.push(h));
    s.write(Buffer.from(`--XB\r\nX-Pad: ${'p'.repeat(20_000)}\r\n\r\n`));
    expect(heads).toEqual([null]);
  });
});

describe('PartHeadScanner, whatever the chunking', () => {
  it('finds the same heads for any split of any body built from random parts', () => {
    const part = fc.record({
      name: fc.stringMatching(/^[a-z_\[\]]{1,12}$/),
      value: fc.uint8Array({ maxLength: 300 }),
      file: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(part, { minLength: 1, maxLength: 6 }), fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 20 }), (parts, steps) => {
        const chunks: Buffer[] = [];
        for (const p of parts) {
          const disp = p.file ? `form-data; name="${p.name}"; filename="f.bin"` : `form-data; name="${p.name}"`;
          chunks.push(Buffer.from(`--B0und\r\nContent-Disposition: ${disp}\r\n\r\n`, 'latin1'), Buffer.from(p.value), Buffer.from('\r\n'));
        }
        chunks.push(Buffer.from('--B0und--\r\n\r\n\r\ntrailing epilogue\r\n\r\n'));
        const body = Buffer.concat(chunks);
        const whole: (string | null)[] = [];
        const a = new PartHeadScanner('B0und', (h) => whole.push(h));
        a.write(body);
        a.end();
        const split: (string | null)[] = [];
        const b = new PartHeadScanner('B0und', (h) => split.push(h));
        let i = 0;
        for (let k = 0; i < body.length; k++) {
          const step = steps[k % steps.length]!;
          b.write(body.subarray(i, i + step));
          i += step;
        }
        b.end();
        // A random value may itself contain "\r\n--B0und": then it really is a delimiter, for every parser.
        expect(split).toEqual(whole);
        expect(whole.length).toBeGreaterThanOrEqual(parts.length);
      }),
      { numRuns: 200 },
    );
  });
});
