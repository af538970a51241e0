/** @module What the gateway is started with (startGateway, app/start.ts): the config's path, the overrides, and what tests and the cluster change. */
import type { Logger } from 'pino';
import type { ConfigOverrides } from '../config/index.js';
import type { RequestTracing } from '../observability/tracing.js';

export interface GatewaySettings {
  /** Path of limits.yaml. */
  configPath: string;
  /** Flags and environment, which win over the file. */
  overrides?: ConfigOverrides;
  /**
   * Default: pino JSON lines on stdout, buffered (log.ts). Its level is set here, at start and on every
   * reload alike, to the config's `log.level` (which `overrides.logLevel`, RATEGATE_LOG_LEVEL, replaces).
   */
  logger?: Logger;
  /** Tests only: the store's clock (the memory store's, or the Redis scripts' clock override). */
  now?: () => number;
  /** Default Prometheus process metrics (off in tests that start many gateways in one process). */
  defaultMetrics?: boolean;
  /** Watch the config file and reload on change and SIGHUP (default true). */
  watch?: boolean;
  /** Run the admin listener (default true; a cluster worker leaves it to the primary). */
  admin?: boolean;
  /** OpenTelemetry traces (started by `serve` as the OTEL_* variables ask, and shut down by it); absent: none. */
  tracing?: RequestTracing | undefined;
}
