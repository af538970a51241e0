/** `rategate check`'s warnings about patterns a Rails format suffix escapes: which patterns, in which sections, at which place. */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { formatSuffixWarnings, withFormatSuffix } from '../../src/config/format-warnings.js';

describe('patterns Rails also routes with a format suffix', () => {
  it('are those ending in a literal segment without (.:format), outside /api', () => {
    expect(withFormatSuffix('POST /inbox')).toBe('POST /inbox(.:format)');
    expect(withFormatSuffix('/users/:name/inbox')).toBe('/users/:name/inbox(.:format)');
    expect(withFormatSuffix('  PUT /auth ')).toBe('PUT /auth(.:format)');
    for (const p of [
      'POST /inbox(.:format)',
      'DELETE /statuses/:id',
      '/media_proxy/*',
      '/',
      '/*',
      'POST /api/v1/accounts',
      '/api',
      'POST /apis/x',
    ]) {
      expect(withFormatSuffix(p), p).toBe(p === 'POST /apis/x' ? 'POST /apis/x(.:format)' : null);
    }
  });

  it('are found in limits, bans, in-flight rules, surge limits and body limits, each at its place', () => {
    const snap = parseConfig(
      `limits:
  - { name: a, match: POST /inbox, per: ip, limit: 1, period: 1m }
  - { name: t, match: /api/*, per: ip, limit: 1, period: 1m }
bans:
  - { name: b, match: [POST /auth/sign_in(.:format), POST /auth/password], per: ip, limit: 3, period: 1m, ban: 1h }
concurrency:
  - { name: c, match: POST /upload, per: ip, max: 1 }
server:
  bodyLimits: [{ match: POST /upload/big, maxBodySize: 1MB }]
surges:
  - name: s
    trigger: { rule: t, above: 5, within: 1m }
    for: 1h
    limits: [{ name: sl, match: [POST /api/v1/accounts, POST /auth], per: ip, limit: 1, period: 1d }]
`,
      't.yaml',
    );
    expect(formatSuffixWarnings(snap).map((w) => w.split(': ')[0])).toEqual([
      'limits[0].match',
      'bans[0].match[1]',
      'concurrency[0].match',
      'surges[0].limits[0].match[1]',
      'server.bodyLimits[0].match',
    ]);
  });
});
