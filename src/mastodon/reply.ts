/** @module How the built-in upstream answers: the JSON writer and the one error type every layer throws. */
import { RategateError } from '../errors.js';
import type { ServerResponse } from 'node:http';

/** A JSON object body; errors are `{"error": "…"}` plus optional fields (`details`, `error_description`). */
export type JsonBody = { readonly [key: string]: unknown };

/**
 * An answer that ends the request early. `closeConnection` is set when the request body was left
 * unread on purpose (too large), so the socket must not be reused for a next request.
 */
export class HttpError extends RategateError {
  readonly code = 'MASTODON_HTTP';
  readonly status: number;
  readonly body: JsonBody;
  readonly closeConnection: boolean;

  constructor(status: number, body: JsonBody | string, closeConnection = false) {
    const json = typeof body === 'string' ? { error: body } : body;
    super(typeof json['error'] === 'string' ? json['error'] : `HTTP ${status}`);
    this.status = status;
    this.body = json;
    this.closeConnection = closeConnection;
  }
}

export const RECORD_NOT_FOUND = 'Record not found';

export function notFound(): HttpError {
  return new HttpError(404, RECORD_NOT_FOUND);
}

/** Validation failures read `Validation failed: …` like ActiveRecord's, so clients show them as they are. */
export function validationFailed(message: string): HttpError {
  return new HttpError(422, `Validation failed: ${message}`);
}

export function sendJson(res: ServerResponse, status: number, body: unknown, closeConnection = false): void {
  const payload = Buffer.from(JSON.stringify(body), 'utf8');
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', payload.length);
  // Answers carry per-user data; no shared cache may keep them.
  res.setHeader('Cache-Control', 'no-store');
  if (closeConnection) res.setHeader('Connection', 'close');
  res.end(payload);
}
