/** @module Starts a real gateway on loopback for a test, from YAML text, on free ports. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino, type Logger } from 'pino';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/app/start.js';
import { startRecordingUpstream, type RecordingUpstream } from './recording-upstream.js';
import { eventually } from './eventually.js';

export interface TestGateway extends RunningGateway {
  configPath: string;
}

/**
 * `yaml` is the limit table and any other sections; listen and admin addresses are forced to free
 * loopback ports, and `upstream` to the given URL.
 */
export async function startTestGateway(yaml: string, opts: { upstream: string; now?: () => number; store?: string; logger?: Logger }): Promise<TestGateway> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-gw-'));
  const configPath = path.join(dir, 'limits.yaml');
  writeFileSync(configPath, yaml);
  const gw = await startGateway({
    configPath,
    // The gateway sets its logger's level from the config: silent keeps test output readable, unless a
    // test brings a logger to read (then the file's log.level applies, info by default).
    overrides: {
      listen: '127.0.0.1:0',
      adminListen: '127.0.0.1:0',
      upstream: opts.upstream,
      ...(opts.logger ? {} : { logLevel: 'silent' }),
      ...(opts.store ? { store: opts.store } : {}),
    },
    logger: opts.logger ?? pino({ level: 'silent' }),
    defaultMetrics: false,
    ...(opts.now ? { now: opts.now } : {}),
  });
  return Object.assign(gw, { configPath });
}

/** A pino logger that keeps every line it writes, JSON-parsed, for tests that read the log. */
export function capturingLogger(level = 'info'): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = pino({ level }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { logger, lines };
}

export type LogLine = { level: number; msg: string } & Record<string, unknown>;

/** The access-log line of request `id` (written once the answer is sent, so polled for), newest lines first. */
export async function accessLine(lines: readonly LogLine[], id: string, withinMs = 5_000): Promise<LogLine> {
  const find = (): LogLine | undefined => {
    for (let i = lines.length - 1; i >= 0; i--) if (lines[i]!.msg === 'request' && lines[i]!.id === id) return lines[i];
    return undefined;
  };
  return (await eventually(find, { what: `the access-log line of ${id}`, withinMs, everyMs: 2, until: (l) => l !== undefined }))!;
}

export { SEED_TABLE } from './seed-table.js';

/** What `gatewayFixture` shares with a file's tests: one recording upstream, and the gateway of the test running. */
export interface GatewayFixture<G extends { shutdown(graceMs?: number): Promise<void> } = TestGateway> {
  /** Started once for the file; its record is emptied after each test. */
  readonly upstream: RecordingUpstream;
  /** The test's gateway: shut down (and unset) after each test. */
  gw: G | undefined;
}

/**
 * The "recording upstream + a gateway per test" setup in one place: registers the file's hooks (start
 * the upstream before all tests, close it after; shut the test's gateway down after each test with
 * `graceMs`, then empty the upstream's record). Call it at the top of a test file.
 */
export function gatewayFixture<G extends { shutdown(graceMs?: number): Promise<void> } = TestGateway>(opts: { graceMs?: number } = {}): GatewayFixture<G> {
  let upstream: RecordingUpstream | undefined;
  const fx: GatewayFixture<G> = {
    get upstream(): RecordingUpstream {
      if (upstream === undefined) throw new Error('the recording upstream starts in beforeAll: use it inside a test or hook');
      return upstream;
    },
    gw: undefined,
  };
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
  });
  afterAll(async () => upstream?.close());
  afterEach(async () => {
    await fx.gw?.shutdown(opts.graceMs ?? 500);
    fx.gw = undefined;
    if (upstream !== undefined) upstream.seen.length = 0;
  });
  return fx;
}
