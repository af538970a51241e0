#!/usr/bin/env node
/**
 * @module The command line's entry: reads the command and loads only that command's modules (`--version`
 * and `check` never load the gateway, its HTTP client or Redis). The only place that calls process.exit,
 * with the sysexits code the command returned (exit.ts); an error nobody expected exits 70.
 * The commands: serve.ts (`serve`, `upstream`), check.ts (`check`, run from its bundle after a build), table-commands.ts (`explain`), guard.ts
 * (`block`, `exempt`, `bans`, `limited`), replay.ts (`replay`); their flags and usage: commands.ts, usage.ts.
 */
import { fileURLToPath } from 'node:url';
import { COMMANDS, type CommandName } from './commands.js';
import { EXIT } from './exit.js';
import { commandUsage, USAGE } from './usage.js';

type CheckModule = typeof import('./check.js');

/** The build's bundle of `check` (one file and its code cache: bundled.ts), or its module when running from the sources. */
async function checkCommand(): Promise<CheckModule> {
  const { runBundle } = await import('./bundled.js');
  return (
    runBundle<CheckModule>(fileURLToPath(new URL('./check.bundle.cjs', import.meta.url)))?.exports ??
    (await import('./check.js'))
  );
}

const isCommand = (name: string | undefined): name is CommandName =>
  name !== undefined && Object.hasOwn(COMMANDS, name);

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
      console.log((await import('../observability/version.js')).versionLine());
      return EXIT.OK;
    case '-h':
    case '--help':
    case 'help':
      // `rategate help explain` as `rategate explain --help`.
      if (isCommand(rest[0])) return (console.log(commandUsage(rest[0])), EXIT.OK);
      console.log(USAGE);
      return EXIT.OK;
    case undefined:
      console.error(USAGE);
      return EXIT.USAGE;
    default:
      console.error(`rategate: unknown command "${command}"\n\n${USAGE}`);
      return EXIT.USAGE;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    // Bad flags are the user's error: say so plainly, with the command's own usage.
    if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      const command = process.argv[2];
      console.error(
        `rategate${isCommand(command) ? ` ${command}` : ''}: ${(err as Error).message}\n\n${isCommand(command) ? commandUsage(command) : USAGE}`,
      );
      process.exit(EXIT.USAGE);
    }
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(EXIT.SOFTWARE);
  },
);
