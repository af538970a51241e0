/** The prebuilt script command's bytes (raw-script.ts): the RESP a Redis server reads, for every kind of argument. */
import { describe, expect, it } from 'vitest';
import { encodeCall } from '../../src/limiter/redis/raw-script.js';

const head = Buffer.from('$7\r\nevalsha\r\n$3\r\nabc\r\n');

describe('encodeCall', () => {
  it('writes the count, the head, then each argument as a bulk string: numbers, ASCII and UTF-8 strings, buffers, empty ones', () => {
    const bin = Buffer.from([0, 13, 10, 255]);
    const out = encodeCall(head, [2, 'rg:a:{ip:1.2.3.4}', 'rg:b:{hdr:é✓}', '', bin, 1234567890]);
    const expected = Buffer.concat([
      Buffer.from('*8\r\n$7\r\nevalsha\r\n$3\r\nabc\r\n$1\r\n2\r\n$17\r\nrg:a:{ip:1.2.3.4}\r\n'),
      Buffer.from(`$${Buffer.byteLength('rg:b:{hdr:é✓}')}\r\nrg:b:{hdr:é✓}\r\n$0\r\n\r\n$4\r\n`),
      bin,
      Buffer.from('\r\n$10\r\n1234567890\r\n'),
    ]);
    expect(out.equals(expected)).toBe(true);
  });

  it('counts arguments past nine with every digit', () => {
    const args = Array.from({ length: 12 }, (_, i) => `k${i}`);
    expect(encodeCall(head, args).subarray(0, 5).toString()).toBe('*14\r\n');
  });
});
