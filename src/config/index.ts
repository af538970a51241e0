/** @module The config entry points: load a limit table into a Snapshot, and its types. */
export { ConfigError, ConfigFileUnreadable } from './errors.js';
export {
  loadConfigFile,
  parseConfig,
  readConfigText,
  validateConfig,
  type ConfigOverrides,
  type ValidationResult,
} from './load.js';
export { buildSnapshot, policyItem } from './compile.js';
export { formatRulesTable, formatSummary } from './describe.js';
export { formatDuration, parseDuration } from './fields/duration.js';
export { parseHostPort, type HostPort } from './fields/validators.js';
export type { Config, ConfigInput, LimitRule } from './schema.js';
export type { Algorithm, CompiledRule, Matcher, OnError, Snapshot } from './types.js';
