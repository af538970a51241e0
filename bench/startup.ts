/**
 * Start-up time of the commands that must not start the gateway (issue 29): `rategate --version` and
 * `rategate check` (the default table and the Mastodon one) against `node -e 0`, the floor any Node
 * program pays. Each command runs N times, interleaved round by round so the load of other processes
 * falls on all of them alike; the figure is the median wall-clock per command and its ratio to the floor.
 *
 *   npx tsx bench/startup.ts [--runs 20] [--cli dist/cli/index.js] [--node /path/to/node]
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '20' },
    cli: { type: 'string', default: 'dist/cli/index.js' },
    node: { type: 'string', default: process.execPath },
  },
});
const runs = Number(values.runs);
const cli = values.cli;
if (!existsSync(cli)) throw new Error(`${cli} not found: run \`npm run build\` first`);

const commands: { label: string; args: string[] }[] = [
  { label: 'node -e 0', args: ['-e', '0'] },
  { label: 'rategate --version', args: [cli, '--version'] },
  { label: 'rategate check', args: [cli, 'check'] },
  { label: 'rategate check config/examples/mastodon.yaml', args: [cli, 'check', 'config/examples/mastodon.yaml'] },
];

/** CPU ms (user + system) of this process's reaped children, from /proc (clock ticks of 10 ms): summed over runs, it is exact enough. */
function childrenCpuMs(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[13]) + Number(fields[14])) * 10; // cutime, cstime (fields 16, 17 of proc(5))
}

function once(args: string[], cpu?: number[]): number {
  const cpuBefore = childrenCpuMs();
  const start = performance.now();
  const r = spawnSync(values.node, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const ms = performance.now() - start;
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr.toString()}`);
  cpu?.push(childrenCpuMs() - cpuBefore);
  return ms;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

// One warm-up round: the files are in the page cache for every measured run.
for (const c of commands) once(c.args);
const samples = commands.map(() => [] as number[]);
const cpu = commands.map(() => [] as number[]);
for (let i = 0; i < runs; i++) commands.forEach((c, j) => samples[j]!.push(once(c.args, cpu[j])));

const floor = median(samples[0]!);
const version = spawnSync(values.node, ['--version']).stdout.toString().trim();
const cpuOf = (j: number) => cpu[j]!.reduce((a, b) => a + b, 0) / runs;
console.log(
  `Node ${version}, ${runs} runs each, interleaved; wall-clock median (min–max), and mean CPU (user + system) per run`,
);
for (const [j, c] of commands.entries()) {
  const xs = samples[j]!;
  const m = median(xs);
  const range = `${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}`;
  const ratios = `${(m / floor).toFixed(2)}× (CPU ${(cpuOf(j) / cpuOf(0)).toFixed(2)}×) node -e 0`;
  console.log(
    `${c.label.padEnd(46)} ${m.toFixed(0).padStart(4)} ms (${range.padStart(9)})  CPU ${cpuOf(j).toFixed(0).padStart(4)} ms  ${ratios}`,
  );
}
