/**
 * Issue 11 item 1, against the shipped config/limits.yaml: Mastodon throttles `/api/v\d+/media` in one
 * bucket, so once v1 uploads are refused a v2 upload is refused too. This test fails until the shipped
 * table counts v2 uploads (a separate change to config/limits.yaml).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { send } from '../support/http.js';
import { sharedGatewayFixture } from '../support/gateway.js';

const SHIPPED = readFileSync(new URL('../../config/limits.yaml', import.meta.url), 'utf8');

const { gw } = sharedGatewayFixture(SHIPPED);

function upload(version: 'v1' | 'v2') {
  return send(gw.url, {
    method: 'POST',
    path: `/api/${version}/media`,
    headers: { Authorization: 'Bearer user-4242', 'Content-Length': '0' },
  });
}

describe('the shipped table and media uploads (issue 11 item 1)', () => {
  it('refuses a v2 upload once v1 uploads of the same account reached 429', async () => {
    let admitted = 0;
    for (let i = 0; i < 1000; i++) {
      const a = await upload('v1');
      if (a.status === 429) break;
      admitted++;
    }
    expect(admitted).toBeLessThan(1000);
    const v2 = await upload('v2');
    expect(v2.status).toBe(429);
  });
});
