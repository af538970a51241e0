/**
 * Every socket the gateway accepts has one property layout from its first request on, the admin port's
 * as the proxy's, and the upstream probe's sockets are the pool's: so node's stream code meets few
 * classes of socket and stays polymorphic (http/socket-shape.ts). Before, the keep-alive timeout and
 * the peer's address gave each accepted socket a second layout, and node:http's client a third kind,
 * and with Redis's sockets that made every stream look-up megamorphic (~4k instructions per request).
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServe, stop, type GatewayProcess } from '../support/process.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { scaledMs } from '../support/speed.js';

const HOOK = fileURLToPath(new URL('../fixtures/hooks/socket-layouts.mjs', import.meta.url));

interface Layout {
  /** A socket's own keys in order. */
  layout: string;
  reads: number;
}

/** `n` requests on one keep-alive connection; the statuses. */
async function onOneConnection(url: string, paths: readonly string[]): Promise<number[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const statuses: number[] = [];
  for (const p of paths)
    statuses.push(
      await new Promise<number>((resolve, reject) =>
        http
          .get(`${url}${p}`, { agent, headers: { authorization: 'Bearer user-1' } }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          })
          .on('error', reject),
      ),
    );
  agent.destroy();
  return statuses;
}

describe('socket layouts', () => {
  let upstream: RecordingUpstream;
  let gw: GatewayProcess;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-socket-shape-'));
  const out = path.join(dir, 'layouts.json');

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    const config = path.join(dir, 'limits.yaml');
    writeFileSync(config, 'limits:\n  - name: api\n    match: /api/*\n    per: ip\n    limit: 1000\n    period: 1h\n');
    gw = await spawnServe(['--config', config, '--upstream', upstream.url, '--store', 'memory'], {
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${HOOK}`.trim(),
      SOCKET_LAYOUTS_OUT: out,
    });
  }, scaledMs(30_000));

  afterAll(async () => {
    await upstream?.close();
  });

  it(
    'one layout for the accepted sockets of both ports, one for the pool and the probe, one at birth',
    async () => {
      // Two connections to each port, several requests each (the keep-alive wait sets a socket's timeout
      // after its first answer), and /readyz, which makes the gateway probe the upstream.
      for (let round = 0; round < 2; round++) {
        expect(
          await onOneConnection(gw.url, ['/api/v1/statuses/1', '/api/v1/statuses/2', '/api/v1/timelines/home']),
        ).toEqual([200, 200, 200]);
        expect(await onOneConnection(gw.adminUrl, ['/readyz', '/metrics', '/healthz'])).toEqual([200, 200, 200]);
      }
      // The process still answers, then exits and writes what it saw.
      expect(await onOneConnection(gw.url, ['/api/v1/statuses/3'])).toEqual([200]);
      expect(await stop(gw)).toBe(0);
      const seen = JSON.parse(readFileSync(out, 'utf8')) as Layout[];
      expect(upstream.forwarded()).toHaveLength(7);
      // Every socket is born with one layout (the constructor's); then a server's gets node:http's parser,
      // the pool's undici's symbols. Nothing else: no second layout of either, no third kind of client.
      const parsed = seen.filter((l) => l.layout.split(' ').includes('parser'));
      const pooled = seen.filter((l) => l.layout.includes('Symbol(client)'));
      const why = JSON.stringify(seen, null, 1);
      expect(parsed, why).toHaveLength(1);
      expect(pooled, why).toHaveLength(1);
      expect(seen, why).toHaveLength(3);
    },
    scaledMs(30_000),
  );
});
