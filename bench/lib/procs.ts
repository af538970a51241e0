/** @module Child processes for the bench: servers on free ports, load-generator children, cleanup. */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';

export interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** The last few KB of stdout + stderr, for error messages. */
  output(): string;
  /** Resolves with the exit code (or signal) when the process has ended. */
  readonly exited: Promise<number | string>;
  /** SIGTERM (or `signal`), then SIGKILL after `graceMs`; resolves when it is gone. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
}

const running = new Set<Proc>();

/** Kills every process still running (on exit, error or Ctrl-C): only the ones this bench started. */
export function killAll(): void {
  for (const p of running) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  running.clear();
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** `stdoutFile`: stdout goes to that file instead of a pipe to the bench (an access log's lines). */
export function start(
  name: string,
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
  stdoutFile?: string,
): Proc {
  const fd = stdoutFile === undefined ? undefined : openSync(stdoutFile, 'w');
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', fd ?? 'pipe', 'pipe'] });
  if (fd !== undefined) closeSync(fd);
  if (child.pid === undefined) throw new Error(`${name}: could not start ${cmd}`);
  let out = '';
  const keep = (d: Buffer): void => {
    out = (out + d.toString()).slice(-8192);
  };
  child.stdout?.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, sig) => resolve(code ?? sig ?? -1)),
  );
  const proc: Proc = {
    name,
    child,
    pid: child.pid,
    output: () => out,
    exited,
    async stop(signal = 'SIGTERM', graceMs = 10_000) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
        const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(t);
      }
      running.delete(proc);
    },
  };
  running.add(proc);
  void exited.then(() => running.delete(proc));
  return proc;
}

/** Waits until `port` accepts connections; fails early with the process's output if it exits first. */
export async function waitForPort(proc: Proc, port: number, timeoutMs = 30_000): Promise<void> {
  let dead: number | string | undefined;
  void proc.exited.then((c) => (dead = c));
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (dead !== undefined)
      throw new Error(`${proc.name} exited (${dead}) before listening: ${proc.output().trim().slice(-600)}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port });
      // A connect to a free port in the ephemeral range can succeed by connecting to itself (TCP
      // simultaneous open); that is not the server listening.
      s.once('connect', () => {
        const self = s.localPort === port;
        s.destroy();
        resolve(!self);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until)
      throw new Error(`${proc.name} did not listen on ${port} within ${timeoutMs} ms: ${proc.output().slice(-600)}`);
    await sleep(50);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Resident set size of a process, in bytes (Linux). */
export function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

/**
 * Runs a bench script (`node --import tsx SCRIPT '<json>'`) as a separate process and parses the JSON
 * line it prints. `onStderrLine` sees its stderr lines (load.ts says MEASURE when its measured phase starts).
 */
export async function runScript<T>(
  script: string,
  spec: unknown,
  timeoutMs: number,
  onStderrLine?: (line: string) => void,
): Promise<T> {
  const proc = start(script, process.execPath, ['--import', 'tsx', script, JSON.stringify(spec)]);
  let stdout = '';
  proc.child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  let errBuf = '';
  proc.child.stderr!.on('data', (d: Buffer) => {
    errBuf += d.toString();
    let i: number;
    while ((i = errBuf.indexOf('\n')) >= 0) {
      const line = errBuf.slice(0, i);
      errBuf = errBuf.slice(i + 1);
      if (line.startsWith('  …')) process.stdout.write(`${line}\n`);
      onStderrLine?.(line);
    }
  });
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), timeoutMs);
  const code = await proc.exited;
  clearTimeout(timer);
  const last = stdout.trim().split('\n').pop() ?? '';
  let parsed: unknown;
  try {
    parsed = JSON.parse(last);
  } catch {
    throw new Error(`${script} (exit ${code}) printed no result: ${proc.output().slice(-600)}`);
  }
  if ((parsed as { error?: string }).error !== undefined)
    throw new Error(`${script}: ${(parsed as { error: string }).error}`);
  return parsed as T;
}

const CLOCK_TICKS_PER_SEC = 100; // USER_HZ: 100 on Linux for every architecture Node runs on

/**
 * CPU time (user + system, in ms; or only `user`) used so far by `pid` and its descendants (nginx's
 * workers; node's cluster workers), from /proc; NaN where /proc is not available. Resolution 10 ms.
 */
export function cpuMsOfTree(pid: number, which: 'all' | 'user' = 'all'): number {
  if (!existsSync('/proc/self/stat')) return NaN;
  let ticks = 0;
  for (const p of pidsOfTree(pid)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${p}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(f[11]) + (which === 'all' ? Number(f[12]) : 0);
  }
  return (ticks * 1000) / CLOCK_TICKS_PER_SEC;
}

/** CPU ms so far of each thread of `pid`, summed by thread name (`main`, then the helpers by name: V8's workers, libuv's pool): where a process's CPU goes. */
export function cpuMsByThread(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      // Node's helper threads are mostly named like the process: the main thread is told by its id.
      const name = tid === String(pid) ? 'main' : stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = ((Number(f[11]) + Number(f[12])) * 1000) / CLOCK_TICKS_PER_SEC;
      out.set(name, (out.get(name) ?? 0) + ms);
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** `pid` and its descendants, from /proc (empty where /proc is not available). */
export function pidsOfTree(pid: number): number[] {
  const out: number[] = [];
  const visit = (p: number): void => {
    out.push(p);
    let children = '';
    try {
      for (const tid of readdirSync(`/proc/${p}/task`))
        children += `${readFileSync(`/proc/${p}/task/${tid}/children`, 'utf8')} `;
    } catch {
      /* gone meanwhile, or no children file (older kernels) */
    }
    for (const c of children.split(' ')) if (c !== '') visit(Number(c));
  };
  if (existsSync(`/proc/${pid}`)) visit(pid);
  return out;
}
