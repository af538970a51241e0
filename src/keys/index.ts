/** @module The key kinds: the table (kinds.ts), a rule's compiled key (rule-key.ts), what rules need from a request (needs.ts). */
export {
  KINDS,
  KIND_NAMES,
  paramPath,
  type KeyFacts,
  type KeyKind,
  type KindArg,
  type KindName,
  type TypedContext,
} from './kinds.js';
export {
  compileKey,
  compositeError,
  displayKey,
  isClientIpKey,
  keyParams,
  keyShown,
  keyWhat,
  parsePart,
  PART_SEPARATOR,
  perError,
  PER_HINT,
  PER_MEANINGS,
  PER_PATTERN,
  tagOf,
  tagValue,
  typedTags,
  type KeyPart,
  type RuleKey,
} from './rule-key.js';
export { NEED, NEEDS_NOTHING, needNames, needs, type NeedName } from './needs.js';
export { claimValue, jwtPayload, MAX_CLAIM_LENGTH, MAX_JWT_LENGTH, type JwtPayload } from './jwt.js';
