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
}

export interface InstructionsResult {
  tool: 'perf' | 'callgrind';
  requests: number;
  perRequest: number;
  /**
   * Callgrind only: the main thread's (the event loop's) share. V8 compiles and marks on other threads,
   * still busy after thousands of requests under valgrind; the main thread's count is the steadier one.
   */
  mainThreadPerRequest?: number | null;
}
