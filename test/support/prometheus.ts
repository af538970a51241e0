/**
 * @module A real Prometheus (Debian's `prometheus` binary) for alert tests: scrapes the given targets every
 * second and evaluates the given rules files every second, on a free port with its own data directory.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './servers.js';

export interface PrometheusAlert {
  labels: Record<string, string>;
  state: string;
  activeAt?: string;
}

export interface RunningPrometheus {
  readonly base: string;
  alerts(): Promise<PrometheusAlert[]>;
  /** The first sample's value of an instant query, or undefined when the result is empty. */
  value(query: string): Promise<string | undefined>;
  stop(): void;
}

/** Whether the `prometheus` and `promtool` binaries run here. */
export function prometheusMissing(): string[] {
  const has = (bin: string): boolean => spawnSync(bin, ['--version'], { stdio: 'ignore' }).status === 0;
  return ['promtool', 'prometheus'].filter((b) => !has(b));
}

export async function startPrometheus(o: {
  job: string;
  targets: readonly string[];
  rules: readonly string[];
}): Promise<RunningPrometheus> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-prom-'));
  writeFileSync(
    path.join(dir, 'prometheus.yml'),
    [
      'global: { scrape_interval: 1s, evaluation_interval: 1s }',
      `rule_files: ${JSON.stringify(o.rules.map((r) => path.resolve(r)))}`,
      'scrape_configs:',
      `  - { job_name: ${JSON.stringify(o.job)}, static_configs: [{ targets: ${JSON.stringify(o.targets)} }] }`,
      '',
    ].join('\n'),
  );
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    'prometheus',
    [
      `--config.file=${path.join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: 'ignore' },
  );
  return {
    base,
    async alerts() {
      const r = (await (await fetch(`${base}/api/v1/alerts`)).json()) as { data: { alerts: PrometheusAlert[] } };
      return r.data.alerts;
    },
    async value(query) {
      const r = (await (await fetch(`${base}/api/v1/query?query=${encodeURIComponent(query)}`)).json()) as {
        data: { result: Array<{ value: [number, string] }> };
      };
      return r.data.result[0]?.value[1];
    },
    stop: () => void child.kill('SIGTERM'),
  };
}
