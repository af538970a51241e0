/**
 * Issue 40, builds: every command answers `--help` with its own usage (not the global one), and the
 * command line exits with sysexits codes (src/cli/exit.ts): 64 for a usage error, 78 for a bad table, 69
 * for a port or an admin API it cannot have, 0 for a help asked for.
 */
import { execFile } from 'node:child_process';
import net from 'node:net';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { COMMANDS, flagLabel, type CommandName } from '../../src/cli/commands.js';
import { EXIT, EXIT_CODES } from '../../src/cli/exit.js';
import { USAGE, commandUsage } from '../../src/cli/usage.js';
import { runCli } from '../support/process.js';
import { scaledMs } from '../support/speed.js';

const NAMES = Object.keys(COMMANDS).filter((n) => n !== 'version') as CommandName[];

describe('rategate COMMAND --help', () => {
  it("prints that command's synopsis and every flag it parses, with what each means", () => {
    for (const name of NAMES) {
      const text = commandUsage(name);
      expect(text, name).toContain(`rategate ${name} ${COMMANDS[name].synopsis[0]}`);
      for (const [flag, spec] of Object.entries(COMMANDS[name].flags))
        expect(text, `${name} --${flag}`).toContain(`${flagLabel(flag, spec)}  `);
      expect(text, name).not.toBe(USAGE);
    }
  });

  it('names every flag a command parses in its synopsis, so the README table shows it', () => {
    const missing: string[] = [];
    for (const name of NAMES) {
      const synopsis = COMMANDS[name].synopsis.join(' ');
      for (const [flag, spec] of Object.entries(COMMANDS[name].flags)) {
        const named = synopsis.includes(`--${flag}`) || ('short' in spec && synopsis.includes(`-${spec.short} `));
        if (!named) missing.push(`${name} --${flag}`);
      }
    }
    expect(missing).toEqual([]);
  });

  // One process per command, each through tsx: a few seconds apiece on a loaded machine.
  it(
    'is what each command prints, on stdout, exiting 0; `help COMMAND` says the same',
    async () => {
      const runs = await Promise.all(NAMES.map((name) => runCli([name, '--help'])));
      runs.forEach((r, i) => {
        expect(r.code, NAMES[i]).toBe(0);
        expect(r.stdout.trimEnd(), NAMES[i]).toBe(commandUsage(NAMES[i]!));
      });
      const viaHelp = await runCli(['help', 'explain']);
      expect(viaHelp.stdout.trimEnd()).toBe(commandUsage('explain'));
      expect(commandUsage('explain')).toMatch(/--account-age 3d[\s\S]*--bot[\s\S]*--locked[\s\S]*--surge NAME/);
    },
    scaledMs(120_000),
  );
});

describe('exit codes', () => {
  const servers: net.Server[] = [];
  afterAll(() => servers.forEach((s) => s.close()));

  it('are the sysexits numbers', () => {
    expect(EXIT).toMatchObject({
      USAGE: 64,
      DATA: 65,
      NO_INPUT: 66,
      UNAVAILABLE: 69,
      SOFTWARE: 70,
      NO_PERMISSION: 77,
      CONFIG: 78,
    });
    expect(new Set(EXIT_CODES.map((c) => c.code))).toEqual(new Set(Object.values(EXIT)));
  });

  it(
    '64 for an unknown command, an unknown flag (with that command’s usage), a bad flag value and no command',
    async () => {
      const [unknown, flag, workers, none] = await Promise.all([
        runCli(['serv']),
        runCli(['explain', '--acount', 'x', 'GET /']),
        runCli(['serve', '--workers', 'many']),
        runCli([]),
      ]);
      expect(unknown.code).toBe(64);
      expect(unknown.stderr).toContain('unknown command "serv"');
      expect(flag.code).toBe(64);
      expect(flag.stderr).toContain("rategate explain: Unknown option '--acount'");
      expect(flag.stderr).toContain(commandUsage('explain'));
      expect(workers.code).toBe(64);
      expect(workers.stderr).toContain('--workers: expected a number');
      expect(none.code).toBe(64);
      expect(none.stderr).toContain('rategate COMMAND --help');
    },
    scaledMs(60_000),
  );

  it(
    '69 when serve cannot have its listen address, or the admin API cannot be reached',
    async () => {
      const taken = net.createServer();
      servers.push(taken);
      await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
      const port = (taken.address() as net.AddressInfo).port;
      // A port nothing listens on: bound then closed.
      const free = net.createServer();
      await new Promise<void>((resolve) => free.listen(0, '127.0.0.1', resolve));
      const nobody = (free.address() as net.AddressInfo).port;
      await new Promise<void>((resolve) => free.close(() => resolve()));
      const [serve, block] = await Promise.all([
        runCli([
          'serve',
          '--config',
          'config/limits.yaml',
          '--listen',
          `127.0.0.1:${port}`,
          '--admin-listen',
          '127.0.0.1:0',
          '--upstream',
          'http://127.0.0.1:9',
        ]),
        runCli(['block', 'list', '--admin', `http://127.0.0.1:${nobody}`]),
      ]);
      expect(serve.code, serve.stderr).toBe(69);
      // serve's start-up failure is one fatal JSON line on the log (stdout), with its place.
      const fatal = JSON.parse(serve.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
      expect(fatal).toMatchObject({ level: 'fatal', failure: 'listen', code: 'EADDRINUSE', port });
      expect(fatal.msg).toMatch(/rategate: cannot listen: .*EADDRINUSE/);
      expect(block.code, block.stderr).toBe(69);
      expect(block.stderr).toContain('cannot reach the admin API');
    },
    scaledMs(60_000),
  );

  it(
    '--version names the version and the checked-out commit, run from the sources',
    async () => {
      const [r, head] = await Promise.all([
        runCli(['--version']),
        promisify(execFile)('git', ['rev-parse', '--short=12', 'HEAD']),
      ]);
      const { version } = (await import('../../package.json', { with: { type: 'json' } })).default;
      expect(r.code).toBe(0);
      expect(r.stdout.trim()).toBe(`rategate ${version} (${head.stdout.trim()})`);
    },
    scaledMs(30_000),
  );
});
