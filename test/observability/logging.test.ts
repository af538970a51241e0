/**
 * The log level rule of the real process (RATEGATE_LOG_LEVEL, else the file's log.level, at start and
 * on every reload alike), and the buffered access log losing no line on SIGTERM.
 */
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { send } from '../support/http.js';
import { SEED_TABLE, upstreamFixture, limitsFile } from '../support/gateway.js';
import { spawnServe, waitFor, type GatewayProcess } from '../support/process.js';

const upstream = upstreamFixture();

const accessLines = (out: string): string[] => out.split('\n').filter((l) => l.includes('"msg":"request"'));

async function sendMany(gw: GatewayProcess, n: number): Promise<void> {
  for (let i = 0; i < n; i++) expect((await send(gw.url, { path: `/api/v1/statuses/${i}` })).status).toBe(200);
}

async function metric(gw: GatewayProcess, line: string): Promise<boolean> {
  return (await (await fetch(`${gw.adminUrl}/metrics`)).text()).includes(line);
}

describe('the log level', () => {
  it('logs one access line per request by default, and loses none of them on SIGTERM', async () => {
    const gw = await spawnServe(['--config', limitsFile(SEED_TABLE), '--upstream', upstream.url]);
    await sendMany(gw, 40);
    gw.child.kill('SIGTERM');
    expect(await gw.exited).toBe(0);
    expect(accessLines(gw.output())).toHaveLength(40);
  });

  it('is the file’s log.level from the start: warn prints no access lines', async () => {
    const gw = await spawnServe([
      '--config',
      limitsFile(`log: { level: warn }\n${SEED_TABLE}`),
      '--upstream',
      upstream.url,
    ]);
    await sendMany(gw, 5);
    gw.child.kill('SIGTERM');
    expect(await gw.exited).toBe(0);
    expect(accessLines(gw.output())).toEqual([]);
    // The start-up line stays: it says which ports the process bound (spawnServe asks for port 0).
    expect(gw.output()).toContain(`"msg":"rategate listening on ${gw.url}, admin on ${gw.adminUrl},`);
    expect(new URL(gw.url).port).not.toBe('0');
  });

  it('stays RATEGATE_LOG_LEVEL over the file’s level after a reload', async () => {
    const file = limitsFile(`log: { level: info }\n${SEED_TABLE}`);
    const gw = await spawnServe(['--config', file, '--upstream', upstream.url], { RATEGATE_LOG_LEVEL: 'warn' });
    await sendMany(gw, 3);
    writeFileSync(file, `log: { level: info }\n${SEED_TABLE.replace('limit: 5\n', 'limit: 6\n')}`);
    await waitFor(() => metric(gw, 'rategate_config_reloads_total{result="success"} 1'), 5000, 'reload');
    await sendMany(gw, 3);
    gw.child.kill('SIGTERM');
    expect(await gw.exited).toBe(0);
    expect(accessLines(gw.output())).toEqual([]);
  });

  it('refuses an unknown RATEGATE_LOG_LEVEL like a bad value in the file, in a fatal JSON line', async () => {
    const refusal =
      'log.level: must be one of fatal, error, warn, info, debug, trace, silent (got "verbose") (set by an override)';
    // The message is inside the line's JSON `msg` (and its `errors`): its quotes escaped.
    const inJson = JSON.stringify(refusal).slice(1, -1);
    const started = spawnServe(['--config', limitsFile(SEED_TABLE), '--upstream', upstream.url], {
      RATEGATE_LOG_LEVEL: 'verbose',
    });
    await expect(started).rejects.toThrow(inJson);
    await expect(started).rejects.toThrow(/\{"level":"fatal","time":"[^"]+Z",.*"failure":"config"/);
  });
});
