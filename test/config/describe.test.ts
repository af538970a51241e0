/** @module `rategate check` output: the rules table and the summary line. */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatRulesTable, formatSummary, loadConfigFile, parseConfig } from '../../src/config/index.js';

const SHIPPED = fileURLToPath(new URL('../../config/limits.yaml', import.meta.url));

describe('formatRulesTable', () => {
  it('prints the shipped rules as an aligned table', async () => {
    const snap = await loadConfigFile(SHIPPED);
    expect(formatRulesTable(snap)).toBe(
      [
        'NAME            MATCH                                                            PER      LIMIT  PERIOD  ALGORITHM     COST  SHADOW',
        'account-access  /api/*                                                           account    300  5m      fixed-window     1  no',
        'ip-access       /api/*                                                           ip         300  5m      fixed-window     1  no',
        'sign-up         POST /api/v1/accounts                                            ip           5  30m     fixed-window     1  no',
        'uploading       POST /api/v1/media, POST /api/v2/media                           account     30  30m     fixed-window     1  no',
        'deletion        DELETE /api/v1/statuses/:id, POST /api/v1/statuses/:id/unreblog  account     30  30m     fixed-window     1  no',
      ].join('\n'),
    );
  });

  it('marks missing: ip, when.account and a surge’s rules in the PER column', () => {
    const snap = parseConfig(
      `limits:
  - { name: inbox, match: POST /inbox, per: [signature:domain, ip], missing: ip, limit: 3, period: 1m }
  - { name: sig, match: POST /inbox, per: signature:domain, missing: ip, limit: 3, period: 1m }
  - { name: young, match: POST /api/v1/statuses, per: account, when: { account: { age: "< 7d", bot: false } }, limit: 3, period: 1m }
surges:
  - { name: wave, trigger: { rule: inbox, above: 5, within: 1m }, for: 1h, limits: [{ name: wave-cap, match: POST /inbox, per: global, limit: 10, period: 1h }] }
`,
      't',
    );
    const per = formatRulesTable(snap)
      .split('\n')
      .slice(1)
      .map((l) => l.split(/\s{2,}/)[2]);
    expect(per).toEqual([
      '[signature:domain, ip] (missing: ip)',
      'signature:domain (missing: ip)',
      'account (account: age < 7d, not bot)',
      'global (surge wave)',
    ]);
  });

  it('says so when there are no rules', () => {
    expect(formatRulesTable(parseConfig('limits: []', 'empty.yaml'))).toBe(
      '(no rules: every request passes uncounted)',
    );
  });

  it('shows shadow rules, odd periods and other algorithms', () => {
    const snap = parseConfig(
      'limits: [{ name: t, match: /t, per: global, limit: 7, period: 90s, algorithm: token-bucket, cost: 2, shadow: true }]',
      't',
    );
    expect(formatRulesTable(snap).split('\n')[1]).toBe('t     /t     global      7  1m30s   token-bucket     2  yes');
  });
});

describe('formatSummary', () => {
  it('counts rules and shadow rules and names the store and upstream', async () => {
    expect(formatSummary(await loadConfigFile(SHIPPED))).toMatch(
      /limits\.yaml: 5 rules, store memory, upstream builtin$/,
    );
    const snap = parseConfig('limits: [{ name: t, match: /t, per: ip, limit: 1, period: 1s, shadow: true }]', 'x.yaml');
    expect(formatSummary(snap)).toBe('x.yaml: 1 rule (1 shadow), store memory, upstream builtin');
  });

  it('never prints a store password', () => {
    const snap = parseConfig('store: { url: "redis://default:hunter2@cache:6379/0" }', 'x.yaml');
    expect(formatSummary(snap)).toBe('x.yaml: 0 rules, store redis://default:***@cache:6379/0, upstream builtin');
    expect(formatSummary(snap)).not.toContain('hunter2');
  });
});
