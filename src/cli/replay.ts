/**
 * @module `rategate replay`: whom a limit table would have limited, read from the access logs an
 * instance already has (replay/). The text report on stdout (or `--json`), `--html FILE` for a page
 * with a chart per rule; progress on stderr when it is a terminal.
 */
import { writeFile } from 'node:fs/promises';
import { ConfigError } from '../config/errors.js';
import { loadConfigFile } from '../config/load.js';
import { ASSUMPTIONS, isAssumption, type Assumption } from '../replay/decidable.js';
import { formatNamed } from '../replay/formats.js';
import type { LogFormat } from '../replay/record.js';
import { formatReport } from '../replay/report.js';
import { runReplay } from '../replay/run.js';
import { COMMANDS } from './commands.js';
import { EXIT } from './exit.js';
import { configPath, parseCommand, printHelp, reportConfigError, usageError } from './options.js';

export async function replayCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseCommand(args, COMMANDS.replay.flags);
  if (values.help) return printHelp('replay');
  if (positionals.length === 0) return usageError('replay', 'name at least one log (or - for standard input)');
  const top = values.top === undefined ? 10 : Number(values.top);
  if (!Number.isInteger(top) || top < 0) return usageError('replay', `--top: not a count: "${values.top}"`);
  let format: LogFormat;
  try {
    format = formatNamed(values.format ?? 'nginx');
  } catch (err) {
    return usageError('replay', `--format: ${(err as Error).message}`);
  }
  const assume = new Set<Assumption>();
  for (const item of (values.assume as string[] | undefined) ?? []) {
    for (const name of item.split(',')) {
      if (!isAssumption(name))
        return usageError(
          'replay',
          `--assume: unknown assumption "${name}" (known: ${Object.keys(ASSUMPTIONS).join(', ')})`,
        );
      assume.add(name);
    }
  }
  try {
    const snapshot = await loadConfigFile(configPath(values));
    const progress = process.stderr.isTTY ? process.stderr : null;
    const report = await runReplay({ snapshot, format, sources: positionals, progress, top, assume });
    console.log(values.json === true ? JSON.stringify(report, null, 2) : formatReport(report));
    if (values.html !== undefined) {
      const { reportPage } = await import('../replay/html.js');
      await writeFile(values.html, reportPage(report));
      console.error(`rategate replay: wrote ${values.html}`);
    }
    return EXIT.OK;
  } catch (err) {
    if (err instanceof ConfigError) return reportConfigError(err);
    if (err instanceof Error && !(err instanceof TypeError) && !(err instanceof RangeError)) {
      console.error(`rategate replay: ${err.message}`);
      // A log it cannot open (ENOENT, EACCES, EISDIR) is its input missing; anything else, what it read.
      return typeof (err as NodeJS.ErrnoException).code === 'string' ? EXIT.NO_INPUT : EXIT.DATA;
    }
    throw err;
  }
}
