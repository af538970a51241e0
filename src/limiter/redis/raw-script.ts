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

/**
 * The command as text and buffers in order: `*<count>`, `head`, then each argument as a bulk string
 * (`$<bytes>\r\n<bytes>\r\n`), a Buffer's bytes as they are. `exact`: byte lengths measured (UTF-8);
 * else taken as the strings' lengths (ASCII).
 */
function parts(head: Buffer, args: readonly Arg[], exact: boolean): (string | Buffer)[] {
  const out: (string | Buffer)[] = [`*${args.length + 2}\r\n`, head];
  let text = '';
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (typeof a === 'string') text += `$${exact ? Buffer.byteLength(a) : a.length}\r\n${a}\r\n`;
    else if (typeof a === 'number') {
      const t = String(a);
      text += `$${t.length}\r\n${t}\r\n`;
    } else {
      out.push(`${text}$${a.length}\r\n`, a);
      text = '\r\n';
    }
  }
  if (text !== '') out.push(text);
  return out;
}

/**
 * The whole command in one buffer. Keys are nearly always ASCII: the text is built once with the
 * strings' lengths, and again with their UTF-8 byte lengths only when some character is not. A few
 * native calls per command (a byte count and a write per text part), none per argument.
 */
export function encodeCall(head: Buffer, args: readonly Arg[]): Buffer {
  let ps = parts(head, args, false);
  let size = 0;
  let ascii = true;
  for (const p of ps) {
    // Any character beyond ASCII makes the UTF-8 bytes outnumber the characters: one native count,
    // several times cheaper than a regular expression over the same text.
    if (typeof p === 'string' && ascii && Buffer.byteLength(p) !== p.length) ascii = false;
    size += p.length;
  }
  if (!ascii) {
    ps = parts(head, args, true);
    size = 0;
    for (const p of ps) size += typeof p === 'string' ? Buffer.byteLength(p) : p.length;
  }
  const buf = Buffer.allocUnsafe(size);
  let at = 0;
  for (const p of ps) at += typeof p === 'string' ? buf.write(p, at, ascii ? 'latin1' : 'utf8') : p.copy(buf, at);
  return buf;
}

const isNoScript = (err: unknown): boolean => err instanceof Error && err.message.includes('NOSCRIPT');

/** The calls of `lua` on `client`: loaded at every ready, EVALSHA, EVAL after a NOSCRIPT. */
export function rawScript(client: Redis, lua: string): ScriptCall {
  const sha = createHash('sha1').update(lua).digest('hex');
  const bySha = bulk('evalsha', sha);
  const byText = bulk('eval', lua);
  // ioredis emits 'ready' a tick after the connection became ready: a call written in between finds the
  // script missing (NOSCRIPT) and is sent again with its text.
  client.on('ready', () => {
    client.script('LOAD', lua).catch(() => undefined);
  });
  return (args) => {
    const command = new Prebuilt(encodeCall(bySha, args));
    // The retry after a NOSCRIPT settles the first command, whose promise the caller holds: no second
    // promise per call for an error that comes once after a restart, if ever.
    const reject = command.reject;
    command.reject = (err) => {
      if (!isNoScript(err)) return reject(err);
      (client.sendCommand(new Prebuilt(encodeCall(byText, args))) as Promise<unknown>).then(command.resolve, reject);
    };
    return client.sendCommand(command) as Promise<unknown>;
  };
}
