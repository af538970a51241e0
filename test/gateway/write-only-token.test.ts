/** Issue 11 item 2: a token the upstream will not introspect (403) is still counted per account. */
import { describe, expect, it } from 'vitest';
import { send } from '../support/http.js';
import { VERIFY } from '../support/recording-upstream.js';
import { sharedGatewayFixture } from '../support/gateway.js';

const TABLE = `
limits:
  - name: media
    match: POST /api/v1/media
    per: account
    limit: 2
    period: 30m
`;

const { upstream, gw } = sharedGatewayFixture(TABLE);

function upload(token: string) {
  return send(gw.url, {
    method: 'POST',
    path: '/api/v1/media',
    headers: { authorization: `Bearer ${token}`, 'content-length': '0' },
  });
}

describe('a write-only token (verify_credentials answers 403)', () => {
  it('is counted by per-account rules, keyed by its digest: the third upload of a 2-per-account rule is 429', async () => {
    expect((await upload('write-only-1')).status).toBe(200);
    expect((await upload('write-only-1')).status).toBe(200);
    const third = await upload('write-only-1');
    expect(third.status).toBe(429);
    expect(upstream.seen.filter((s) => s.url === VERIFY).length).toBeGreaterThanOrEqual(1);
  });

  it('has its own bucket: another write-only token is not charged for the first one', async () => {
    expect((await upload('write-only-2')).status).toBe(200);
  });

  it('still treats an invalid token (401) as no account: per-account rules skip it', async () => {
    for (let i = 0; i < 4; i++) expect((await upload('nonsense')).status).toBe(200);
  });
});
