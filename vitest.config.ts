import { defineConfig } from 'vitest/config';
import { measureSlowdown } from './test/support/speed.js';

// How much slower than the reference machine this one runs right now (test/support/speed.ts): the
// deadlines below, and every `eventually`, are written for an idle machine and stretched by it.
const slowdown = measureSlowdown();

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: Math.ceil(20_000 * slowdown),
    hookTimeout: Math.ceil(60_000 * slowdown),
    // Builds src/ once for the spawned `rategate` processes (test/support/built-cli.ts).
    globalSetup: ['test/support/global-setup.ts'],
    provide: { slowdown },
    // Suites start real servers on port 0; files run in parallel processes.
    pool: 'forks',
    // Memory assertions collect garbage first, so they measure what is retained, not what is pending.
    execArgv: ['--expose-gc'],
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: process.env.CI ? { json: '.vitest-report.json' } : {},
  },
});
