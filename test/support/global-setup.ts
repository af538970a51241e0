/**
 * @module vitest's globalSetup: runs once in the main process before any test file. Builds the gateway
 * for spawned processes (built-cli.ts) and hands its path to the test files through `inject`. (The
 * machine's slowdown, speed.ts, is measured by vitest.config.ts and provided from there.)
 */
import type { TestProject } from 'vitest/node';
import { buildCli } from './built-cli.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The compiled cli/index.js spawned processes run (test/support/process.ts). */
    builtCli: string;
    /** How many times slower than the reference machine this one ran a CPU loop at the start (≥ 1; vitest.config.ts). */
    slowdown: number;
  }
}

export default async function setup(project: TestProject): Promise<void> {
  project.provide('builtCli', await buildCli());
  // In watch mode, a rerun after an edit of src/ spawns the edited code.
  project.onTestsRerun(async () => project.provide('builtCli', await buildCli()));
}
