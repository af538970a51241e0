/** @module Who a request is: client IP and bucket key, account key. Factories and their types only. */
export { compileCidrs, parseIp, type CidrSet, type ParsedIp } from './cidr.js';
export {
  createClientIpResolver,
  ipBucketKey,
  networkOf,
  bareForwardedAddress,
  UNKNOWN_CLIENT,
  type ClientIp,
  type ClientIpOptions,
  type ClientIpResolver,
  type Peer,
} from './ip.js';
export {
  createAccountResolver,
  tokenDigest,
  isIntrospectable,
  accountKeyFromHeader,
  accountKeyFromId,
  type AccountKey,
  type AccountOptions,
  type AccountResolver,
  type Introspect,
  type IntrospectResult,
  type TokenDigestOf,
} from './account.js';
export { accountKeyNamedBy, accountKeysNamedBy } from './account-key.js';
export { forwardedForNodes, type ParsedForwarded } from './forwarded.js';
export {
  countedIntrospect,
  createHttpIntrospector,
  createIntrospectionPool,
  type HttpIntrospectorOptions,
} from './introspect.js';
