/**
 * @module `Expect: 100-continue` answered by the gateway after its limit decision, instead of Node's
 * automatic `100 Continue`: a refused client gets its 429 before it sends the body.
 */
import type http from 'node:http';

/** Whether the client waits for `100 Continue` before sending its body (RFC 9110 §10.1.1). */
export function expectsContinue(req: http.IncomingMessage): boolean {
  const v = req.headers.expect;
  return v !== undefined && v.length === 12 && v.toLowerCase() === '100-continue';
}

/**
 * Sends `100 Continue` if the client is waiting for it and nothing was answered yet. Call it when the
 * request is admitted, and before reading the body for the decision (a token in the body): the client
 * sends nothing until then. The `Expect` header itself does not go upstream (proxy/forward.ts: undici
 * refuses it, and the expectation is already met). node:http calls the gateway through its
 * 'checkContinue' event for such requests, so it sends no `100 Continue` by itself.
 */
export function continueNow(req: http.IncomingMessage, res: http.ServerResponse): void {
  if (
    !res.headersSent &&
    !res.writableEnded &&
    expectsContinue(req) &&
    !(res as { sentContinue?: boolean }).sentContinue
  ) {
    (res as { sentContinue?: boolean }).sentContinue = true;
    res.writeContinue();
  }
}
