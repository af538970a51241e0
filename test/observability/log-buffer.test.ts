/** The access log's buffered destination (holds lines until full or flushed, writes them whole and in order) and its line writer. */
import { closeSync, mkdtempSync, openSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { BufferedFd, createAccessLog, loggerOptions } from '../../src/observability/log.js';

function tempFd(): { fd: number; read: () => string } {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-logbuf-')), 'out.log');
  const fd = openSync(file, 'w');
  return { fd, read: () => readFileSync(file, 'utf8') };
}

describe('the buffered log destination', () => {
  it('holds lines until flushed, then writes them in order', () => {
    const { fd, read } = tempFd();
    const dest = new BufferedFd(fd, 1024);
    dest.write('{"n":1}\n');
    dest.write('{"n":2}\n');
    expect(read()).toBe('');
    dest.flushSync();
    expect(read()).toBe('{"n":1}\n{"n":2}\n');
    closeSync(fd);
  });

  it('writes by itself once its limit is reached, multi-byte text included', () => {
    const { fd, read } = tempFd();
    const dest = new BufferedFd(fd, 100);
    const lines = Array.from({ length: 30 }, (_, i) => `{"path":"/é/${i}"}\n`);
    for (const l of lines) dest.write(l);
    const before = read();
    expect(before.length).toBeGreaterThan(0);
    expect(lines.join('').startsWith(before)).toBe(true);
    dest.flush();
    expect(read()).toBe(lines.join(''));
    closeSync(fd);
  });
});

describe('the access log writer', () => {
  it('writes the line pino would write: level, time, bindings, the record, msg', () => {
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(s) });
    const access = createAccessLog(log);
    const record = {
      method: 'GET',
      path: '/a"b',
      status: 200,
      rules: ['ip-access', 'x'],
      decision: 'allowed',
      ms: 1.5,
    };
    access('info', record);
    log.info(record, 'request');
    const [ours, theirs] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]!.endsWith('\n')).toBe(true);
    expect({ ...ours, time: 0 }).toEqual({ ...theirs, time: 0 });
    expect(Object.keys(ours!)).toEqual(Object.keys(theirs!));
    access('warn', { status: 429 });
    expect(JSON.parse(lines[2]!)).toMatchObject({ level: 40, status: 429, msg: 'request' });
  });

  it("writes the gateway's format the same way: string level, ISO-8601 time, as pino itself writes them", () => {
    const lines: string[] = [];
    const log = pino(loggerOptions('info'), { write: (s: string) => void lines.push(s) });
    const access = createAccessLog(log);
    const record = {
      method: 'GET',
      path: '/x',
      protocol: 'http/1.1',
      status: 200,
      rules: [],
      decision: 'unmatched',
      ms: 0.5,
      bytesIn: 0,
      bytesOut: 12,
    };
    access('info', record);
    log.info(record, 'request');
    const [ours, theirs] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(ours).toMatchObject({ level: 'info', protocol: 'http/1.1', bytesIn: 0, bytesOut: 12, msg: 'request' });
    expect(ours!.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Math.abs(Date.parse(ours!.time as string) - Date.now())).toBeLessThan(60_000);
    expect({ ...ours, time: 0 }).toEqual({ ...theirs, time: 0 });
    expect(Object.keys(ours!)).toEqual(Object.keys(theirs!));
    access('warn', { status: 429 });
    expect(JSON.parse(lines[2]!)).toMatchObject({ level: 'warn', status: 429, msg: 'request' });
  });
});
