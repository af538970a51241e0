/** The PROXY protocol header reader (v1 text, v2 binary), as pure logic: what it takes, keeps and refuses. */
import { describe, expect, it } from 'vitest';
import { parseProxyHeader } from '../../src/http/proxy-protocol.js';

const SIGNATURE = [0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a];

/** A v2 header: version 2, `command` (0 LOCAL, 1 PROXY), `familyProtocol`, then `block` (addresses and TLVs). */
function v2(command: number, familyProtocol: number, block: number[]): Buffer {
  return Buffer.from([...SIGNATURE, 0x20 | command, familyProtocol, block.length >> 8, block.length & 0xff, ...block]);
}
const V4_BLOCK = [203, 0, 113, 7, 127, 0, 0, 1, 0xc3, 0x50, 0x1f, 0x90];
const V6_BLOCK = [
  0x20,
  0x01,
  0x0d,
  0xb8,
  ...Array<number>(11).fill(0),
  0x07,
  ...Array<number>(15).fill(0),
  1,
  0xc3,
  0x50,
  0x1f,
  0x90,
];

describe('a v1 header', () => {
  it('names the client of a TCP4 or TCP6 line and says how long the line is', () => {
    const line = 'PROXY TCP4 203.0.113.7 127.0.0.1 50000 8080\r\n';
    expect(parseProxyHeader(Buffer.from(`${line}GET / HTTP/1.1\r\n`))).toEqual({
      kind: 'header',
      length: line.length,
      source: '203.0.113.7',
    });
    expect(parseProxyHeader(Buffer.from('PROXY TCP6 2001:db8:0:0::7 ::1 50000 8080\r\n'))).toMatchObject({
      kind: 'header',
      source: '2001:db8::7',
    });
  });

  it('keeps the connection’s own address for UNKNOWN', () => {
    expect(parseProxyHeader(Buffer.from('PROXY UNKNOWN\r\n'))).toEqual({
      kind: 'header',
      length: 15,
      source: undefined,
    });
    expect(parseProxyHeader(Buffer.from('PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n'))).toMatchObject({
      kind: 'header',
      source: undefined,
    });
  });

  it('waits for every prefix of a valid line, and refuses one that runs past 107 bytes', () => {
    const line = Buffer.from('PROXY TCP4 203.0.113.7 127.0.0.1 50000 8080\r\n');
    for (let n = 1; n < line.length; n++)
      expect(parseProxyHeader(line.subarray(0, n)), `${n} bytes`).toEqual({ kind: 'incomplete' });
    expect(parseProxyHeader(Buffer.from(`PROXY TCP4 ${'1'.repeat(120)}`))).toMatchObject({ kind: 'invalid' });
  });

  it.each([
    'PROXY TCP4 203.0.113.7 127.0.0.1 50000\r\n',
    'PROXY TCP4 2001:db8::7 127.0.0.1 50000 8080\r\n',
    'PROXY TCP6 203.0.113.7 ::1 50000 8080\r\n',
    'PROXY TCP4 203.0.113.7 127.0.0.1 70000 8080\r\n',
    'PROXY TCP4 203.0.113.7 127.0.0.1 050000 8080\r\n',
    'PROXY TCP4 203.000.113.7 127.0.0.1 5000 8080\r\n',
    'PROXY UDP4 203.0.113.7 127.0.0.1 5000 8080\r\n',
    'PROXY  TCP4 203.0.113.7 127.0.0.1 5000 8080\r\n',
  ])('refuses the malformed line %j', (line) => {
    expect(parseProxyHeader(Buffer.from(line))).toMatchObject({ kind: 'invalid' });
  });
});

describe('a v2 header', () => {
  it('names the client of TCP over IPv4 and IPv6, and counts TLVs after the addresses into its length', () => {
    expect(parseProxyHeader(v2(1, 0x11, V4_BLOCK))).toEqual({ kind: 'header', length: 16 + 12, source: '203.0.113.7' });
    expect(parseProxyHeader(v2(1, 0x21, V6_BLOCK))).toEqual({ kind: 'header', length: 16 + 36, source: '2001:db8::7' });
    const withTlv = v2(1, 0x11, [...V4_BLOCK, 0x05, 0x00, 0x03, 0x61, 0x62, 0x63]);
    expect(parseProxyHeader(Buffer.concat([withTlv, Buffer.from('GET /')]))).toEqual({
      kind: 'header',
      length: 16 + 18,
      source: '203.0.113.7',
    });
  });

  it('keeps the connection’s own address for LOCAL (a balancer’s health check), UNSPEC, UNIX and UDP', () => {
    expect(parseProxyHeader(v2(0, 0x00, []))).toEqual({ kind: 'header', length: 16, source: undefined });
    expect(parseProxyHeader(v2(0, 0x11, V4_BLOCK))).toMatchObject({ kind: 'header', source: undefined });
    expect(parseProxyHeader(v2(1, 0x00, []))).toMatchObject({ kind: 'header', source: undefined });
    expect(parseProxyHeader(v2(1, 0x31, Array<number>(216).fill(0)))).toMatchObject({
      kind: 'header',
      source: undefined,
    });
    expect(parseProxyHeader(v2(1, 0x12, V4_BLOCK))).toMatchObject({ kind: 'header', source: undefined });
  });

  it('waits for every prefix of a valid header', () => {
    const header = v2(1, 0x21, V6_BLOCK);
    for (let n = 1; n < header.length; n++)
      expect(parseProxyHeader(header.subarray(0, n)), `${n} bytes`).toEqual({ kind: 'incomplete' });
  });

  it('refuses another version, an unknown command, addresses shorter than their family and a block over 2048 bytes', () => {
    const other = v2(1, 0x11, V4_BLOCK);
    other[12] = 0x11;
    expect(parseProxyHeader(other)).toMatchObject({ kind: 'invalid' });
    expect(parseProxyHeader(v2(2, 0x11, V4_BLOCK))).toMatchObject({ kind: 'invalid' });
    expect(parseProxyHeader(v2(1, 0x11, V4_BLOCK.slice(0, 8)))).toMatchObject({ kind: 'invalid' });
    expect(parseProxyHeader(v2(1, 0x21, V4_BLOCK))).toMatchObject({ kind: 'invalid' });
    // Refused from its 16 fixed bytes, before the block is held.
    expect(parseProxyHeader(v2(1, 0x11, Array<number>(4000).fill(0)).subarray(0, 16))).toMatchObject({
      kind: 'invalid',
    });
  });
});

it('refuses a connection that opens with anything but a PROXY header, from its first differing byte', () => {
  expect(parseProxyHeader(Buffer.from('GET / HTTP/1.1\r\n'))).toMatchObject({ kind: 'invalid' });
  expect(parseProxyHeader(Buffer.from('PROXX'))).toMatchObject({ kind: 'invalid' });
  expect(parseProxyHeader(Buffer.from([0x0d, 0x0a, 0x0d, 0x0b]))).toMatchObject({ kind: 'invalid' });
  expect(parseProxyHeader(Buffer.from('PRO'))).toEqual({ kind: 'incomplete' });
});
