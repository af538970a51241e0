/** @module Media uploads (`POST /api/v1/media`, `/api/v2/media`) streamed and sniffed, never held whole, and `GET /api/v1/media/:id`. */
import type { Handler } from '../context.js';
import { mediaEntity } from '../entities.js';
import { getString, type IncomingFile } from '../params.js';
import { notFound, validationFailed } from '../reply.js';
import { sniff, SNIFF_BYTES } from '../sniff.js';
import type { MediaRecord } from '../store.js';

const MAX_DESCRIPTION = 1500;
const NUMBER = String.raw`\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*`;
const FOCUS = new RegExp(`^${NUMBER},${NUMBER}$`);

/** What is kept of an uploaded file: its size and first bytes. The content itself is dropped. */
interface Received {
  readonly head: Buffer;
  readonly size: number;
}

/** Counts the bytes and keeps only the head, so memory stays flat whatever the file size. */
async function receive(file: IncomingFile): Promise<Received> {
  const head = Buffer.alloc(SNIFF_BYTES);
  let headLength = 0;
  let size = 0;
  for await (const chunk of file.stream as AsyncIterable<Buffer>) {
    if (headLength < SNIFF_BYTES) headLength += chunk.copy(head, headLength, 0, SNIFF_BYTES - headLength);
    size += chunk.length;
  }
  return { head: head.subarray(0, headLength), size };
}

function parseFocus(raw: string | undefined): { x: number; y: number } | null {
  if (raw === undefined || raw.trim() === '') return null;
  const match = FOCUS.exec(raw);
  const x = Number(match?.[1]);
  const y = Number(match?.[2]);
  if (match === null || !(x >= -1 && x <= 1 && y >= -1 && y <= 1)) {
    throw validationFailed('Focus must be two numbers "x,y", each between -1.0 and 1.0');
  }
  return { x, y };
}

function upload(version: 1 | 2): Handler {
  return async (ctx) => {
    const { account } = ctx.requireUser();
    const { params, files } = await ctx.params<Received>({
      onFile: receive,
      maxFileBytes: ctx.opts.maxUploadBytes,
      maxFiles: 2,
    });

    const file = files.get('file');
    if (file === undefined || file.size === 0) throw validationFailed("File can't be blank");
    const kind = sniff(file.head);
    if (kind === undefined) throw validationFailed('File content type is invalid');
    const thumbnail = files.get('thumbnail');
    if (thumbnail !== undefined && sniff(thumbnail.head)?.type !== 'image') {
      throw validationFailed('Thumbnail content type is invalid');
    }
    const description = getString(params, 'description');
    if (description !== undefined && [...description].length > MAX_DESCRIPTION) {
      throw validationFailed(`Description is too long (maximum is ${MAX_DESCRIPTION} characters)`);
    }
    const focus = parseFocus(getString(params, 'focus'));

    const media: MediaRecord = {
      id: ctx.store.ids.next(),
      accountId: account.id,
      type: kind.type,
      mimeType: kind.mimeType,
      extension: kind.extension,
      size: file.size,
      dimensions: kind.dimensions,
      description: description === undefined || description === '' ? null : description,
      focus,
      hasThumbnail: thumbnail !== undefined,
      statusId: null,
    };
    ctx.store.media.set(media.id, media);
    // v2 answers before transcoding: images are ready at once, audio and video "still processing".
    // Processing here is instantaneous, so a later GET already shows the url.
    const processing = version === 2 && media.type !== 'image';
    return { status: processing ? 202 : 200, body: mediaEntity(media, ctx.opts.baseUrl, processing) };
  };
}

export const uploadV1 = upload(1);
export const uploadV2 = upload(2);

/** Mastodon only shows the uploader their own attachments that no status has taken yet. */
export const showMedia: Handler = async (ctx) => {
  const { account } = ctx.requireUser();
  const media = ctx.store.media.get(ctx.id);
  if (media === undefined || media.accountId !== account.id || media.statusId !== null) throw notFound();
  return { status: 200, body: mediaEntity(media, ctx.opts.baseUrl) };
};
