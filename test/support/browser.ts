/**
 * @module A real browser for tests: Debian's chromium driven by playwright-core (never a downloaded
 * browser), headless, in a fresh profile, with no network beyond what the page asks. Missing chromium
 * fails the suite under CI=true (CI must not pass by skipping) and skips it loudly otherwise.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type BrowserContextOptions, type Page } from 'playwright-core';
import { expect } from 'vitest';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Where test runs keep their screenshots (git-ignored). */
export const SCREENSHOTS = path.resolve('test-output/screenshots');

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** For `describe.skipIf(skipBrowser(…))`: true to skip; under CI=true a missing chromium throws instead. */
export function skipBrowser(what: string): boolean {
  if (existsSync(CHROMIUM)) return false;
  const reason = `no chromium at ${CHROMIUM} (apt-get install chromium)`;
  if (process.env.CI === 'true') throw new Error(`${what} needs a browser, and CI=true: ${reason}`);
  console.warn(`\n*** SKIPPING ${what}: ${reason} ***\n`);
  return true;
}

export interface TestBrowser {
  readonly context: BrowserContext;
  /** A new tab that records the page's console errors and uncaught exceptions (a CSP violation is one). */
  newPage(): Promise<Page & { readonly errors: string[] }>;
  close(): Promise<void>;
}

/** Starts chromium in a fresh profile directory, removed on close; `flags` go on its command line after the usual ones. */
export async function launchBrowser(
  options: BrowserContextOptions = {},
  flags: readonly string[] = [],
): Promise<TestBrowser> {
  const profile = mkdtempSync(path.join(os.tmpdir(), 'rategate-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [...FLAGS, ...flags],
    ...options,
  });
  return {
    context,
    async newPage() {
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('console', (m) => void (m.type() === 'error' && errors.push(m.text())));
      page.on('pageerror', (e) => void errors.push(e.message));
      return Object.assign(page, { errors });
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Saves a screenshot of the whole page under SCREENSHOTS; returns its path. */
export async function keepScreenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const file = path.join(SCREENSHOTS, name);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/**
 * Opens a self-contained HTML page (a replay report) from `file` in a fresh 1200×900 browser and hands
 * it to `check`; then the page must have fetched nothing but itself and logged no error. Keeps its
 * screenshot as `screenshot`; the browser is closed whatever happens.
 */
export async function checkStaticPage(
  file: string,
  screenshot: string,
  check: (page: Page) => Promise<void>,
): Promise<void> {
  const browser = await launchBrowser({ viewport: { width: 1200, height: 900 } });
  try {
    const page = await browser.newPage();
    const requests: string[] = [];
    page.on('request', (r) => void requests.push(r.url()));
    await page.goto(`file://${file}`);
    await check(page);
    expect(requests).toEqual([`file://${file}`]);
    expect(page.errors).toEqual([]);
    await keepScreenshot(page, screenshot);
  } finally {
    await browser.close();
  }
}
