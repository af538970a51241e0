/**
 * @module The package version, for --version and build_info: from rategate's package.json, the nearest
 * one above this module (one level above src/ and dist/; further up for a copy built elsewhere, as the
 * bench builds into bench/.build/dist).
 */
import { readFileSync } from 'node:fs';

function readVersion(): string {
  for (let up = '../'; up.length <= 4 * 3; up += '../') {
    try {
      const pkg = JSON.parse(readFileSync(new URL(`${up}package.json`, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'rategate' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // not here: look one level further up
    }
  }
  return 'unknown';
}

export const VERSION: string = readVersion();
