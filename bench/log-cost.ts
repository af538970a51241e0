/**
 * @module Micro-benchmark of one access-log line: pino with a synchronous stdout destination (before)
 * against the buffered destination of src/observability/log.ts (after). Run with stdout on a pipe, as in a container:
 *   node --import tsx bench/log-cost.ts | cat > /dev/null
 * Prints CPU µs per line (user + system, all threads) to stderr.
 */
import { pino } from 'pino';
import { createAccessLog, createProcessLogger } from '../src/observability/log.js';

const N = Number(process.env.N ?? 200_000);
const record = {
  method: 'GET',
  path: '/api/v1/statuses/123',
  status: 200,
  rules: ['account-access', 'ip-access', 'status-read'],
  decision: 'allowed',
  ms: 1.234,
};

async function measure(name: string, log: pino.Logger, direct = false): Promise<void> {
  const access = createAccessLog(log);
  const line = direct ? () => access('info', record) : () => log.info(record, 'request');
  for (let i = 0; i < 20_000; i++) line(); // warm-up
  await new Promise((r) => setTimeout(r, 300));
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  // Batches with a turn of the event loop between them, as requests come: async writes can complete.
  for (let i = 0; i < N; i += 100) {
    for (let j = 0; j < 100; j++) line();
    if (i % 1000 === 0) await new Promise((r) => setImmediate(r));
  }
  await new Promise<void>((r) => log.flush(() => r()));
  const cpu = process.cpuUsage(cpu0);
  const wall = Number(process.hrtime.bigint() - t0) / 1e3;
  process.stderr.write(
    `${name}: ${((cpu.user + cpu.system) / N).toFixed(2)} µs CPU per line (${(wall / N).toFixed(2)} µs wall)\n`,
  );
}

const which = process.argv[2] ?? 'both';
if (which !== 'buffered')
  await measure('sync pino destination (before)', pino({ level: 'info' }, pino.destination({ dest: 1, sync: true })));
if (which !== 'sync')
  await measure('pino to the buffered destination of src/observability/log.ts', createProcessLogger('info'));
if (which !== 'sync')
  await measure(
    'access writer + buffered destination, src/observability/log.ts (after)',
    createProcessLogger('info'),
    true,
  );
if (which === 'both' || which === 'off') {
  const off = createProcessLogger('warn');
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < N; i++) if (off.isLevelEnabled('info')) off.info(record, 'request');
  const cpu = process.cpuUsage(cpu0);
  process.stderr.write(
    `log off (level warn, the record is not built): ${((cpu.user + cpu.system) / N).toFixed(3)} µs per request\n`,
  );
}
process.exit(0);
