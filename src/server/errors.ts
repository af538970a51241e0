/** @module The one catalogue of gateway-made errors: a stable code, an HTTP status, a message. */

export const GATEWAY_ERRORS = {
  BAD_PATH: { status: 400, message: 'Bad request path' },
  BAD_REQUEST: { status: 400, message: 'Bad request' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'Payload too large' },
  /** body-peek.ts: a counted multipart field (token, _method, param: rule) came after the first file part. */
  PARAM_AFTER_FILE: { status: 400, message: 'Request body not accepted: send access_token, bearer_token, _method and other counted fields before the first file part' },
  HEADERS_TOO_LARGE: { status: 431, message: 'Request header fields too large' },
  RATE_LIMITED: { status: 429, message: 'Too many requests' },
  UPSTREAM_UNREACHABLE: { status: 502, message: 'Upstream unreachable' },
  UPSTREAM_RESET: { status: 502, message: 'Upstream connection reset' },
  STORE_UNAVAILABLE: { status: 503, message: 'Rate limit store unavailable' },
  SHUTTING_DOWN: { status: 503, message: 'Shutting down' },
  UPSTREAM_TIMEOUT: { status: 504, message: 'Upstream timed out' },
  INTERNAL: { status: 500, message: 'Internal gateway error' },
} as const satisfies Record<string, { status: number; message: string }>;

export type GatewayErrorCode = keyof typeof GATEWAY_ERRORS;

/** Pre-serialized bodies: the error path allocates no JSON per request. */
export const ERROR_BODIES: Record<GatewayErrorCode, Buffer> = Object.fromEntries(
  Object.entries(GATEWAY_ERRORS).map(([code, e]) => [code, Buffer.from(JSON.stringify({ error: e.message }))]),
) as Record<GatewayErrorCode, Buffer>;
