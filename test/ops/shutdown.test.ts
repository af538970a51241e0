/** Graceful shutdown of the real process: SIGTERM drains in-flight requests and exits 0. */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../support/http.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { freePort } from '../support/servers.js';
import { SEED_TABLE } from '../support/gateway.js';

let upstream: RecordingUpstream;
beforeAll(async () => {
  upstream = await startRecordingUpstream();
  upstream.route('/api/v1/slow', (_req, res) => {
    setTimeout(() => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"slow":true}');
    }, 800);
  });
});
afterAll(async () => upstream.close());

describe('graceful shutdown', () => {
  it('finishes an in-flight slow request after SIGTERM, refuses new connections, and exits 0', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-drain-'));
    writeFileSync(path.join(dir, 'limits.yaml'), SEED_TABLE);
    const port = await freePort();
    const adminPort = await freePort();
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli.ts', 'serve', '--config', path.join(dir, 'limits.yaml'), '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${adminPort}`, '--upstream', upstream.url],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const started = Date.now();
    while (!out.includes('rategate listening')) {
      if (Date.now() - started > 15_000) throw new Error(`gateway did not start: ${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(out).toMatch(/store memory/);

    const url = `http://127.0.0.1:${port}`;
    const slow = send(url, { path: '/api/v1/slow' });
    await new Promise((r) => setTimeout(r, 200));
    child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 100));
    await expect(send(url, { path: '/api/v1/statuses/1' })).rejects.toThrow();
    const answer = await slow;
    expect(answer.status).toBe(200);
    expect(answer.body).toBe('{"slow":true}');
    expect(answer.headers['x-ratelimit-limit']).toBe('300');
    expect(await exited).toBe(0);
  });
});
