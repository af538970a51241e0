/** @module The commands that read a limit table offline, without starting anything: `check` and `explain`. */
import { ConfigError } from '../config/errors.js';
import { formatRulesTable, formatSummary } from '../config/describe.js';
import { loadConfigFile } from '../config/load.js';
import { CONFIG_FLAG, configPath, overridesFrom, parseCommand, reportConfigError } from './options.js';
import { USAGE } from './usage.js';

export async function check(args: string[]): Promise<number> {
  // `rategate check FILE` reads as naturally as `--config FILE`; one file either way.
  const { values, positionals } = parseCommand(args, CONFIG_FLAG);
  if (values.help) return (console.log(USAGE), 0);
  if (positionals.length > 1 || (positionals.length === 1 && values.config !== undefined)) {
    console.error(`rategate: check takes one config file (got ${[values.config, ...positionals].filter(Boolean).join(', ')})\n\n${USAGE}`);
    return 1;
  }
  const file = positionals[0] ?? configPath(values);
  try {
    // Exactly what serve would load: the same file with the same RATEGATE_* overrides.
    const snapshot = await loadConfigFile(file, overridesFrom(values));
    console.log(formatRulesTable(snapshot));
    console.log(formatSummary(snapshot));
    return 0;
  } catch (err) {
    return reportConfigError(err);
  }
}

/** Which rules a request would be counted by, and why the others would not count it. */
export async function explainCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    ...CONFIG_FLAG,
    header: { type: 'string', short: 'H', multiple: true },
    ip: { type: 'string' },
    body: { type: 'string' },
    account: { type: 'string' },
    'account-age': { type: 'string' },
    bot: { type: 'boolean' },
    locked: { type: 'boolean' },
    surge: { type: 'string' },
  });
  if (values.help) return (console.log(USAGE), 0);
  if (positionals.length !== 1) {
    console.error(`rategate explain: expected one request, e.g. "POST /auth/password?x=1"\n\n${USAGE}`);
    return 1;
  }
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
    if (err instanceof Error) {
      console.error(`rategate explain: ${err.message}`);
      return 1;
    }
    throw err;
  }
}
