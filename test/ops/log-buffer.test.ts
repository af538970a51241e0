/** The access log's buffered destination: holds lines until full or flushed, writes them whole and in order. */
import { closeSync, mkdtempSync, openSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { BufferedFd } from '../../src/log.js';

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
