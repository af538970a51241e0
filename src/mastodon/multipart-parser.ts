/**
 * @module Busboy for the built-in upstream's multipart reader (params.ts): its field, file and part
 * limits, the client errors they raise, and stopping it mid-body.
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import busboy from 'busboy';
import { MAX_PARAMS } from '../rails/rack-params.js';
import { HttpError } from './reply.js';

/** Busboy with the field, file and part limits; a header busboy cannot read is the client's error. */
export function multipartParser(
  req: IncomingMessage,
  maxField: number,
  maxFile: number,
  maxFiles: number,
): busboy.Busboy | HttpError {
  try {
    return busboy({
      headers: req.headers,
      defParamCharset: 'utf8',
      limits: {
        fieldNameSize: 1024,
        fieldSize: maxField + 1,
        // Busboy flags a file that reaches its limit; one byte more lets exactly `maxFile` through.
        fileSize: maxFile + 1,
        files: maxFiles,
        fields: MAX_PARAMS,
        parts: MAX_PARAMS + maxFiles,
      },
    });
  } catch (err) {
    return new HttpError(400, `Malformed multipart body: ${(err as Error).message}`);
  }
}

/** Stop reading: nothing more of the body is parsed or handed on. */
export function stopMultipart(
  req: IncomingMessage,
  parser: busboy.Busboy,
  open: Set<Readable>,
  onReqError: () => void,
  onReqClose: () => void,
): void {
  req.unpipe(parser);
  req.off('error', onReqError);
  req.off('close', onReqClose);
  for (const stream of open) stream.destroy();
  parser.removeAllListeners();
  parser.on('error', () => undefined);
  parser.destroy();
}

export function failOnLimits(parser: busboy.Busboy, maxFiles: number, fail: (err: HttpError) => void): void {
  parser.on('fieldsLimit', () => fail(new HttpError(413, `Too many parameters (maximum is ${MAX_PARAMS})`, true)));
  parser.on('partsLimit', () => fail(new HttpError(413, 'Too many parts in multipart body', true)));
  parser.on('filesLimit', () => fail(new HttpError(413, `Too many files (maximum is ${maxFiles})`, true)));
  parser.on('error', (err) => fail(new HttpError(400, `Malformed multipart body: ${(err as Error).message}`)));
}
