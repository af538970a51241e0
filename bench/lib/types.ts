/**
 * @module The result shapes of the bench (written to bench/results/*.json), shared by the scenarios and the report.
 */

export interface LoadResult {
  requests: number;
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  statuses: Record<string, number>;
  errors: number;
  timeouts: number;
  /** Redis commands per request during the measured phase, including those run inside Lua scripts (Redis-backed systems). */
  redisCallsPerRequest?: number;
  /** Script calls (EVAL/EVALSHA/FCALL) per request: client round trips to Redis. */
  redisScriptCallsPerRequest?: number;
  /** CPU time per request (µs) of each process during the measured phase (forwarded scenario). */
  cpuUsPerRequest?: CpuPerRequest;
  /** The load generator's own CPU time in the measured phase (load.ts reports it). */
  loadGeneratorCpuMs?: number;
}
export interface CpuPerRequest {
  /** The system under test (null for the upstream reached directly: it is the upstream). */
  system: number | null;
  /** Of `system`: user-space and kernel (system calls: sockets) time. */
  systemUser?: number | null;
  systemKernel?: number | null;
  upstream: number;
  redis: number | null;
  loadGenerator: number;
  total: number;
}
/** Processes whose CPU time a load run accounts for. */
export interface CpuPids {
  system: number | null;
  upstream: number;
  redis: number | null;
}
export interface PacedResult {
  sent: number;
  completed: number;
  achievedRate: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  statuses: Record<string, number>;
  errors: number;
}
export interface SystemResult {
  label: string;
  skipped?: string;
  forwarded?: LoadResult;
  fixedRate?: PacedResult;
  rejected?: LoadResult;
  mixed?: LoadResult;
  mixedSkipped?: string;
  /** The many-client scenario (bench/million.ts): MANY_CLIENTS distinct clients, a few requests each. */
  manyClients?: ManyClientsResult;
  /** Scenario `flood`: a second client's latency at a fixed rate, alone and while one IP floods an exhausted bucket. */
  flood?: FloodResult;
}
export interface FloodResult {
  /** The second client (its own IP and token) at a fixed rate, open loop (bench/paced.ts), to a forwarded path. */
  rate: number;
  path: string;
  noFlood: PacedResult;
  duringFlood: PacedResult;
  /** duringFlood.p99 − noFlood.p99, ms. */
  addedP99Ms: number;
  /** The flood of the `duringFlood` round: one IP, `GET /api/v1/exhausted` (every answer a 429), bench/million.ts for the whole paced run. */
  flood: FloodRound['flood'];
  /** Every round; `noFlood` and `duringFlood` above are each from the round of lowest p99 of its phase. */
  rounds: FloodRound[];
}
export interface FloodRound {
  noFlood: PacedResult;
  duringFlood: PacedResult;
  flood: {
    connections: number;
    depth: number;
    requests: number;
    seconds: number;
    rps: number;
    statuses: Record<string, number>;
    errors: number;
    /** The system's CPU time during the flood, in cores (CPU seconds a second). */
    systemCores: number;
    /** The flood was still sending when the second client's run ended (else the figures are not "during"). */
    coveredPacedRun: boolean;
  };
}
export interface ManyClientsResult {
  clients: number;
  requests: number;
  rps: number;
  statuses: Record<string, number>;
  /** CPU µs per request of the system under test and of redis-server (null: not a Redis system). */
  cpuUsSystem: number;
  cpuUsRedis: number | null;
}

export interface MemoryResult {
  clients: number;
  path: string;
  seconds: number;
  rps: number;
  rssBeforeMB: number;
  rssAfterMB: number;
  rssPeakMB: number;
  heapUsedBeforeMB: number | null;
  heapUsedAfterMB: number | null;
  statuses: Record<string, number>;
}

export interface PerClientResult {
  clients: number;
  buckets: number;
  heapBytesPerClient: number;
  rssBytesPerClient: number;
  heapBytesPerClientAfterExpiry: number;
  /** The same through the real gateway (bench/memory-gateway.ts). */
  gateway?: GatewayMemoryResult;
}

/** bench/memory-gateway.ts: the real process, the Mastodon table, each client from its own IPv6 /64. */
export interface GatewayMemoryResult {
  clients: number;
  bucketsPerClient: number;
  startRssBytes: number;
  rssBytesPerClient: number;
  rssBytesPerBucket: number;
  heapBytesPerBucket: number;
}

/** One callgrind run of a system (a fresh process): its measured window, per forwarded request. */
export interface InstructionsRun {
  /** Requests in the measured window, and its wall time (under callgrind: ~50× native). */
  requests: number;
  seconds: number;
  /** Main thread (the event loop), idle timer work subtracted: the headline figure. */
  main: number;
  /** Of `main`: V8's garbage collector on the main thread, and its compilers (lazy, baseline, TurboFan installs, deopts). */
  gc: number;
  compile: number;
  /** Collections and incremental-marking steps entered in the window (all of them, not per request). */
  gcEntries: number;
  /** Subtracted from `main`: the main thread's instructions per second when idle × the window's seconds, per request. */
  timers: number;
  /** The main thread's instructions per second with no request (its timers): the idle cost. */
  idlePerSecond: number;
  /** Every thread of the process (V8's compiler and GC helpers too), nothing subtracted. */
  allThreads: number;
  /**
   * Of `allThreads`: TurboFan's jobs on the worker threads. Near 0 when the tiers have settled before the
   * window; a large figure means the window measured code still being optimized.
   */
  optimizing?: number;
  /** Answers other than 200 in the window (at most 1 %), when any. */
  non200?: number;
  /** Redis-backed systems: script calls (round trips) per request in the window. */
  redisScriptCalls?: number;
}

export interface InstructionsResult {
  tool: 'callgrind';
  warmup: number;
  /** Uninstrumented requests after the idle window, before the count (older results: 200, instrumented). */
  rewarm?: number;
  runs: InstructionsRun[];
  /** Medians over the runs, and the spread (max − min) ÷ median of `main`. */
  main: number;
  steady: number;
  spread: number;
}
