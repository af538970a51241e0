/**
 * @module `rategate replay`'s speed: lines per second on one core for the seed table (config/limits.yaml)
 * over a generated day of nginx log (scripts/gen-access-log.ts: ordinary traffic, a flood, a sign-up
 * wave). Lines per CPU second too: a loaded machine stretches the wall clock. The log is generated once into the OS temp folder and reused; generation is not timed.
 * A second row replays Mastodon's whole table (config/examples/mastodon.yaml) under `--assume anonymous`,
 * where the IP-keyed /api rule is driven for most lines (issue 40: at least 100,000 lines per CPU second).
 *
 *   npx tsx bench/replay.ts [--lines 1200000] [--log FILE]      (or: npm run bench -- --replay)
 */
import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadConfigFile } from '../src/config/load.js';
import { formatNamed } from '../src/replay/formats.js';
import type { Assumption } from '../src/replay/decidable.js';
import { runReplay } from '../src/replay/run.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Replays the log (generating it first when missing) and prints lines/s; returns it. */
export async function benchReplay(lines = 1_200_000, log?: string): Promise<number> {
  const file = log ?? path.join(os.tmpdir(), `rategate-replay-bench-${lines}.log`);
  if (!existsSync(file)) {
    console.log(`generating ${lines.toLocaleString('en-US')} lines into ${file} …`);
    execFileSync(
      process.execPath,
      ['--import', 'tsx', path.join(ROOT, 'scripts/gen-access-log.ts'), '--lines', String(lines), '--out', file],
      {
        stdio: 'inherit',
      },
    );
  }
  const seed = await replayRow(file, 'config/limits.yaml', new Set());
  await replayRow(file, 'config/examples/mastodon.yaml', new Set(['anonymous']));
  return seed;
}

/** One table over the log: lines per second (wall) and per CPU second, printed; returns the wall rate. */
async function replayRow(file: string, table: string, assume: ReadonlySet<Assumption>): Promise<number> {
  const snapshot = await loadConfigFile(path.join(ROOT, table));
  const started = performance.now();
  const cpu = process.cpuUsage();
  const report = await runReplay({ snapshot, format: formatNamed('nginx'), sources: [file], assume });
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  const cpuSeconds = (used.user + used.system) / 1e6;
  const rate = Math.round(report.lines / seconds);
  const mb = statSync(file).size / 1e6;
  const assumed = assume.size === 0 ? '' : ` --assume ${[...assume].join(',')}`;
  console.log(
    `replay ${table}${assumed}: ${report.lines.toLocaleString('en-US')} lines (${mb.toFixed(0)} MB) in ${seconds.toFixed(2)} s: ${rate.toLocaleString('en-US')} lines/s`,
  );
  // On a shared machine the wall clock counts other processes' time: lines per CPU second is this one's.
  console.log(
    `  ${cpuSeconds.toFixed(2)} s of CPU: ${Math.round(report.lines / cpuSeconds).toLocaleString('en-US')} lines per CPU second (load average ${os.loadavg()[0]!.toFixed(1)})`,
  );
  for (const r of report.rules)
    if (r.notDecidable === undefined)
      console.log(`  ${r.name}: counted ${r.counted}, would have limited ${r.limited} (${r.distinctKeysLimited} keys)`);
  return rate;
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { lines: { type: 'string' }, log: { type: 'string' } } });
  await benchReplay(Number(values.lines ?? 1_200_000), values.log);
}
