/**
 * Issue 32, the status page in a real browser (Debian's chromium through playwright-core): it shows the
 * rules and updates their rates while traffic flows, without a reload; it reads without JavaScript;
 * lifting a ban through its button lifts it on both replicas of a shared Redis, and so does removing a
 * runtime block or exemption through theirs; a wrong token is refused with a message; a phone-sized
 * viewport lays it out readably. Screenshots go to test-output/screenshots/.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { RunningGateway } from '../../src/app/start.js';
import { keepScreenshot, launchBrowser, skipBrowser, type TestBrowser } from '../support/browser.js';
import { SEED_TABLE, gatewayFixture, startTestGateway } from '../support/gateway.js';
import { spawnServe, stop, waitFor, type GatewayProcess } from '../support/process.js';
import { startRecordingUpstream, type RecordingUpstream, refuseSignIns } from '../support/recording-upstream.js';
import { skipRedis, startRedis, type RedisHandle } from '../support/redis.js';
import { scaledMs } from '../support/speed.js';

const TOKEN = 'status-browser-admin-token';
const ATTACKER = '203.0.113.66';

/** Sends requests in the background until stopped (one at a time: a steady flow, not a flood). */
function traffic(send: () => Promise<unknown>): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) await send().catch(() => undefined);
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}

async function get(url: string, ip: string, init: RequestInit = {}): Promise<number> {
  const r = await fetch(url, {
    ...init,
    headers: { 'x-forwarded-for': ip, ...(init.headers as Record<string, string> | undefined) },
  });
  await r.arrayBuffer();
  return r.status;
}

/** The text of a rule's cell in the page's rules table (the column by its header). */
function ruleCell(page: Page, rule: string, column: string): Promise<string | null> {
  const row = page
    .locator('#s-rules tbody tr')
    .filter({ has: page.locator('td:first-child', { hasText: new RegExp(`^${rule}$`) }) });
  return row.locator(`td[data-label="${column}"]`).textContent();
}

describe.skipIf(skipBrowser('the status page in a browser'))(
  'the status page in chromium, one gateway',
  { timeout: 60_000 },
  () => {
    const fx = gatewayFixture<RunningGateway>({ graceMs: 200 });
    let browser: TestBrowser;
    beforeAll(async () => {
      browser = await launchBrowser({ viewport: { width: 1280, height: 900 } });
    });
    afterAll(async () => browser?.close());

    it('shows the rules and updates their rates while traffic flows, without reloading the page', async () => {
      const g = (fx.gw = await startTestGateway(SEED_TABLE, { upstream: fx.upstream.url }));
      const page = await browser.newPage();
      await page.goto(`${g.adminUrl}/`);
      const rules = await page.locator('#s-rules tbody tr td:first-child').allTextContents();
      expect(rules).toEqual(['account-access', 'ip-access', 'sign-up', 'uploading', 'deletion']);
      expect(await ruleCell(page, 'ip-access', 'allowed/s')).toBe('0 · 0');
      // Page-side code is given as text: the tests' TypeScript has no DOM types.
      await page.evaluate('window.marker = 1');

      const flow = traffic(() => get(`${g.url}/api/v1/timelines/public`, '192.0.2.10'));
      try {
        // Some allowed requests per second over the minute: the first figure of "1m · 5m" is no longer 0.
        await expect
          .poll(() => ruleCell(page, 'ip-access', 'allowed/s'), { timeout: 15_000, interval: 200 })
          .toMatch(/^(<0\.01|0\.\d*[1-9]|[1-9])/);
      } finally {
        await flow.stop();
      }
      // The same page (no navigation): the script refreshed the table from /status.json.
      expect(await page.evaluate('window.marker')).toBe(1);
      expect(await ruleCell(page, 'sign-up', 'allowed/s')).toBe('0 · 0');
      expect(page.errors).toEqual([]);
      await page.close();
    });

    it('reads without JavaScript: the same tables, rendered by the server, and no buttons that cannot work', async () => {
      const g = (fx.gw = await startTestGateway(SEED_TABLE, { upstream: fx.upstream.url }));
      await fetch(`${g.adminUrl}/admin/blocks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ip: '198.51.100.23', reason: 'scraper' }),
      });
      const noScript = await launchBrowser({ javaScriptEnabled: false });
      try {
        const page = await noScript.newPage();
        await page.goto(`${g.adminUrl}/status`);
        expect(await page.locator('#s-rules tbody tr').count()).toBe(5);
        expect(await page.locator('#s-blocks tbody tr td').first().textContent()).toBe('198.51.100.23');
        expect(await page.locator('#s-blocks button').isVisible()).toBe(false);
        expect(await page.locator('#token-form').isVisible()).toBe(false);
      } finally {
        await noScript.close();
      }
    });
  },
);

const TABLE = `limits:
  - { name: ip-access, match: /api/*, per: ip, limit: 300, period: 5m }
  - { name: sign-up, match: POST /api/v1/accounts, per: ip, limit: 5, period: 30m }
  - { name: search-trial, match: /api/v2/search, per: ip, limit: 3, period: 1m, shadow: true }
bans:
  - name: login-failures
    match: POST /auth/sign_in(.:format)
    per: ip
    on: { status: [401, 422] }
    limit: 3
    period: 10m
    ban: 1h
store: { timeout: 2s }
`;

describe.skipIf(skipBrowser('the status page in a browser') || skipRedis('the status page on two replicas'))(
  'the status page in chromium, two replicas sharing a Redis',
  { timeout: 60_000 },
  () => {
    let redis: RedisHandle;
    let upstream: RecordingUpstream;
    let configPath: string;
    let gws: GatewayProcess[] = [];
    let browser: TestBrowser;
    const auth = { authorization: `Bearer ${TOKEN}` };

    beforeAll(async () => {
      redis = await startRedis();
      upstream = await startRecordingUpstream();
      refuseSignIns(upstream);
      configPath = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-status-')), 'limits.yaml');
      writeFileSync(configPath, TABLE);
      gws = await Promise.all(
        [0, 1].map(() =>
          spawnServe(
            ['--config', configPath, '--upstream', upstream.url, '--store', redis.url],
            { RATEGATE_LOG_LEVEL: 'warn', RATEGATE_ADMIN_TOKEN: TOKEN },
            30_000,
          ),
        ),
      );
      // Short: a screenshot of the whole page is as tall as the page, or as the viewport when that is taller.
      browser = await launchBrowser({ viewport: { width: 1280, height: 640 } });
    }, scaledMs(90_000));
    afterAll(async () => {
      await browser?.close();
      await Promise.all(gws.map(stop));
      await upstream?.close();
      await redis?.stop();
    });

    /** Opens a replica's page and gives it the admin token through its form. */
    async function signedIn(gw: GatewayProcess, b: TestBrowser = browser): Promise<Page & { errors: string[] }> {
      const page = await b.newPage();
      await page.goto(`${gw.adminUrl}/`);
      await expect.poll(() => page.locator('#message').textContent()).toBe('This gateway asks for its admin token.');
      await page.fill('#token', TOKEN);
      await page.press('#token', 'Enter');
      await page.locator('#s-rules').waitFor();
      // Asking for the token is the 401 of the page and of its first /status.json: the browser logs both.
      const rest = page.errors.filter((e) => !e.includes('status of 401 (Unauthorized)'));
      page.errors.splice(0, page.errors.length, ...rest);
      return page;
    }

    const bansOn = async (gw: GatewayProcess): Promise<unknown[]> =>
      ((await (await fetch(`${gw.adminUrl}/admin/bans`, { headers: auth })).json()) as { bans: unknown[] }).bans;

    it('lifts a ban through its button, and the ban is gone on both replicas', async () => {
      const [a, b] = gws as [GatewayProcess, GatewayProcess];
      const login = {
        method: 'POST',
        body: 'user[email]=a@example.com&user[password]=x',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      };
      for (let i = 0; i < 3; i++) expect(await get(`${[a, b][i % 2]!.url}/auth/sign_in`, ATTACKER, login)).toBe(401);
      await waitFor(
        async () => (await get(`${b.url}/api/v1/timelines/home`, ATTACKER)) === 403,
        5_000,
        'the ban on replica B',
      );
      await fetch(`${a.adminUrl}/admin/blocks`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ cidr: '198.51.100.0/24', for: '2h', reason: 'scraper' }),
      });
      await fetch(`${a.adminUrl}/admin/exemptions`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ ip: '192.0.2.50', for: '1h', reason: 'status checker' }),
      });
      // A refused reload and a good one, for the page's history.
      writeFileSync(configPath, TABLE.replace('limit: 5,', 'limit: -5,'));
      await waitFor(
        async () =>
          JSON.stringify(await (await fetch(`${a.adminUrl}/status.json`, { headers: auth })).json()).includes(
            '"ok":false',
          ),
        10_000,
        'a refused reload',
      );
      writeFileSync(configPath, TABLE.replace('limit: 5,', 'limit: 6,'));
      await waitFor(
        async () =>
          (await (await fetch(`${a.adminUrl}/status.json`, { headers: auth })).text()).includes(
            '"kind":"reload","ok":true',
          ),
        10_000,
        'a reload',
      );

      const flow = traffic(async () => {
        await get(`${a.url}/api/v1/timelines/home`, '192.0.2.10');
        await get(`${a.url}/api/v2/search?q=x`, '192.0.2.11');
        await get(`${b.url}/api/v1/timelines/home`, '192.0.2.13');
        await get(`${a.url}/api/v1/accounts`, '192.0.2.12', { method: 'POST', body: 'username=x' });
      });
      try {
        const page = await signedIn(a);
        const banRow = page.locator('#s-bans tbody tr', { hasText: ATTACKER });
        await banRow.waitFor();
        await page.locator('#s-limited tbody tr').first().waitFor({ timeout: 10_000 });
        await keepScreenshot(page, 'status-page.png');

        await banRow.getByRole('button', { name: 'Lift' }).click();
        await expect
          .poll(() => page.locator('#message').textContent())
          .toBe(`Lifted ban login-failures on ip:${ATTACKER}.`);
        await banRow.waitFor({ state: 'detached' });
        expect(await page.locator('#s-bans .empty').textContent()).toBe('No active ban.');
        // The other replica: its admin API, the client's requests, and its own page.
        await waitFor(async () => (await bansOn(b)).length === 0, 2_000, 'the ban lifted on replica B');
        await waitFor(
          async () => (await get(`${b.url}/api/v1/timelines/home`, ATTACKER)) === 200,
          2_000,
          'the client served by replica B',
        );
        const pageB = await signedIn(b);
        expect(await pageB.locator('#s-bans .empty').textContent()).toBe('No active ban.');
        expect(page.errors).toEqual([]);
        expect(pageB.errors).toEqual([]);
        await Promise.all([page.close(), pageB.close()]);
      } finally {
        await flow.stop();
      }
    });

    it("shows both replicas' rates (each published to the shared Redis), the upstream, and one health line at the top", async () => {
      const [a, b] = gws as [GatewayProcess, GatewayProcess];
      // Twice as many requests through A as through B, for both to have rates of their own.
      const flow = traffic(async () => {
        await get(`${a.url}/api/v1/timelines/public`, '192.0.2.20');
        await get(`${a.url}/api/v1/timelines/public`, '192.0.2.21');
        await get(`${b.url}/api/v1/timelines/public`, '192.0.2.22');
      });
      try {
        const page = await signedIn(a);
        const rows = page.locator('#s-fleet tbody tr');
        const allowed = async (i: number): Promise<string | null> =>
          rows.nth(i).locator('td[data-label="allowed/s"]').textContent();
        // This replica first (live), then the other as it published, then their sum; both non-zero.
        await expect.poll(() => rows.count(), { timeout: 20_000, interval: 250 }).toBe(3);
        const nonZero = /^(<0\.01|0\.\d*[1-9]|[1-9])/;
        await expect.poll(() => allowed(0), { timeout: 20_000, interval: 250 }).toMatch(nonZero);
        await expect.poll(() => allowed(1), { timeout: 20_000, interval: 250 }).toMatch(nonZero);
        expect(await rows.nth(0).locator('td').first().textContent()).toMatch(/ \(pid \d+\) · this one$/);
        expect(await rows.nth(1).locator('td[data-label="published"]').textContent()).toMatch(/^\d+\u00a0s ago$/);
        expect(await rows.nth(2).locator('td').first().textContent()).toBe('all replicas');
        // The two replicas are two processes: two pids on the page.
        const names = await rows.locator('td:first-child').allTextContents();
        expect(new Set(names.slice(0, 2).map((n) => /pid (\d+)/.exec(n)?.[1])).size).toBe(2);

        await expect
          .poll(() => page.locator('#s-health .line').textContent(), { timeout: 10_000 })
          .toBe('healthy: 2 replicas, upstream up, store up');
        expect(await page.locator('#s-health .line').getAttribute('class')).toBe('line good');
        const probe = page.locator('#s-upstream tbody tr', { hasText: 'probe' }).locator('td').nth(1);
        expect(await probe.textContent()).toMatch(/^up: answered HEAD in \d+ ms/);
        // The health line is the first thing on the page.
        expect(await page.locator('main section').first().getAttribute('id')).toBe('s-health');
        await keepScreenshot(page, 'status-page-fleet.png');
        expect(page.errors).toEqual([]);
        await page.close();
      } finally {
        await flow.stop();
      }
    });

    it('refuses a wrong token with a message on the page, and shows nothing until the right one', async () => {
      const page = await browser.newPage();
      await page.goto(`${gws[0]!.adminUrl}/status`);
      await page.fill('#token', 'not-the-token');
      await page.press('#token', 'Enter');
      await expect
        .poll(() => page.locator('#message').textContent())
        .toBe('The admin token was refused (401): enter the right one.');
      expect(await page.locator('#s-rules').count()).toBe(0);
      expect(await page.evaluate("sessionStorage.getItem('rategate.adminToken')")).toBeNull();
      await page.fill('#token', TOKEN);
      await page.press('#token', 'Enter');
      await page.locator('#s-rules').waitFor();
      expect(await page.locator('#message').textContent()).toBe('');
      // Asked once: kept in the tab's sessionStorage, sent as a bearer header, not asked again on a reload.
      expect(await page.evaluate("sessionStorage.getItem('rategate.adminToken')")).toBe(TOKEN);
      const sent: (string | undefined)[] = [];
      page.on('request', (r) => void (r.url().endsWith('/status.json') && sent.push(r.headers().authorization)));
      await page.reload();
      await page.locator('#s-rules').waitFor();
      await expect.poll(() => sent.length).toBeGreaterThan(0);
      expect(new Set(sent)).toEqual(new Set([`Bearer ${TOKEN}`]));
      expect(await page.locator('#token-form').isVisible()).toBe(false);
      await page.close();
    });

    it('refuses a lift made with a token that no longer holds, with a message, and lifts nothing', async () => {
      const [a] = gws as [GatewayProcess];
      for (let i = 0; i < 3; i++) await get(`${a.url}/auth/sign_in`, '203.0.113.77', { method: 'POST', body: 'x=1' });
      await waitFor(async () => (await bansOn(a)).length === 1, 5_000, 'a second ban');
      const page = await signedIn(a);
      const row = page.locator('#s-bans tbody tr', { hasText: '203.0.113.77' });
      await row.waitFor();
      // The token goes stale between reading and writing (rotated elsewhere): the write reaches the gateway with it.
      await page.route('**/admin/bans/**', (route) =>
        route.continue({ headers: { ...route.request().headers(), authorization: 'Bearer stale' } }),
      );
      await row.getByRole('button', { name: 'Lift' }).click();
      await expect
        .poll(() => page.locator('#message').textContent())
        .toBe('The admin token was refused (401): nothing was changed. Enter the right one.');
      expect(await page.locator('#token-form').isVisible()).toBe(true);
      expect(await bansOn(a)).toHaveLength(1);
      await page.close();
    });

    it('removes a runtime block and an exemption through their buttons, and both are gone on both replicas', async () => {
      const [a, b] = gws as [GatewayProcess, GatewayProcess];
      const listed = async (gw: GatewayProcess, what: string): Promise<string> =>
        JSON.stringify(await (await fetch(`${gw.adminUrl}/admin/${what}`, { headers: auth })).json());
      await fetch(`${a.adminUrl}/admin/blocks`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ ip: '203.0.113.88', for: '1h', reason: 'crawler' }),
      });
      await fetch(`${a.adminUrl}/admin/exemptions`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ ip: '192.0.2.77', for: '1h', reason: 'probe' }),
      });
      await waitFor(
        async () => (await get(`${b.url}/api/v1/timelines/home`, '203.0.113.88')) === 403,
        5_000,
        'the block on replica B',
      );
      const page = await signedIn(b);
      const blockRow = page.locator('#s-blocks tbody tr', { hasText: '203.0.113.88' });
      await blockRow.getByRole('button', { name: 'Remove' }).click();
      await expect.poll(() => page.locator('#message').textContent()).toBe('Removed block of 203.0.113.88.');
      await blockRow.waitFor({ state: 'detached' });
      const exemptRow = page.locator('#s-exemptions tbody tr', { hasText: '192.0.2.77' });
      await exemptRow.getByRole('button', { name: 'Remove' }).click();
      await expect.poll(() => page.locator('#message').textContent()).toBe('Removed exemption of 192.0.2.77.');
      await exemptRow.waitFor({ state: 'detached' });
      // The other replica: its listings and the client's requests.
      await waitFor(
        async () => !(await listed(a, 'blocks')).includes('203.0.113.88'),
        2_000,
        'the block removed on replica A',
      );
      await waitFor(
        async () => !(await listed(a, 'exemptions')).includes('192.0.2.77'),
        2_000,
        'the exemption removed on replica A',
      );
      expect(await get(`${a.url}/api/v1/timelines/home`, '203.0.113.88')).toBe(200);
      expect(page.errors).toEqual([]);
      await page.close();
    });

    it("shows the fleet's top limited keys: a client limited on replica B is on replica A's page", async () => {
      const [a, b] = gws as [GatewayProcess, GatewayProcess];
      const signUp = {
        method: 'POST',
        body: 'username=x',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      };
      const statuses: number[] = [];
      for (let i = 0; i < 10; i++) statuses.push(await get(`${b.url}/api/v1/accounts`, '192.0.2.66', signUp));
      expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0);
      const page = await signedIn(a);
      const row = page.locator('#s-limited tbody tr', { hasText: '192.0.2.66' });
      // Replica B publishes its sketch with its heartbeat (every 5 s); replica A's page refreshes itself.
      await row.waitFor({ timeout: 20_000 });
      expect(await row.locator('td').first().textContent()).toBe('sign-up');
      expect(await page.locator('#s-limited').innerText()).toContain('every replica sharing the store');
      expect(page.errors).toEqual([]);
      await page.close();
    });

    it('lays out on a phone-sized viewport: no sideways scrolling, labelled rows', async () => {
      const phone = await launchBrowser({
        viewport: { width: 390, height: 844 },
        isMobile: true,
        hasTouch: true,
        deviceScaleFactor: 2,
      });
      try {
        const page = await signedIn(gws[0]!, phone);
        // Without the viewport meta a phone lays the page out 980 px wide and shrinks it.
        expect(await page.evaluate('innerWidth')).toBe(390);
        expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
        expect(await page.locator('#s-rules thead').isVisible()).toBe(false);
        const label = await page.evaluate(
          "getComputedStyle(document.querySelector('#s-rules tbody td'), '::before').content",
        );
        expect(label).toBe('"rule"');
        await keepScreenshot(page, 'status-page-phone.png');
        expect(page.errors).toEqual([]);
      } finally {
        await phone.close();
      }
    });
  },
);
