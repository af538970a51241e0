/**
 * Issue 38, finding 1, in a real browser (Debian's chromium): a page served from another origin (another
 * port of 127.0.0.1) posts to the admin API of a gateway with the documented default (loopback, no
 * token) by a no-cors fetch with a text/plain body and by a form whose text/plain body is valid JSON;
 * a page on a rebound name (rebind.evil.example resolved to 127.0.0.1) reads and writes same-origin.
 * None of it changes the gateway's state or reads its data; the status page's own buttons still work.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, skipBrowser, type TestBrowser } from '../support/browser.js';
import { SEED_TABLE, gatewayFixture, startTestGateway, type TestGateway } from '../support/gateway.js';
import { statusFor } from '../support/http.js';

const LIMITED = '192.0.2.77';
const EVERYONE = JSON.stringify({ cidr: '0.0.0.0/0', for: '1h', reason: 'pwned' });

/** The attacker's page: two no-cors fetches, a bodyless one, and a form whose text/plain body reads as JSON. */
function attackPage(admin: string): string {
  const [name, value] = ['{"cidr":"0.0.0.0/0","for":"1h","x":"', '"}'];
  return `<!doctype html><title>cute cats</title>
<form id="f" method="POST" action="${admin}/admin/blocks" enctype="text/plain"><input name='${name}' value='${value}'></form>
<script>
window.sent = (async () => {
  const out = [];
  for (const path of ['/admin/exemptions', '/admin/blocks']) {
    await fetch(${JSON.stringify(admin)} + path, { method: 'POST', mode: 'no-cors', body: ${JSON.stringify(EVERYONE)}, headers: { 'Content-Type': 'text/plain' } })
      .then((r) => out.push(r.type), (e) => out.push('error ' + e.message));
  }
  await fetch(${JSON.stringify(admin)} + '/admin/surges/none/start', { method: 'POST', mode: 'no-cors' }).then((r) => out.push(r.type), (e) => out.push('error ' + e.message));
  return out;
})();
</script>`;
}

async function serveAttacker(html: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(html));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        // The browser keeps its connection alive: close() alone would wait for it.
        server.closeAllConnections();
      }),
  };
}

async function runtimeEntries(g: TestGateway, section: 'blocks' | 'exemptions'): Promise<unknown[]> {
  const list = (await (await fetch(`${g.adminUrl}/admin/${section}`)).json()) as { entries: { source: string }[] };
  return list.entries.filter((e) => e.source === 'runtime');
}

async function limitedClient(g: TestGateway): Promise<void> {
  for (let i = 0; i < 5; i++) await statusFor(`${g.url}/api/v1/accounts`, LIMITED, { method: 'POST' });
  expect(await statusFor(`${g.url}/api/v1/accounts`, LIMITED, { method: 'POST' })).toBe(429);
}

describe.skipIf(skipBrowser('the admin API against pages of other origins'))(
  'the admin API and a browser (no token, loopback)',
  { timeout: 60_000 },
  () => {
    const fx = gatewayFixture({ graceMs: 200 });
    let browser: TestBrowser;
    beforeAll(async () => {
      browser = await launchBrowser({}, ['--host-resolver-rules=MAP rebind.evil.example 127.0.0.1']);
    });
    afterAll(async () => browser?.close());

    it('a page on another origin changes nothing, by no-cors fetch or by form', async () => {
      const g = (fx.gw = await startTestGateway(SEED_TABLE, { upstream: fx.upstream.url }));
      await limitedClient(g);
      const attacker = await serveAttacker(attackPage(g.adminUrl));
      try {
        const page = await browser.newPage();
        await page.goto(attacker.url);
        // Opaque answers: the requests left the browser (an "error" would mean they were never sent).
        expect(await page.evaluate('window.sent')).toEqual(['opaque', 'opaque', 'opaque']);
        const submitted = page.waitForURL(`${g.adminUrl}/admin/blocks`, { timeout: 10_000 });
        await page.evaluate('setTimeout(() => document.getElementById("f").submit(), 0)');
        await submitted;
        expect(await page.locator('body').innerText()).toMatch(
          /cross-site admin write refused \(Sec-Fetch-Site: same-site\)/,
        );
        await page.close();
      } finally {
        await attacker.close();
      }
      expect(await runtimeEntries(g, 'exemptions')).toEqual([]);
      expect(await runtimeEntries(g, 'blocks')).toEqual([]);
      expect(await statusFor(`${g.url}/api/v1/accounts`, LIMITED, { method: 'POST' })).toBe(429);
      expect((await fetch(`${g.adminUrl}/healthz`)).status).toBe(200);
    });

    it('a page on a rebound name can neither read the status nor write, though same-origin', async () => {
      const g = (fx.gw = await startTestGateway(SEED_TABLE, { upstream: fx.upstream.url }));
      await limitedClient(g);
      const rebound = `http://rebind.evil.example:${new URL(g.adminUrl).port}`;
      const page = await browser.newPage();
      const answer = await page.goto(`${rebound}/status.json`);
      expect(answer?.status()).toBe(421);
      expect(await page.locator('body').innerText()).not.toContain(LIMITED);
      const write = `fetch('/admin/exemptions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: ${JSON.stringify(EVERYONE)} }).then((r) => r.status)`;
      expect(await page.evaluate(write)).toBe(421);
      await page.close();
      expect(await runtimeEntries(g, 'exemptions')).toEqual([]);
      expect(await statusFor(`${g.url}/api/v1/accounts`, LIMITED, { method: 'POST' })).toBe(429);
    });

    it("the status page's own buttons still remove a block and an exemption, on its address and on localhost", async () => {
      const g = (fx.gw = await startTestGateway(SEED_TABLE, { upstream: fx.upstream.url }));
      const port = new URL(g.adminUrl).port;
      for (const [n, base] of [g.adminUrl, `http://localhost:${port}`].entries()) {
        const json = { method: 'POST', headers: { 'content-type': 'application/json' } };
        const ip = `198.51.100.${n + 1}`;
        expect(
          (await fetch(`${g.adminUrl}/admin/blocks`, { ...json, body: JSON.stringify({ ip, reason: 'crawler' }) }))
            .status,
        ).toBe(201);
        expect(
          (
            await fetch(`${g.adminUrl}/admin/exemptions`, {
              ...json,
              body: JSON.stringify({ ip: '192.0.2.50', reason: 'probe' }),
            })
          ).status,
        ).toBe(201);
        const page = await browser.newPage();
        await page.goto(`${base}/`);
        await page.locator('#s-blocks tbody tr', { hasText: ip }).getByRole('button', { name: 'Remove' }).click();
        await expect.poll(() => page.locator('#message').textContent()).toBe(`Removed block of ${ip}.`);
        await page
          .locator('#s-exemptions tbody tr', { hasText: '192.0.2.50' })
          .getByRole('button', { name: 'Remove' })
          .click();
        await expect.poll(() => page.locator('#message').textContent()).toBe('Removed exemption of 192.0.2.50.');
        expect(page.errors).toEqual([]);
        await page.close();
        expect(await runtimeEntries(g, 'blocks')).toEqual([]);
        expect(await runtimeEntries(g, 'exemptions')).toEqual([]);
      }
    });
  },
);
