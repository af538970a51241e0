/** @module The `--format` names replay reads, each to its parser. */
import { JSON_FORMAT, RATEGATE_FORMAT } from './json-format.js';
import { COMBINED, compileNginxFormat } from './nginx-format.js';
import type { LogFormat } from './record.js';

export const FORMAT_NAMES = ['nginx', 'combined', 'mastodon', 'rategate', 'json', "'nginx:<log_format>'"];

/** The format `--format` names; throws an Error naming the known ones. */
export function formatNamed(name: string): LogFormat {
  switch (name) {
    // Mastodon's nginx.conf (dist/nginx.conf, the documentation's) sets no log_format: nginx writes `combined`.
    case 'nginx':
    case 'combined':
    case 'mastodon':
      return compileNginxFormat(COMBINED, name);
    case 'rategate':
      return RATEGATE_FORMAT;
    case 'json':
      return JSON_FORMAT;
  }
  if (name.startsWith('nginx:')) return compileNginxFormat(name.slice(6).trim());
  throw new Error(`unknown format "${name}" (one of ${FORMAT_NAMES.join(', ')})`);
}
