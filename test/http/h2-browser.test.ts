/**
 * A real browser through the gateway over HTTPS (Debian's chromium through playwright-core, trusting the
 * test CA's certificate by its key): the page and its API calls come over HTTP/2, as the browser itself
 * reports (`nextHopProtocol`), and the seed table's sign-up bar holds for them (the sixth is 429, with the
 * rate-limit headers the page can read).
 */
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, skipBrowser, type TestBrowser } from '../support/browser.js';
import { SEED_TABLE, startTestGateway, type TestGateway } from '../support/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { makeTestCa } from '../support/test-ca.js';

const PAGE = `<!doctype html><html><head><title>rategate h2</title></head><body><p id="out">…</p></body></html>`;

describe.skipIf(skipBrowser('HTTP/2 in a browser'))(
  'chromium through the gateway over HTTPS',
  { timeout: 60_000 },
  () => {
    let upstream: RecordingUpstream;
    let gw: TestGateway;
    let browser: TestBrowser;

    beforeAll(async () => {
      const ca = await makeTestCa();
      upstream = await startRecordingUpstream();
      upstream.route('/app', (_req, res) => {
        res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Length': Buffer.byteLength(PAGE) });
        res.end(PAGE);
      });
      gw = await startTestGateway(
        `${SEED_TABLE}server:\n  tls: { certFile: ${ca.certFile}, keyFile: ${ca.keyFile} }\n`,
        { upstream: upstream.url },
      );
      // Trusted by its key, as --ignore-certificate-errors-spki-list has it: nothing else is let through.
      const spki = new X509Certificate(readFileSync(ca.certFile)).publicKey.export({ type: 'spki', format: 'der' });
      browser = await launchBrowser({}, [
        `--ignore-certificate-errors-spki-list=${createHash('sha256').update(spki).digest('base64')}`,
      ]);
    });
    afterAll(async () => {
      await browser?.close();
      await gw?.shutdown(200);
      await upstream?.close();
    });

    it('loads a page and its API calls over h2, and the sixth sign-up is 429 with the rate-limit headers', async () => {
      const page = await browser.newPage();
      const response = await page.goto(`${gw.url}/app`);
      expect(response?.status()).toBe(200);
      const result = await page.evaluate(async () => {
        const statuses: number[] = [];
        let last: Record<string, string> = {};
        for (let i = 0; i < 6; i++) {
          const r = await fetch('/api/v1/accounts', {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: '{"username":"b"}',
          });
          statuses.push(r.status);
          last = Object.fromEntries([...r.headers.entries()]);
          await r.text();
        }
        const entries = performance.getEntries() as unknown as Array<{ name: string; nextHopProtocol: string }>;
        return {
          statuses,
          last,
          navigation: entries[0]!.nextHopProtocol,
          api: entries.filter((e) => e.name.endsWith('/api/v1/accounts')).map((e) => e.nextHopProtocol),
        };
      });
      expect(result.navigation).toBe('h2');
      expect(result.api.length).toBeGreaterThan(0);
      expect(new Set(result.api)).toEqual(new Set(['h2']));
      expect(result.statuses).toEqual([200, 200, 200, 200, 200, 429]);
      expect(result.last['x-ratelimit-limit']).toBe('5');
      expect(result.last['x-ratelimit-remaining']).toBe('0');
      expect(result.last['retry-after']).toBeDefined();
      expect(page.errors.filter((e) => !e.includes('429'))).toEqual([]);
    });
  },
);
