/** @module An exchange's failures as gateway errors: the request body's own (too large, too slow) and the upstream's (undici and socket errors). */
import { errors as undiciErrors } from 'undici';
import { hasCode } from '../errors.js';
import type { GatewayErrorCode } from '../http/errors.js';

/** The request body itself failed while streaming: too large, too slow, or a counted field after a file part. */
export function clientFault(err: Error): GatewayErrorCode | undefined {
  if (hasCode(err, 'BODY_TOO_LARGE')) return 'PAYLOAD_TOO_LARGE';
  if (hasCode(err, 'BODY_TOO_SLOW')) return 'BODY_TOO_SLOW';
  // body-peek's ParamBeyondPeekError, known by its stable code: proxy/ does not import rails/.
  if (hasCode(err, 'PARAM_BEYOND_PEEK')) return 'PARAM_AFTER_FILE';
  return undefined;
}

/** One place that turns undici and socket failures into gateway errors. */
export function classifyUpstreamError(err: unknown): GatewayErrorCode {
  if (
    err instanceof undiciErrors.ConnectTimeoutError ||
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError
  ) {
    return 'UPSTREAM_TIMEOUT';
  }
  if (err instanceof undiciErrors.RequestContentLengthMismatchError) return 'BAD_REQUEST';
  const code = (err as { code?: string }).code;
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE') return 'UPSTREAM_RESET';
  return 'UPSTREAM_UNREACHABLE';
}
