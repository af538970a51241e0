/** @module The routing entry points: path normalization, pattern parsing and the compiled matcher. */
export { normalizePath, REJECT, type NormalizeResult } from './normalize.js';
export { parsePattern, type ParsedPattern, type PatternResult, type Segment } from './pattern.js';
export { compileMatcher, type MatchableRule, type RuleMatcher } from './matcher.js';
