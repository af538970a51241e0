/**
 * @module The hot script calls (consume, consume-batch) on a single or Sentinel-managed Redis, written as
 * one prebuilt RESP buffer and handed to ioredis's connection as a command that is already encoded.
 *
 * ioredis's script helper costs, per call, a copy of the arguments three times over, a command subclass
 * with a closure, a string per argument joined into buffers and copied again, a second promise, and the
 * reply converted to strings (integers here): most of the gateway's instructions per store call (the
 * many-client bench asks the store for every request). ioredis keeps what it is for: the connection,
 * the order of replies, their parsing, errors. A cluster routes a command by its keys, which a prebuilt
 * command does not show it, so a cluster keeps ioredis's script helper.
 *
 * Scripts are loaded (SCRIPT LOAD) whenever the connection becomes ready, before any call on it; a
 * server that forgot them since (SCRIPT FLUSH, a restart in between) answers NOSCRIPT, and the call is
 * sent again with the script's text (EVAL), which loads it again.
 */
import { createHash } from 'node:crypto';
import { Command, type Redis } from 'ioredis';
import type { Arg } from './codec.js';

/** A script call: the key count, the keys, then ARGV. */
export type ScriptCall = (args: readonly Arg[]) => Promise<unknown>;

/** A command whose bytes are ready: ioredis writes them as they are and resolves it with the reply. */
class Prebuilt extends Command {
  constructor(private readonly bytes: Buffer) {
    super('evalsha');
  }

  override toWritable(): Buffer {
    return this.bytes;
  }
}

/** `$<len>\r\n<text>\r\n`: the command name and the script's SHA-1 (or its text), the same for every call. */
function bulk(...parts: string[]): Buffer {
  return Buffer.from(parts.map((p) => `$${Buffer.byteLength(p)}\r\n${p}\r\n`).join(''));
}

/** Writes `n` (a non-negative integer) in decimal at `at`; returns the offset after it. */
function writeInt(buf: Buffer, at: number, n: number): number {
  if (n < 10) {
    buf[at] = 48 + n;
    return at + 1;
  }
  const s = String(n);
  for (let i = 0; i < s.length; i++) buf[at + i] = s.charCodeAt(i);
  return at + s.length;
}

/** Decimal digits of a non-negative integer. */
function digits(n: number): number {
  let d = 1;
  while (n >= 10) {
    n = Math.floor(n / 10);
    d++;
  }
  return d;
}

/** UTF-8 bytes of `s`: its length when it is ASCII (keys nearly always are), found without a native call. */
function utf8Length(s: string): number {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.byteLength(s);
  return s.length;
}

/** Writes `s` at `at` (`len` bytes of UTF-8); ASCII byte by byte, which costs less than a native call for a key. */
function writeText(buf: Buffer, at: number, s: string, len: number): number {
  if (len !== s.length) return buf.write(s, at, len, 'utf8');
  for (let i = 0; i < len; i++) buf[at + i] = s.charCodeAt(i);
  return len;
}

/** The whole command: `*<count>`, then `head` (name and script), then each argument as a bulk string. */
export function encodeCall(head: Buffer, args: readonly Arg[]): Buffer {
  const n = args.length;
  const texts: (string | Buffer)[] = new Array(n);
  const lengths: number[] = new Array(n);
  let size = 1 + digits(n + 2) + 2 + head.length;
  for (let i = 0; i < n; i++) {
    const a = args[i]!;
    const t = typeof a === 'number' ? String(a) : a;
    const len = typeof t === 'string' ? utf8Length(t) : t.length;
    texts[i] = t;
    lengths[i] = len;
    size += 1 + digits(len) + 2 + len + 2;
  }
  const buf = Buffer.allocUnsafe(size);
  buf[0] = 42; // *
  let at = writeInt(buf, 1, n + 2);
  buf[at++] = 13;
  buf[at++] = 10;
  at += head.copy(buf, at);
  for (let i = 0; i < n; i++) {
    const t = texts[i]!;
    const len = lengths[i]!;
    buf[at++] = 36; // $
    at = writeInt(buf, at, len);
    buf[at++] = 13;
    buf[at++] = 10;
    at += typeof t === 'string' ? writeText(buf, at, t, len) : t.copy(buf, at);
    buf[at++] = 13;
    buf[at++] = 10;
  }
  return buf;
}

const isNoScript = (err: unknown): boolean => err instanceof Error && err.message.includes('NOSCRIPT');

/** The calls of `lua` on `client`: loaded at every ready, EVALSHA, EVAL after a NOSCRIPT. */
export function rawScript(client: Redis, lua: string): ScriptCall {
  const sha = createHash('sha1').update(lua).digest('hex');
  const bySha = bulk('evalsha', sha);
  const byText = bulk('eval', lua);
  // Listeners run when 'ready' is emitted, before any call can be written on the new connection.
  client.on('ready', () => {
    client.script('LOAD', lua).catch(() => undefined);
  });
  const send = (head: Buffer, args: readonly Arg[]): Promise<unknown> => {
    return client.sendCommand(new Prebuilt(encodeCall(head, args))) as Promise<unknown>;
  };
  return (args) => send(bySha, args).catch((err: unknown) => (isNoScript(err) ? send(byText, args) : Promise.reject(err)));
}
