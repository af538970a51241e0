/** @module `rategate explain`: which rules a request would be counted by, read offline from a limit table (`check` has its own module, check.ts). */
import { ConfigError } from '../config/errors.js';
import { loadConfigFile } from '../config/load.js';
import { COMMANDS } from './commands.js';
import { EXIT } from './exit.js';
import { configPath, parseCommand, printHelp, reportConfigError, usageError } from './options.js';

/** Which rules a request would be counted by, and why the others would not count it. */
export async function explainCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseCommand(args, COMMANDS.explain.flags);
  if (values.help) return printHelp('explain');
  if (positionals.length !== 1) return usageError('explain', 'expected one request, e.g. "POST /auth/password?x=1"');
  const { explain } = await import('./explain.js');
  try {
    const snapshot = await loadConfigFile(configPath(values));
    const lines = await explain(snapshot, {
      request: positionals[0]!,
      headers: values.header ?? [],
      ip: values.ip ?? '192.0.2.1',
      body: values.body,
      account: values.account,
      accountAge: values['account-age'],
      bot: values.bot,
      locked: values.locked,
      surge: values.surge,
    });
    console.log(lines.join('\n'));
    return 0;
  } catch (err) {
    if (err instanceof ConfigError) return reportConfigError(err);
    // explain throws only to say what in the described request it cannot read.
    if (err instanceof Error && !(err instanceof TypeError) && !(err instanceof RangeError)) {
      console.error(`rategate explain: ${err.message}`);
      return EXIT.USAGE;
    }
    throw err;
  }
}
