/**
 * `rategate replay`'s progress on a terminal, through a real pseudo-terminal (util-linux `script`): lines
 * read, lines per second and the log time reached, on stderr, while the log is read; cleared at the end;
 * never in the report on stdout, and absent when stderr is not a terminal. The log comes through a FIFO
 * the test writes in two parts, the second after the progress interval, so the progress has a batch to
 * show whatever the machine's load (the waits are lower bounds, not bounds on speed).
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { pause } from '../support/eventually.js';
import { builtCli } from '../support/process.js';
import { scaledMs } from '../support/speed.js';

const SCRIPT = '/usr/bin/script';

function skipNoScript(): boolean {
  if (existsSync(SCRIPT)) return false;
  const reason = `no ${SCRIPT} (util-linux's script, Debian's bsdutils)`;
  if (process.env.CI === 'true') throw new Error(`the progress test needs a pseudo-terminal, and CI=true: ${reason}`);
  console.warn(`\n*** SKIPPING the replay progress test: ${reason} ***\n`);
  return true;
}

/** One progress update: `\r`, erase to the end of the line (ESC [K), then the figures. */
const PROGRESS = new RegExp(
  `\r${String.fromCharCode(27)}\\[K([\\d,]+) lines {2}([\\d,]+) lines/s {2}log time (\\S+ \\S+)`,
  'g',
);

const sh = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const pad = (n: number) => String(n).padStart(2, '0');

/** `n` nginx lines, one a second from `from` (epoch ms, UTC). */
function lines(n: number, from: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const d = new Date(from + i * 1000);
    const t = `${pad(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} +0000`;
    out.push(`10.1.${i % 250}.${i % 7} - - [${t}] "GET /api/v1/timelines/home HTTP/1.1" 200 5 "-" "ua"`);
  }
  return out.join('\n') + '\n';
}

/**
 * Runs `rategate replay FIFO` under a pseudo-terminal with `redirects` (shell syntax) and feeds the FIFO
 * in two parts: the second once the command has read the first and the progress interval has passed.
 * Resolves with what the terminal showed, once the command has exited.
 */
async function replayOnTerminal(dir: string, redirects: string): Promise<{ code: number | null; terminal: string }> {
  const fifo = path.join(dir, 'log.fifo');
  execFileSync('mkfifo', [fifo]);
  const cmd = `cd ${sh(process.cwd())} && ${sh(process.execPath)} ${sh(builtCli())} replay ${sh(fifo)} ${redirects}`;
  const child = spawn(SCRIPT, ['-qfec', cmd, '/dev/null'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TERM: 'xterm' },
  });
  let terminal = '';
  child.stdout.on('data', (d) => (terminal += d));
  child.stderr.on('data', (d) => (terminal += d));
  const exited = new Promise<number | null>((r) => child.once('exit', r));
  // Opening a FIFO for writing waits for its reader: the replay has started when this resolves.
  const w = await open(fifo, 'w');
  await w.write(lines(3000, Date.UTC(2026, 10, 21, 14, 0, 0)));
  // Time is the subject: more than the progress interval (250 ms) passes on the command's clock between
  // two parts, so the second part's first batch is shown. (The writer's close then ends the input.)
  await pause(600);
  await w.write(lines(3000, Date.UTC(2026, 10, 21, 15, 30, 0)));
  await w.close();
  return { code: await exited, terminal };
}

describe.skipIf(skipNoScript())('rategate replay on a terminal', () => {
  it(
    'shows lines, lines per second and the log time reached on the terminal, and keeps stdout clean',
    async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'replay-tty-'));
      const report = path.join(dir, 'report.txt');
      const { code, terminal } = await replayOnTerminal(dir, `> ${sh(report)}`);
      expect(code, terminal).toBe(0);
      const shown = [...terminal.matchAll(PROGRESS)];
      expect(shown.length, JSON.stringify(terminal)).toBeGreaterThan(0);
      // The last one shown was read from the second part (a pipe reads it in chunks: not necessarily all of it),
      // and names the time of the last line read: the second part's first line at 15:30:00, one a second.
      const last = shown.at(-1)!;
      const read = Number(last[1]!.replace(/,/g, ''));
      expect(read).toBeGreaterThan(3000);
      expect(read).toBeLessThanOrEqual(6000);
      expect(Number(last[2]!.replace(/,/g, ''))).toBeGreaterThan(0);
      const reached = new Date(Date.UTC(2026, 10, 21, 15, 30, 0) + (read - 3001) * 1000)
        .toISOString()
        .slice(0, 19)
        .replace('T', ' ');
      expect(last[3]).toBe(reached);
      // Cleared at the end: the terminal's last line is not left holding the progress.
      expect(terminal.slice(terminal.lastIndexOf('lines/s'))).toContain('\r\x1b[K');
      const text = readFileSync(report, 'utf8');
      expect(text).toMatch(/^Replayed 6,000 requests \(6,000 lines, nginx\)/);
      expect(text).not.toContain('lines/s');
      expect(text).not.toContain('\x1b');
    },
    scaledMs(60_000),
  );

  it(
    'shows no progress when stderr is not a terminal (a pipe or a file)',
    async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'replay-tty-'));
      const err = path.join(dir, 'stderr.txt');
      const { code, terminal } = await replayOnTerminal(dir, `2> ${sh(err)}`);
      expect(code, terminal).toBe(0);
      expect(terminal).toContain('Replayed 6,000 requests');
      expect(terminal).not.toContain('lines/s');
      expect(terminal).not.toContain('\x1b[K');
      expect(readFileSync(err, 'utf8')).toBe('');
    },
    scaledMs(60_000),
  );
});
