/** The config watcher's idle cost: an unchanged file is never read again; a changed one is, by event or by its stat. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigWatcher } from '../../src/config/watch.js';
import { eventually, pause } from '../support/eventually.js';

describe('the config watcher', () => {
  let watcher: ConfigWatcher | undefined;
  afterEach(() => watcher?.stop());

  it('does not read an unchanged file on its polls, and reads it once it changes', async () => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-watch-')), 'limits.yaml');
    writeFileSync(file, 'limits: []\n');
    let reads = 0;
    const seen: string[] = [];
    watcher = new ConfigWatcher({
      path: file,
      pollMs: 20,
      debounceMs: 0,
      read: (p) => {
        reads++;
        return readFile(p, 'utf8');
      },
      onChange: async (text) => {
        seen.push(text);
      },
      onError: (err) => {
        throw err;
      },
    });
    watcher.start('limits: []\n');
    // Asserting that nothing happens takes time: 15 poll intervals with the file untouched.
    await pause(300);
    expect(reads).toBe(0);
    writeFileSync(file, 'limits: [] # changed\n');
    await eventually(() => seen.length === 1, { what: 'the change seen', withinMs: 2000 });
    expect(seen).toEqual(['limits: [] # changed\n']);
    expect(reads).toBeGreaterThanOrEqual(1);
  });
});
