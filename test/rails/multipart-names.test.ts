/** The multipart boundary, read only when every parser reads it one way. */
import { describe, expect, it } from 'vitest';
import { strictBoundary } from '../../src/rails/multipart-names.js';

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

describe('strictBoundary and Rack', () => {
  it('refuses a boundary Rack 2.2 or 3.2 would read otherwise', () => {
    expect(strictBoundary('multipart/form-data; boundary=abc def')).toBeNull();
    expect(strictBoundary('multipart/form-data; boundary = abc')).toBeNull();
    expect(strictBoundary('multipart/form-data, x; boundary=abc')).toBe('abc');
    expect(strictBoundary('text/plain; boundary=abc')).toBeNull();
  });
});
