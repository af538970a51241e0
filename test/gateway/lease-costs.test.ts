/**
 * Issue 37, part 1: leases are exact with costs. A rule of cost 3 and limit 10 admits three requests and
 * refuses the fourth through the real gateway, whatever the store and whether it leases: a lease that
 * held tokens short of one request used to sit beside a store that refused (200, 200, 429, 429).
 * `store.gateways: 1` is what a lone gateway learns from the fleet's heartbeats, stated at once here so
 * that the leases' share does not depend on when the first heartbeat lands.
 */
import { describe, expect, it } from 'vitest';
import { startTestGateway } from '../support/gateway.js';
import { send } from '../support/http.js';
import { storeMatrix } from '../support/store-matrix.js';

const stores = storeMatrix('leases with costs');
let run = 0;

describe.each(stores.cases)('a rule of cost 3 and limit 10, on $name', ({ url, lease, skip }) => {
  it.skipIf(skip)('answers 200, 200, 200, 429 with the remaining 7, 4, 1, 0', async () => {
    const gw = await startTestGateway(
      `store: { prefix: "lc${process.pid}-${++run}", timeout: 2s, onError: deny, lease: ${lease}, gateways: 1 }
limits:
  - { name: costly, match: /api/*, per: ip, limit: 10, period: 1h, cost: 3 }
`,
      { upstream: stores.upstream().url, store: url() },
    );
    try {
      const answers = [];
      for (let i = 0; i < 4; i++)
        answers.push(
          await send(gw.url, { path: '/api/v1/statuses/1', headers: { 'X-Forwarded-For': '198.51.100.37' } }),
        );
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429]);
      expect(answers.map((a) => a.headers['x-ratelimit-remaining'])).toEqual(['7', '4', '1', '0']);
    } finally {
      await gw.shutdown(200);
    }
  });
});
