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
import { formatReport } from '../replay/report.js';
import { runReplay } from '../replay/run.js';
import { CONFIG_FLAG, configPath, parseCommand, reportConfigError } from './options.js';
import { USAGE } from './usage.js';

export async function replayCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    ...CONFIG_FLAG,
    format: { type: 'string', short: 'f' },
    html: { type: 'string' },
    json: { type: 'boolean' },
    top: { type: 'string' },
    assume: { type: 'string', multiple: true },
  });
  if (values.help) return (console.log(USAGE), 0);
  if (positionals.length === 0) {
    console.error(`rategate replay: name at least one log (or - for standard input)\n\n${USAGE}`);
    return 1;
  }
  const top = values.top === undefined ? 10 : Number(values.top);
  if (!Number.isInteger(top) || top < 0) return fail(`--top: not a count: "${values.top}"`);
  const assume = new Set<Assumption>();
  for (const item of (values.assume as string[] | undefined) ?? []) {
    for (const name of item.split(',')) {
      if (!isAssumption(name)) return fail(`--assume: unknown assumption "${name}" (known: ${Object.keys(ASSUMPTIONS).join(', ')})`);
      assume.add(name);
    }
  }
  try {
    const format = formatNamed(values.format ?? 'nginx');
    const snapshot = await loadConfigFile(configPath(values));
    const progress = process.stderr.isTTY ? process.stderr : null;
    const report = await runReplay({ snapshot, format, sources: positionals, progress, top, assume });
    console.log(values.json === true ? JSON.stringify(report, null, 2) : formatReport(report));
    if (values.html !== undefined) {
      const { reportPage } = await import('../replay/html.js');
      await writeFile(values.html, reportPage(report));
      console.error(`rategate replay: wrote ${values.html}`);
    }
    return 0;
  } catch (err) {
    if (err instanceof ConfigError) return reportConfigError(err);
    if (err instanceof Error && !(err instanceof TypeError) && !(err instanceof RangeError)) return fail(err.message);
    throw err;
  }
}

function fail(message: string): number {
  console.error(`rategate replay: ${message}`);
  return 1;
}
