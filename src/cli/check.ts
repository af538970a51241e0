/**
 * @module `rategate check`: reads a limit table as serve would, and prints its rules or every error with its
 * place. A module of its own, importing only the config code: the build bundles it into one file
 * with its code cache (scripts/bundle-cli.ts, run by src/cli/bundled.ts), so a check (a deploy hook, an
 * editor's save) starts in about twice `node -e 0`.
 */
import { formatRulesTable, formatSummary } from '../config/describe.js';
import { formatSuffixWarnings } from '../config/format-warnings.js';
import { loadConfigFile } from '../config/load.js';
import { COMMANDS } from './commands.js';
import { configPath, overridesFrom, parseCommand, printHelp, reportConfigError, usageError } from './options.js';

export async function check(args: string[]): Promise<number> {
  // `rategate check FILE` reads as naturally as `--config FILE`; one file either way.
  const { values, positionals } = parseCommand(args, COMMANDS.check.flags);
  if (values.help) return printHelp('check');
  if (positionals.length > 1 || (positionals.length === 1 && values.config !== undefined)) {
    return usageError(
      'check',
      `takes one config file (got ${[values.config, ...positionals].filter(Boolean).join(', ')})`,
    );
  }
  const file = positionals[0] ?? configPath(values);
  try {
    // Exactly what serve would load: the same file with the same RATEGATE_* overrides.
    const snapshot = await loadConfigFile(file, overridesFrom(values));
    console.log(formatRulesTable(snapshot));
    console.log(formatSummary(snapshot));
    // On stderr, and still exit 0: the table is valid; a deploy hook keeps passing, a person sees them.
    for (const warning of formatSuffixWarnings(snapshot)) console.error(`warning: ${warning}`);
    return 0;
  } catch (err) {
    return reportConfigError(err);
  }
}
