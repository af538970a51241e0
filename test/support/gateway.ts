/** @module Starts a real gateway on loopback for a test, from YAML text, on free ports. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino, type Logger } from 'pino';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/app/start.js';
import { loggerOptions } from '../../src/observability/log.js';
import { startRecordingUpstream, type RecordingUpstream } from './recording-upstream.js';
import { eventually } from './eventually.js';
import { blockFixture, startedLater } from './fixture.js';

export interface TestGateway extends RunningGateway {
  configPath: string;
}

/**
 * `yaml` is the limit table and any other sections; listen and admin addresses are forced to free
 * loopback ports, and `upstream` to the given URL.
 */
export async function startTestGateway(
  yaml: string,
  opts: { upstream: string; now?: () => number; store?: string; logger?: Logger },
): Promise<TestGateway> {
  const configPath = limitsFile(yaml);
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

/** Writes `yaml` as limits.yaml in a fresh temporary folder, for a gateway or command to read; returns its path. */
export function limitsFile(yaml: string): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-')), 'limits.yaml');
  writeFileSync(file, yaml);
  return file;
}

/** The block's recording upstream (call it inside a `describe`, or at a file's top level): started before its tests, closed after. */
export function upstreamFixture(): RecordingUpstream {
  return blockFixture(startRecordingUpstream, (u) => u.close(), 'recording upstream');
}

/**
 * One gateway for all of a block's tests, from `yaml`, in front of its own recording upstream: both
 * started before the tests (the upstream first), the gateway shut down after them with `graceMs`, then the upstream.
 */
export function sharedGatewayFixture(
  yaml: string,
  opts: { graceMs?: number } = {},
): { upstream: RecordingUpstream; gw: TestGateway } {
  const both = blockFixture(
    async () => {
      const upstream = await startRecordingUpstream();
      return { upstream, gw: await startTestGateway(yaml, { upstream: upstream.url }) };
    },
    async ({ upstream, gw }) => {
      await gw.shutdown(opts.graceMs ?? 500);
      await upstream.close();
    },
    'shared gateway',
  );
  return {
    upstream: startedLater(() => both.upstream, 'recording upstream'),
    gw: startedLater(() => both.gw, 'gateway'),
  };
}

/** A pino logger that keeps every line it writes, JSON-parsed, for tests that read the log. */
export function capturingLogger(level = 'info'): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  // The gateway's own line format (string levels, ISO times), so tests read what operators read.
  const logger = pino(loggerOptions(level), { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { logger, lines };
}

export type LogLine = { level: string; time: string; msg: string } & Record<string, unknown>;

/** The access-log line of request `id` (written once the answer is sent, so polled for), newest lines first. */
export async function accessLine(lines: readonly LogLine[], id: string, withinMs = 5_000): Promise<LogLine> {
  const find = (): LogLine | undefined => {
    for (let i = lines.length - 1; i >= 0; i--) if (lines[i]!.msg === 'request' && lines[i]!.id === id) return lines[i];
    return undefined;
  };
  return (await eventually(find, {
    what: `the access-log line of ${id}`,
    withinMs,
    everyMs: 2,
    until: (l) => l !== undefined,
  }))!;
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
export function gatewayFixture<G extends { shutdown(graceMs?: number): Promise<void> } = TestGateway>(
  opts: { graceMs?: number } = {},
): GatewayFixture<G> {
  let upstream: RecordingUpstream | undefined;
  const fx: GatewayFixture<G> = {
    get upstream(): RecordingUpstream {
      if (upstream === undefined)
        throw new Error('the recording upstream starts in beforeAll: use it inside a test or hook');
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
