/** @module Media type detection from a file's first bytes, since a client's declared Content-Type proves nothing. */
import type { ImageSize, MediaType } from './store.js';

export interface Sniffed {
  readonly type: Exclude<MediaType, 'unknown' | 'gifv'>;
  readonly mimeType: string;
  readonly extension: string;
  /** Known only for formats whose size sits in the first few bytes (PNG, GIF, WebP). */
  readonly dimensions: ImageSize | null;
}

/** Enough bytes for every signature below and for the PNG, GIF and WebP size fields. */
export const SNIFF_BYTES = 64;

function ascii(head: Buffer, start: number, text: string): boolean {
  if (head.length < start + text.length) return false;
  return head.toString('latin1', start, start + text.length) === text;
}

function bytes(head: Buffer, start: number, values: readonly number[]): boolean {
  if (head.length < start + values.length) return false;
  return values.every((v, i) => head[start + i] === v);
}

function image(mimeType: string, extension: string, dimensions: ImageSize | null): Sniffed {
  return { type: 'image', mimeType, extension, dimensions };
}

function size(width: number, height: number): ImageSize | null {
  return width > 0 && height > 0 ? { width, height } : null;
}

function webpSize(head: Buffer): ImageSize | null {
  if (head.length < 30) return null;
  if (ascii(head, 12, 'VP8X')) return size(head.readUIntLE(24, 3) + 1, head.readUIntLE(27, 3) + 1);
  if (ascii(head, 12, 'VP8 ')) return size(head.readUInt16LE(26) & 0x3fff, head.readUInt16LE(28) & 0x3fff);
  if (ascii(head, 12, 'VP8L') && head.length >= 25) {
    const bits = head.readUInt32LE(21);
    return size((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1);
  }
  return null;
}

/** Looks at the first bytes of a file; undefined when the format is not one Mastodon accepts. */
export function sniff(head: Buffer): Sniffed | undefined {
  if (bytes(head, 0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) {
    const dims =
      head.length >= 24 && ascii(head, 12, 'IHDR') ? size(head.readUInt32BE(16), head.readUInt32BE(20)) : null;
    return image('image/png', 'png', dims);
  }
  if (bytes(head, 0, [0xff, 0xd8, 0xff])) return image('image/jpeg', 'jpg', null);
  if (ascii(head, 0, 'GIF87a') || ascii(head, 0, 'GIF89a')) {
    return image('image/gif', 'gif', head.length >= 10 ? size(head.readUInt16LE(6), head.readUInt16LE(8)) : null);
  }
  if (ascii(head, 0, 'RIFF') && ascii(head, 8, 'WEBP')) return image('image/webp', 'webp', webpSize(head));
  if (ascii(head, 0, 'RIFF') && ascii(head, 8, 'WAVE')) return audio('audio/wave', 'wav');
  if (ascii(head, 4, 'ftyp')) {
    const brand = head.toString('latin1', 8, 12);
    if (brand === 'qt  ') return video('video/quicktime', 'mov');
    if (brand === 'M4A ' || brand === 'M4B ') return audio('audio/mp4', 'm4a');
    return video('video/mp4', 'mp4');
  }
  if (bytes(head, 0, [0x1a, 0x45, 0xdf, 0xa3])) return video('video/webm', 'webm');
  if (ascii(head, 0, 'OggS')) return audio('audio/ogg', 'ogg');
  if (ascii(head, 0, 'fLaC')) return audio('audio/flac', 'flac');
  if (ascii(head, 0, 'ID3')) return audio('audio/mpeg', 'mp3');
  // An MPEG audio frame starts with 11 set sync bits; JPEG (FF D8) was matched above.
  const b1 = head[1];
  if (head[0] === 0xff && b1 !== undefined && (b1 & 0xe0) === 0xe0) return audio('audio/mpeg', 'mp3');
  return undefined;
}

function video(mimeType: string, extension: string): Sniffed {
  return { type: 'video', mimeType, extension, dimensions: null };
}

function audio(mimeType: string, extension: string): Sniffed {
  return { type: 'audio', mimeType, extension, dimensions: null };
}
