/**
 * @module Redis Cluster hash slots (CRC16/XMODEM of the key's hash tag, mod 16384).
 *
 * Written here rather than imported from `cluster-key-slot` because that package is only a transitive
 * dependency of ioredis (not declared by rategate, and untyped); the test checks it against the
 * server's own `CLUSTER KEYSLOT`.
 */

const TABLE = buildTable();

function buildTable(): Uint16Array {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let j = 0; j < 8; j++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    t[i] = crc;
  }
  return t;
}

/** The slot Redis Cluster stores `key` in. Only the `{tag}` part counts when the key has a non-empty one. */
export function keySlot(key: string): number {
  let start = 0;
  let end = key.length;
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i++) {
    const ch = key.charCodeAt(i);
    // Keys are hashed as UTF-8 bytes; identities are ASCII, so take the slow path only when needed.
    if (ch > 0x7f) return crcBytes(Buffer.from(key.slice(start, end), 'utf8'));
    crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ ch) & 0xff]!;
  }
  return crc & 0x3fff;
}

function crcBytes(bytes: Uint8Array): number {
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ b) & 0xff]!;
  return crc & 0x3fff;
}
