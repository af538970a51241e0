/**
 * @module The command line's usage texts, written from the command list (commands.ts): the whole usage
 * (`rategate --help`, an unknown command) and each command's own (`rategate COMMAND --help`, its usage errors).
 */
import { COMMANDS, flagLabel, type CommandName, type CommandSpec } from './commands.js';

const ENVIRONMENT = `Environment (flags win): RATEGATE_CONFIG, RATEGATE_LISTEN, RATEGATE_ADMIN_LISTEN, RATEGATE_UPSTREAM, RATEGATE_STORE,
RATEGATE_LOG_LEVEL (wins over the file's log.level); check applies them as serve does.
RATEGATE_ADMIN_TOKEN (the admin API's bearer token); RATEGATE_STORE_SENTINEL_PASSWORD (the sentinels' own password);
RATEGATE_ADMIN_URL (block, exempt, bans, limited: default http://127.0.0.1:9464);
RATEGATE_MEMORY_LIMIT (serve: bytes the process may use, else the cgroup's limit; the default store.maxKeys fits in 90 % of it).
Default config: config/limits.yaml.`;

/** `rategate NAME` and its synopsis, the following lines indented under the first. */
function synopsisLines(c: CommandSpec, width: number): string[] {
  const head = `  rategate ${c.name.padEnd(width)}`;
  return c.synopsis.map((line, i) => `${i === 0 ? head : ' '.repeat(head.length)} ${line}`.trimEnd());
}

/** `text` in lines of at most `width` columns, broken between words. */
function wrap(text: string, width = 100): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  return [...lines, line];
}

const WIDTH = Math.max(...Object.values(COMMANDS).map((c) => c.name.length));

export const USAGE = `Usage:
${Object.values(COMMANDS)
  .flatMap((c) => synopsisLines(c, WIDTH))
  .join('\n')}
  rategate COMMAND --help   (that command's own usage and flags)

${ENVIRONMENT}`;

/** One command's usage: its synopsis, what it does, each flag with what it means. */
export function commandUsage(name: CommandName): string {
  const c: CommandSpec = COMMANDS[name];
  const flags = Object.entries(c.flags).map(([n, f]) => [flagLabel(n, f), f.help] as const);
  flags.push(['-h, --help', 'this text']);
  const width = Math.max(...flags.map(([label]) => label.length));
  return [
    'Usage:',
    ...synopsisLines(c, 0),
    '',
    ...wrap(c.what.replace(/`/g, '')),
    '',
    'Flags:',
    ...flags.map(([label, help]) => `  ${label.padEnd(width)}  ${help}`),
    ...(c.notes === undefined ? [] : ['', ...c.notes]),
  ].join('\n');
}
