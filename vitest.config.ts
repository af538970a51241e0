import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 60_000,
    // Suites start real servers on port 0; files run in parallel processes.
    pool: 'forks',
    // Memory assertions collect garbage first, so they measure what is retained, not what is pending.
    execArgv: ['--expose-gc'],
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: process.env.CI ? { json: '.vitest-report.json' } : {},
  },
});
