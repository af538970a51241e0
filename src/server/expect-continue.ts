/**
 * @module `Expect: 100-continue` answered by the gateway after its limit decision, instead of Node's
 * automatic `100 Continue`: a refused client gets its 429 before it sends the body.
 */
import type http from 'node:http';

/**
 * Routes requests that expect 100-continue to `handler` too. With a `checkContinue` listener Node
 * no longer sends `100 Continue` by itself: the handler must call `continueNow` once the request is
 * admitted (or before it reads the body to decide), or answer without it.
 */
export function takeOverExpectContinue(server: http.Server, handler: http.RequestListener): void {
  server.on('checkContinue', handler);
}

/** Whether the client waits for `100 Continue` before sending its body (RFC 9110 §10.1.1). */
export function expectsContinue(req: http.IncomingMessage): boolean {
  const v = req.headers.expect;
  return v !== undefined && v.length === 12 && v.toLowerCase() === '100-continue';
}

/**
 * Sends `100 Continue` if the client is waiting for it and nothing was answered yet. Call it when the
 * request is admitted, and before reading the body for the decision (a token in the body): the client
 * sends nothing until then. The `Expect` header itself must not go upstream (undici refuses it, and
 * the expectation is already met): see EXPECT_HEADER.
 */
export function continueNow(req: http.IncomingMessage, res: http.ServerResponse): void {
  if (!res.headersSent && !res.writableEnded && expectsContinue(req) && !(res as { sentContinue?: boolean }).sentContinue) {
    (res as { sentContinue?: boolean }).sentContinue = true;
    res.writeContinue();
  }
}

/** The request header the forwarder drops: the gateway has met the expectation itself. */
export const EXPECT_HEADER = 'expect';
