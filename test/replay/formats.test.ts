/** The log readers: nginx formats compiled from their log_format, rategate's and generic JSON lines, gzip and plain, standard input. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { formatNamed } from '../../src/replay/formats.js';
import { logLines, MAX_LINE } from '../../src/replay/lines.js';
import { compileNginxFormat } from '../../src/replay/nginx-format.js';
import type { LogRecord } from '../../src/replay/record.js';

const COMBINED_LINE =
  '198.51.100.7 - - [21/Nov/2026:19:00:05 +0100] "POST /api/v1/accounts?x=1 HTTP/1.1" 200 512 "-" "Mastodon/4.3 (+https://x)"';

describe('nginx formats', () => {
  it('reads combined: the address, the time with its offset, the request line, the logged headers', () => {
    const r = formatNamed('nginx').parse(COMBINED_LINE) as LogRecord;
    expect(r).toEqual({
      time: Date.UTC(2026, 10, 21, 18, 0, 5),
      method: 'POST',
      target: '/api/v1/accounts?x=1',
      remoteAddr: '198.51.100.7',
      headers: { 'user-agent': 'Mastodon/4.3 (+https://x)' },
      status: 200,
    });
    expect(formatNamed('mastodon').parse(COMBINED_LINE)).toEqual(r);
  });

  it('compiles any log_format, X-Forwarded-For and escaped quotes included', () => {
    const f = compileNginxFormat('$msec $remote_addr "$request" $status "$http_x_forwarded_for" ${request_time}s');
    expect(f.headers).toEqual(new Set(['x-forwarded-for']));
    expect(f.status).toBe(true);
    const r = f.parse(
      '1795460405.123 10.0.0.2 "GET /a?q=\\x22b\\x22 HTTP/2.0" 200 "203.0.113.9, 10.0.0.1" 0.002s',
    ) as LogRecord;
    expect(r.time).toBe(1795460405123);
    expect(r.target).toBe('/a?q="b"');
    expect(r.headers['x-forwarded-for']).toBe('203.0.113.9, 10.0.0.1');
    expect(r.status).toBe(200);
    expect(f.parse('1795460405.123 10.0.0.2 "GET / HTTP/2.0" x "-" 0.002s')).toBe('no readable status');
    expect(compileNginxFormat('$remote_addr [$time_local] "$request"').status).toBe(false);
  });

  it('says why a line is bad, and refuses a format it cannot read', () => {
    const f = formatNamed('combined');
    expect(f.parse('garbage')).toMatch(/expected/);
    expect(f.parse(COMBINED_LINE.replace('POST /api', '\\x16\\x03 /api'))).toMatch(/not a request line/);
    expect(f.parse(COMBINED_LINE.replace('21/Nov', '99/Nov'))).toBe('no readable time');
    expect(() => compileNginxFormat('$remote_addr "$request"')).toThrow(/no time/);
    expect(() => compileNginxFormat('$time_local$request')).toThrow(/nothing between/);
    expect(() => formatNamed('apache')).toThrow(/unknown format/);
  });

  it('reads a long hostile line in linear time (no backtracking)', () => {
    const f = formatNamed('combined');
    const line = `1.2.3.4 - - [21/Nov/2026:19:00:05 +0000] "GET /${'"'.repeat(200_000)}`;
    const t = performance.now();
    expect(typeof f.parse(line)).toBe('string');
    expect(performance.now() - t).toBeLessThan(500);
  });
});

describe('JSON formats', () => {
  it("reads rategate's access log: arrival is time minus ms, the client when logged in clear", () => {
    const line = JSON.stringify({
      level: 30,
      time: 1795460405500,
      id: 'x',
      method: 'GET',
      path: '/api/v1/timelines/home',
      status: 200,
      rules: [],
      decision: 'allowed',
      client: '192.0.2.4',
      ms: 12.5,
      msg: 'request',
    });
    expect(formatNamed('rategate').parse(line)).toEqual({
      time: 1795460405488,
      method: 'GET',
      target: '/api/v1/timelines/home',
      remoteAddr: '192.0.2.4',
      headers: {},
      status: 200,
    });
    expect(formatNamed('rategate').parse('{"level":30,"msg":"listening"}')).toMatch(/not a request line/);
  });

  it("reads rategate's access log as 0.2 writes it: a string level and an ISO-8601 time", () => {
    const line = JSON.stringify({
      level: 'info',
      time: new Date(1795460405500).toISOString(),
      method: 'GET',
      path: '/api/v1/timelines/home',
      protocol: 'http/1.1',
      status: 200,
      ms: 12.5,
      bytesIn: 0,
      bytesOut: 120,
      msg: 'request',
    });
    expect(formatNamed('rategate').parse(line)).toMatchObject({ time: 1795460405488, method: 'GET', status: 200 });
    expect(
      formatNamed('rategate').parse('{"level":"info","time":"yesterday","method":"GET","path":"/","msg":"request"}'),
    ).toMatch(/no time/);
  });

  it('reads generic JSON lines by the usual field names', () => {
    const f = formatNamed('json');
    const r = f.parse(
      '{"@timestamp":"2026-11-21T18:00:05Z","remote_addr":"192.0.2.5","request":"GET /x?y=1 HTTP/1.1","http_x_forwarded_for":"1.1.1.1"}',
    ) as LogRecord;
    expect(r).toMatchObject({
      time: Date.UTC(2026, 10, 21, 18, 0, 5),
      method: 'GET',
      target: '/x?y=1',
      remoteAddr: '192.0.2.5',
      headers: { 'x-forwarded-for': '1.1.1.1' },
    });
    expect(f.parse('{"ts":1795460405,"method":"post","path":"/a","args":"b=1"}')).toMatchObject({
      time: 1795460405000,
      method: 'POST',
      target: '/a?b=1',
    });
    expect(f.parse('{"ts":1795460405,"method":"post","path":"/a","status":"401"}')).toMatchObject({ status: 401 });
    expect(f.parse('{"ts":1795460405,"method":"post","path":"/a","status_code":422}')).toMatchObject({ status: 422 });
    expect(f.parse('[1]')).toBe('not a JSON object');
    expect(f.parse('{')).toBe('not JSON');
  });
});

async function collect(sources: string[], stdin?: Readable): Promise<{ source: string; n: number; line: string }[]> {
  const out: { source: string; n: number; line: string }[] = [];
  for await (const b of logLines(sources, stdin))
    b.lines.forEach((line, i) => out.push({ source: b.source, n: b.first + i, line }));
  return out;
}

describe('log lines', () => {
  it('reads plain and gzip files (by their bytes, not their names), concatenated members, CRLF, and stdin', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'replay-lines-'));
    writeFileSync(path.join(dir, 'a.log'), 'one\r\ntwo\nthree');
    writeFileSync(path.join(dir, 'b.log'), Buffer.concat([gzipSync('four\nfi'), gzipSync('ve\n')]));
    const got = await collect(
      [path.join(dir, 'a.log'), path.join(dir, 'b.log'), '-'],
      Readable.from([Buffer.from('six\nseven\n')]),
    );
    expect(got.map((g) => `${path.basename(g.source)}:${g.n}:${g.line}`)).toEqual([
      'a.log:1:one',
      'a.log:2:two',
      'a.log:3:three',
      'b.log:1:four',
      'b.log:2:five',
      '-:1:six',
      '-:2:seven',
    ]);
  });

  it('streams a large gzip log without holding it', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'replay-lines-'));
    const text = `${COMBINED_LINE}\n`.repeat(50_000);
    writeFileSync(path.join(dir, 'big.gz'), gzipSync(text));
    let n = 0;
    let batches = 0;
    for await (const b of logLines([path.join(dir, 'big.gz')])) {
      n += b.lines.length;
      batches++;
    }
    expect(n).toBe(50_000);
    expect(batches).toBeGreaterThan(1);
  });
});

describe('hostile logs', () => {
  it('cuts a line with no end at MAX_LINE and goes on with the next one', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'replay-lines-'));
    const file = path.join(dir, 'hostile.log');
    writeFileSync(file, `first\n${'x'.repeat(5 * 1024 * 1024)}\nlast\n`);
    const got = await collect([file]);
    expect(got.map((g) => [g.n, g.line.length])).toEqual([
      [1, 5],
      [2, MAX_LINE],
      [3, 4],
    ]);
  });
});
