import os from 'node:os';
import { defineConfig } from 'vitest/config';
import { measureSlowdown } from './test/support/speed.js';

// How much slower than the reference machine this one runs right now (test/support/speed.ts): the
// deadlines below, and every `eventually`, are written for an idle machine and stretched by it.
const slowdown = measureSlowdown();

/**
 * The scenario tests: real processes beside the test's own (`rategate` itself, a browser, puma, haproxy,
 * Prometheus, Redis failovers and clusters) and the long soaks. Most of their time is spent waiting on
 * those processes, not on this one's CPU. Their own project, run by `npm test` like the rest; alone with
 * `npx vitest run --project scenario`, and the fast loop without them is `--project unit`.
 */
const SCENARIOS = [
  'test/admin/{admin-browser-attack,admin-browser-door,admin-door,admin-guard-rails,guard-admin,status-browser}.test.ts',
  'test/app/{readiness,sentinel-password,shutdown}.test.ts',
  'test/cli/*.test.ts',
  'test/config/store-url.test.ts',
  'test/differential/*.test.ts',
  'test/failover/*.test.ts',
  'test/gateway/{other-upgrades,redis-gateway,upstreams}.test.ts',
  'test/guard/{replicas,sentinel-guard}.test.ts',
  'test/hardening/{hostile-process,soak}.test.ts',
  'test/http/{proxy-protocol,tls}.test.ts',
  'test/limiter/{concurrency,key-bound,redis-cluster}.test.ts',
  'test/observability/{logging,log-redaction}.test.ts',
  'test/ops/*.test.ts',
  'test/packaging/{chart-render,deploy-guards,examples,healthcheck}.test.ts',
  'test/replay/{generated-day,html-browser}.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: Math.ceil(20_000 * slowdown),
    hookTimeout: Math.ceil(60_000 * slowdown),
    // Builds src/ once for the spawned `rategate` processes (test/support/built-cli.ts).
    globalSetup: ['test/support/global-setup.ts'],
    provide: { slowdown },
    // Suites start real servers on port 0; files run in parallel processes. vitest's default on 2 cores
    // is one file at a time, and most files spend most of their time waiting (on a process, a Redis, a
    // timer): one more file than cores keeps the CPUs busy.
    pool: 'forks',
    maxWorkers: os.availableParallelism() + 1,
    // Memory assertions collect garbage first, so they measure what is retained, not what is pending.
    execArgv: ['--expose-gc'],
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    // One report for both projects (.ci/run reads its totals).
    outputFile: process.env.CI ? { json: '.vitest-report.json' } : {},
    // vitest starts the projects' files in the order of the projects' names: the scenarios, the longest, first.
    projects: [
      { extends: true, test: { name: 'scenario', include: SCENARIOS } },
      { extends: true, test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: SCENARIOS } },
    ],
  },
});
