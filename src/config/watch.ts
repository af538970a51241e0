/**
 * @module Watches the config file and reloads it: directory watch (so a Kubernetes ConfigMap's `..data`
 * symlink swap is seen), a stat poll as a safety net for missed events, and SIGHUP. Keeps the last good table.
 * The poll compares the file's stat (through symlinks: a swap changes the inode) in libuv, so an
 * unchanged file costs no read and no JavaScript; it is read only when its stat changed or an event came.
 */
import { unwatchFile, watch, watchFile, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

export interface ConfigWatcherOptions {
  path: string;
  /** Called with the new file text when it changed; resolves when applied (or rejected). */
  onChange: (text: string) => Promise<void>;
  /** Events arriving within this many ms are handled as one (editors write in several steps). */
  debounceMs?: number;
  /** Stat the file at this interval too: inotify misses some swaps (network volumes, renames). */
  pollMs?: number;
  /** Reads the file (tests count the reads); default fs.promises.readFile. */
  read?: (path: string) => Promise<string>;
  /** Read errors (file missing mid-swap, permissions): reported, old table kept. */
  onError: (err: Error) => void;
}

export class ConfigWatcher {
  private watcher: FSWatcher | undefined;
  private polling = false;
  private debounce: NodeJS.Timeout | undefined;
  private lastText: string | undefined;
  private running: Promise<void> = Promise.resolve();
  private readonly onSighup = () => this.trigger(0, true);
  /** Called by libuv's stat poll only when the stat changed (mtime, size, inode, …). */
  private readonly onStat = () => this.trigger(0, false);

  constructor(private readonly opts: ConfigWatcherOptions) {}

  /** Starts watching; `initialText` is the text already loaded, so an unchanged file is not reloaded. */
  start(initialText: string): void {
    this.lastText = initialText;
    const dir = path.dirname(path.resolve(this.opts.path));
    try {
      // The directory, not the file: a symlink swap replaces the file's inode and a file watch goes deaf.
      this.watcher = watch(dir, { persistent: false }, () => this.trigger(this.opts.debounceMs ?? 150, false));
      this.watcher.on('error', (err) => this.opts.onError(err));
    } catch (err) {
      this.opts.onError(err as Error);
    }
    watchFile(this.opts.path, { persistent: false, interval: this.opts.pollMs ?? 1000 }, this.onStat);
    this.polling = true;
    process.on('SIGHUP', this.onSighup);
  }

  stop(): void {
    this.watcher?.close();
    if (this.polling) unwatchFile(this.opts.path, this.onStat);
    this.polling = false;
    if (this.debounce) clearTimeout(this.debounce);
    process.off('SIGHUP', this.onSighup);
  }

  /** Reloads now, even when the text is unchanged (SIGHUP asks for exactly that). Resolves when done. */
  reloadNow(): Promise<void> {
    return this.check(true);
  }

  private trigger(delayMs: number, force: boolean): void {
    if (this.debounce) clearTimeout(this.debounce);
    this.debounce = setTimeout(() => void this.check(force), delayMs);
    this.debounce.unref();
  }

  /** Serialized: one reload at a time, in order, so an older text never wins over a newer one. */
  private check(force: boolean): Promise<void> {
    this.running = this.running.then(async () => {
      let text: string;
      try {
        text =
          this.opts.read !== undefined ? await this.opts.read(this.opts.path) : await readFile(this.opts.path, 'utf8');
      } catch (err) {
        // Mid-swap the path can briefly dangle; the next event or stat change will see the new file.
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.opts.onError(err as Error);
        return;
      }
      if (!force && text === this.lastText) return;
      this.lastText = text;
      await this.opts.onChange(text);
    });
    return this.running;
  }
}
