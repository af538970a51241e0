/**
 * @module Raw HTTP/2 frames on a plain socket (h2c with prior knowledge), for the floods a well-behaved
 * client library will not send: a frame writer, a minimal HPACK encoder (literals, no Huffman, no
 * table), and a reader that parses what the server sends back into frames.
 */
import net from 'node:net';

export const FRAME = {
  DATA: 0,
  HEADERS: 1,
  RST_STREAM: 3,
  SETTINGS: 4,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK integer with an N-bit prefix (RFC 7541 §5.1), the prefix's other bits `high`. */
function hpackInt(value: number, prefixBits: number, high: number): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([high | value]);
  const out = [high | max];
  value -= max;
  while (value >= 128) {
    out.push((value % 128) + 128);
    value = Math.floor(value / 128);
  }
  out.push(value);
  return Buffer.from(out);
}

/** A header block of literal fields without indexing, new names (RFC 7541 §6.2.2). */
export function headerBlock(fields: ReadonlyArray<readonly [string, string]>): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of fields) {
    parts.push(
      Buffer.from([0x00]),
      hpackInt(name.length, 7, 0),
      Buffer.from(name, 'latin1'),
      hpackInt(value.length, 7, 0),
      Buffer.from(value, 'latin1'),
    );
  }
  return Buffer.concat(parts);
}

/** The fields of a GET of `path`. */
export function getFields(
  path: string,
  extra: ReadonlyArray<readonly [string, string]> = [],
): Array<readonly [string, string]> {
  return [[':method', 'GET'], [':scheme', 'http'], [':authority', 'gw.test'], [':path', path], ...extra];
}

/** HEADERS (and CONTINUATION frames past 16 kB) carrying `block` on `streamId`. */
export function headersFrames(streamId: number, block: Buffer, endStream: boolean): Buffer {
  const max = 16_384;
  const frames: Buffer[] = [];
  for (let at = 0; at < block.length || at === 0; at += max) {
    const last = at + max >= block.length;
    const type = at === 0 ? FRAME.HEADERS : FRAME.CONTINUATION;
    const flags = (last ? FLAG.END_HEADERS : 0) | (at === 0 && endStream ? FLAG.END_STREAM : 0);
    frames.push(frame(type, flags, streamId, block.subarray(at, at + max)));
    if (block.length === 0) break;
  }
  return Buffer.concat(frames);
}

export interface Frame {
  readonly type: number;
  readonly flags: number;
  readonly streamId: number;
  readonly payload: Buffer;
}

/** A raw h2c connection: the preface and an empty SETTINGS sent, the server's acknowledged, every frame it sends kept. */
export interface RawH2 {
  readonly socket: net.Socket;
  readonly frames: Frame[];
  readonly closed: Promise<void>;
  send(bytes: Buffer): boolean;
  /** The GOAWAY's error code, once one came. */
  goaway(): number | undefined;
  /** The RST_STREAM frames' error codes. */
  resets(): number[];
}

export function rawH2(url: string): Promise<RawH2> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const frames: Frame[] = [];
    let held = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      held = Buffer.concat([held, chunk]);
      while (held.length >= 9) {
        const length = held.readUIntBE(0, 3);
        if (held.length < 9 + length) break;
        const f = {
          type: held[3]!,
          flags: held[4]!,
          streamId: held.readUInt32BE(5) & 0x7fffffff,
          payload: held.subarray(9, 9 + length),
        };
        frames.push(f);
        // The server's settings apply once acknowledged, as any client does.
        if (f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0 && !socket.destroyed)
          socket.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
        held = held.subarray(9 + length);
      }
    });
    const closed = new Promise<void>((done) => socket.once('close', () => done()));
    socket.on('error', () => undefined);
    socket.once('connect', () => {
      socket.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0)]));
      resolve({
        socket,
        frames,
        closed,
        send: (bytes) => !socket.destroyed && socket.write(bytes),
        goaway: () => {
          const g = frames.find((f) => f.type === FRAME.GOAWAY);
          return g === undefined ? undefined : g.payload.readUInt32BE(4);
        },
        resets: () => frames.filter((f) => f.type === FRAME.RST_STREAM).map((f) => f.payload.readUInt32BE(0)),
      });
    });
    socket.once('error', reject);
  });
}
