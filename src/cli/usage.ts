/** @module The command line's usage text, printed by every command on --help and with every usage error. */
import { GUARD_USAGE } from './guard.js';

export const USAGE = `Usage:
  rategate serve    [--config FILE] [--listen HOST:PORT] [--admin-listen HOST:PORT]
                    [--upstream URL|builtin] [--store memory|URL] [--workers N|auto]
  rategate check    [--config FILE | FILE]
  rategate explain  [--config FILE] "METHOD /path?query" [-H "Name: value"]… [--ip IP] [--body "a=b"] [--account ID|none]
                    [--account-age 3d] [--bot] [--locked] [--surge NAME]
  rategate replay   [--config FILE] LOG… [--format nginx|combined|mastodon|rategate|json|'nginx:<log_format>']
                    [--json] [--html REPORT.html] [--top N] [--assume anonymous,no-body]
                                                                 (LOG: plain or gzip; - reads standard input)
  rategate upstream [--listen HOST:PORT]
${GUARD_USAGE}
  rategate --version

Environment (flags win): RATEGATE_CONFIG, RATEGATE_LISTEN, RATEGATE_ADMIN_LISTEN, RATEGATE_UPSTREAM, RATEGATE_STORE,
RATEGATE_LOG_LEVEL (wins over the file's log.level); check applies them as serve does.
RATEGATE_ADMIN_TOKEN (the admin API's bearer token); RATEGATE_STORE_SENTINEL_PASSWORD (the sentinels' own password);
RATEGATE_ADMIN_URL (block, exempt, bans, limited: default http://127.0.0.1:9464);
RATEGATE_MEMORY_LIMIT (serve: bytes the process may use, else the cgroup's limit; the default store.maxKeys fits in 90 % of it).
Default config: config/limits.yaml.`;
