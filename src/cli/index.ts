#!/usr/bin/env node
/**
 * @module The command line's entry: reads the command and loads only that command's modules (`--version`
 * and `check` never load the gateway, its HTTP client or Redis). The only place that calls process.exit.
 * The commands: serve.ts (`serve`, `upstream`), check.ts (`check`, run from its bundle after a build), table-commands.ts (`explain`), guard.ts
 * (`block`, `exempt`, `bans`, `limited`), replay.ts (`replay`).
 */
import { fileURLToPath } from 'node:url';
import { USAGE } from './usage.js';

type CheckModule = typeof import('./check.js');

/** The build's bundle of `check` (one file and its code cache: bundled.ts), or its module when running from the sources. */
async function checkCommand(): Promise<CheckModule> {
  const { runBundle } = await import('./bundled.js');
  return runBundle<CheckModule>(fileURLToPath(new URL('./check.bundle.cjs', import.meta.url)))?.exports ?? (await import('./check.js'));
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'serve':
      return (await import('./serve.js')).serve(rest);
    case 'upstream':
      return (await import('./serve.js')).upstream(rest);
    case 'check':
      return (await checkCommand()).check(rest);
    case 'explain':
      return (await import('./table-commands.js')).explainCommand(rest);
    case 'replay':
      return (await import('./replay.js')).replayCommand(rest);
    case 'block':
    case 'exempt':
    case 'bans':
      return (await import('./guard.js')).guardCommand(command, rest);
    case 'limited':
      return (await import('./guard.js')).limitedCommand(rest);
    case '--version':
    case '-v':
    case 'version':
      console.log((await import('../observability/version.js')).VERSION);
      return 0;
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      console.log(USAGE);
      return command === undefined ? 1 : 0;
    default:
      console.error(`rategate: unknown command "${command}"\n\n${USAGE}`);
      return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    // Bad flags are the user's error: say so plainly, with the usage.
    if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      console.error(`rategate: ${(err as Error).message}\n\n${USAGE}`);
      process.exit(1);
    }
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  },
);
