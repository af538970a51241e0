/** @module Unit tests of proxy/'s header rules: hop-by-hop names, client-IP claims, and the X-Forwarded-* / Forwarded headers built for the upstream. */
import type http from 'node:http';
import { describe, expect, it } from 'vitest';
import { connectionListed, isHopByHop, isRateLimitHeader } from '../../src/proxy/hop-by-hop.js';
import { forwardedHeaders } from '../../src/proxy/client-ip-headers.js';
import { resetTime } from '../../src/proxy/upstream-limits.js';
import type { Peer } from '../../src/identity/index.js';

const reqWith = (headers: http.IncomingHttpHeaders): http.IncomingMessage => ({ headers }) as http.IncomingMessage;
const peer = (address: string, trusted: boolean): Peer => ({ trusted, client: { address, key: address } });

describe('hop-by-hop headers', () => {
  it('are the standard ones plus those the Connection header lists', () => {
    expect(connectionListed(undefined)).toBeNull();
    expect(connectionListed('keep-alive')).toBeNull();
    const listed = connectionListed(['close, X-Secret', ' x-other ']);
    expect([...listed!].sort()).toEqual(['x-other', 'x-secret']);
    expect(isHopByHop('transfer-encoding', null)).toBe(true);
    expect(isHopByHop('x-secret', listed)).toBe(true);
    expect(isHopByHop('x-secret', null)).toBe(false);
    expect(isHopByHop('content-type', listed)).toBe(false);
  });

  it('are compared as Puma compares names: `_` and `-` alike', () => {
    const listed = connectionListed('close, X_Secret');
    expect([...listed!]).toEqual(['x-secret']);
    expect(isHopByHop('x_secret', listed)).toBe(true);
    expect(isHopByHop('keep_alive', null)).toBe(true);
    expect(isHopByHop('proxy_connection', null)).toBe(true);
  });

  it('tell rate-limit headers apart from others', () => {
    for (const h of ['x-ratelimit-limit', 'x-ratelimit-reset', 'ratelimit', 'ratelimit-policy'])
      expect(isRateLimitHeader(h)).toBe(true);
    for (const h of ['retry-after', 'x-rate', 'ratelimits']) expect(isRateLimitHeader(h)).toBe(false);
  });
});

describe('client-IP headers for the upstream', () => {
  it('from an untrusted peer: the peer alone, http, the Host header, no Forwarded', () => {
    const f = forwardedHeaders(
      reqWith({
        host: 'example.test',
        'x-forwarded-for': '6.6.6.6',
        'x-forwarded-proto': 'https',
        forwarded: 'for=6.6.6.6',
      }),
      peer('198.51.100.1', false),
      'id-1',
    );
    expect(f).toEqual({
      for: '198.51.100.1',
      proto: 'http',
      host: 'example.test',
      port: '80',
      ssl: 'off',
      trusted: false,
      forwarded: undefined,
      requestId: 'id-1',
    });
  });

  it("from an untrusted peer: X-Forwarded-Port is the Host's port, the claimed one ignored", () => {
    const claims = { 'x-forwarded-port': '443', 'x-forwarded-ssl': 'on' };
    expect(
      forwardedHeaders(reqWith({ host: 'example.test:8080', ...claims }), peer('198.51.100.1', false), 'i'),
    ).toMatchObject({ port: '8080', ssl: 'off' });
    expect(
      forwardedHeaders(reqWith({ host: '[2001:db8::1]:8443', ...claims }), peer('198.51.100.1', false), 'i').port,
    ).toBe('8443');
    expect(forwardedHeaders(reqWith({ host: '[2001:db8::1]', ...claims }), peer('198.51.100.1', false), 'i').port).toBe(
      '80',
    );
    expect(
      forwardedHeaders(reqWith({ host: 'example.test:http', ...claims }), peer('198.51.100.1', false), 'i').port,
    ).toBe('80');
  });

  it('from a trusted proxy: its chain extended by the peer, its proto and host kept', () => {
    const f = forwardedHeaders(
      reqWith({
        host: 'internal',
        'x-forwarded-for': ['203.0.113.7', '10.0.0.2'],
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'social.example',
      }),
      peer('10.0.0.1', true),
      'id-2',
    );
    expect(f).toMatchObject({
      for: '203.0.113.7, 10.0.0.2, 10.0.0.1',
      proto: 'https',
      host: 'social.example',
      port: '443',
      ssl: 'on',
      trusted: true,
      forwarded: undefined,
    });
  });

  it('from a trusted proxy that sent only Forwarded: its for= chain as X-Forwarded-For, and Forwarded extended by the peer', () => {
    const f = forwardedHeaders(
      reqWith({ host: 'h', forwarded: 'for=203.0.113.7;proto=https, for="[2001:db8::1]"' }),
      peer('2001:db8::2', true),
      'id-3',
    );
    expect(f.for).toBe('203.0.113.7, 2001:db8::1, 2001:db8::2');
    expect(f.forwarded).toBe('for=203.0.113.7;proto=https, for="[2001:db8::1]", for="[2001:db8::2]"');
    expect(f.proto).toBe('http');
  });
});

describe("the upstream's X-RateLimit-Reset", () => {
  it('is read as ISO 8601 or Unix seconds, and a small number is left unread', () => {
    expect(resetTime('2026-11-21T19:30:00.000000Z')).toBe(Date.UTC(2026, 10, 21, 19, 30));
    expect(resetTime('1795000000')).toBe(1_795_000_000_000);
    expect(resetTime('60')).toBeUndefined();
    expect(resetTime(undefined)).toBeUndefined();
  });
});
