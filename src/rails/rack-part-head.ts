/**
 * @module One multipart part's header block read as Rack reads it, twice: Rack 2.2's regexes and Rack
 * 3.2's parameter loop (checked against Debian's ruby-rack and Rack's source). Where the two readings
 * of a counted field differ, the body peek refuses the body rather than guess which Rack is upstream.
 */

/** How one Rack reads a part: a field (with the name it files it under), a file, or an error. */
export type PartReading =
  | { readonly kind: 'field'; readonly name: string }
  /** A file upload (or an empty filename, which Rack drops): never a string parameter. */
  | { readonly kind: 'file'; readonly name: string }
  /** Rack raises on this head: the upstream answers an error, nothing is counted by it. */
  | { readonly kind: 'error' };

// Ruby's \s is ASCII only ([ \t\n\v\f\r]); JS's would also take NBSP (0xA0 in latin1). `.` in Ruby
// takes \r, JS's does not: [^\n] stands for it. `^` in Ruby is any line start: (?<![^\n]).
const SP = '[ \\t\\n\\v\\f\\r]';
const TOKEN = `[^ \\t\\n\\v\\f\\r()<>,;:\\\\"/\\[\\]?=]+`;
const VALUE = `"(?:\\\\"|[^"])*"|${TOKEN}`;
const BOL = '(?<![^\\n])';
const EOL_ = '(?=\\n|(?![\\s\\S]))';

// Rack 2.2 (rack/multipart.rb).
const R2_DISPOSITION = new RegExp(`Content-Disposition:[^:]*;${SP}*name=(${VALUE})`, 'i');
const R2_CONTENT_ID = /Content-ID:[ \t\n\v\f\r]*([^\r\n]*)/i;
const R2_CONTENT_TYPE = /Content-Type: ([^\n]*)\r\n/i;
const ATTR_CHAR = `[^ \\x00-\\x1f\\x7f)(><@,;:\\\\"/\\[\\]?='*%]`;
const ATTR = `${ATTR_CHAR}+`;
const EXT_VALUE = `%[0-9a-fA-F]{2}|${ATTR_CHAR}`;
const REGULAR = `(${ATTR}(?:\\*[0-9]+)?)=(${VALUE})`;
const EXT_INITIAL = `(${ATTR}(?:\\*0)?\\*)=([a-zA-Z0-9\\-]*'[a-zA-Z0-9\\-]*'(?:${EXT_VALUE})*)`;
const EXT_OTHER = `(${ATTR}\\*[1-9][0-9]*\\*)=((?:${EXT_VALUE})*)`;
const DISPPARM = `;${SP}*(?:${REGULAR}|${EXT_INITIAL}|${EXT_OTHER})${SP}*`;
const CONDISP = `Content-Disposition:${SP}*${TOKEN}${SP}*`;
const R2_RFC2183 = new RegExp(`${BOL}${CONDISP}(?:${DISPPARM})+${EOL_}`, 'i');
const R2_DISPPARM_ALL = new RegExp(DISPPARM, 'gi');
const R2_BROKEN = new RegExp(`${BOL}${CONDISP}[^\\n]*;${SP}*filename=(${VALUE})`, 'i');

/** Rack::Auth::Digest::Params.dequote: outer quotes off, then every `\x` is `x`. */
function dequote(s: string): string {
  const m = /^"([^\n]*)"$/.exec(s);
  return (m === null ? s : m[1]!).replace(/\\([^\n])/g, '$1');
}

/** Rack 2.2's filename of a part, or undefined (then the part is a field). */
function rack2Filename(head: string): string | undefined {
  let filename: string | undefined;
  if (R2_RFC2183.test(head)) {
    const params = new Map<string, string>();
    for (const m of head.matchAll(R2_DISPPARM_ALL)) {
      const [k, v] = m[1] !== undefined ? [m[1], m[2]!] : m[3] !== undefined ? [m[3], m[4]!] : [m[5]!, m[6]!];
      params.set(k, v);
    }
    filename = params.get('filename');
    if (filename !== undefined) filename = /^"([^\n]*)"$/.exec(filename)?.[1] ?? filename;
    else {
      const star = params.get('filename*');
      if (star !== undefined) filename = star.split("'").slice(2).join("'");
    }
  } else {
    const m = R2_BROKEN.exec(head);
    if (m !== null) filename = /^"([^\n]*)"$/.exec(m[1]!)?.[1] ?? m[1]!;
  }
  return filename;
}

/** How Rack 2.2 reads a part head (the block up to and including the last header line's CRLF). */
export function rack2Reading(head: string): PartReading {
  const d = R2_DISPOSITION.exec(head);
  let name = d !== null ? dequote(d[1]!) : R2_CONTENT_ID.exec(head)?.[1];
  const filename = rack2Filename(head);
  if (name === undefined || name === '') name = filename ?? `${R2_CONTENT_TYPE.exec(head)?.[1] ?? 'text/plain'}[]`;
  return filename === undefined ? { kind: 'field', name } : { kind: 'file', name };
}

// Rack 3.2 (rack/multipart/parser.rb): header lines, with folding.
const FWS = '(?:[ \\t]+(?:\\r\\n[ \\t]+)?)?';
const HEADER_VALUE = '((?:[^\\r\\n]|\\r\\n[ \\t])*)';
const R3_DISPOSITION = new RegExp(`${BOL}Content-Disposition:${FWS}${HEADER_VALUE}`, 'i');
const R3_CONTENT_ID = new RegExp(`${BOL}Content-ID:${FWS}${HEADER_VALUE}`, 'i');
const R3_CONTENT_TYPE = new RegExp(`${BOL}Content-Type:${FWS}${HEADER_VALUE}`, 'i');
const MAX_DISPOSITION_BYTES = 1536;
const MAX_DISPOSITION_PARAMS = 16;

/** Ruby's lstrip/strip set. */
const RUBY_SPACE = /^[\0\t\n\v\f\r ]+/;
const RUBY_SPACE_END = /[\0\t\n\v\f\r ]+$/;

/** How Rack 3.2 reads a part head: any disposition type, parameters in order, the last `name` wins. */
export function rack3Reading(head: string): PartReading {
  const d = R3_DISPOSITION.exec(head);
  let name: string | undefined;
  let filename: string | undefined;
  let filenameStar: string | undefined;
  if (d !== null && d[1]!.length <= MAX_DISPOSITION_BYTES) {
    let rest = d[1]!;
    const semi = rest.indexOf(';');
    if (semi === -1) return { kind: 'error' }; // Rack: `nil + 1` raises NoMethodError
    rest = rest.slice(semi + 1);
    let count = 0;
    for (let eq = rest.indexOf('='); eq !== -1; eq = rest.indexOf('=')) {
      if (++count > MAX_DISPOSITION_PARAMS) break;
      const param = rest.slice(0, eq).replace(RUBY_SPACE, '');
      rest = rest.slice(eq + 1);
      let value = '';
      if (rest[0] === '"') {
        rest = rest.slice(1);
        for (let i = rest.search(/["\\]/); i !== -1; i = rest.search(/["\\]/)) {
          const c = rest[i]!;
          value += rest.slice(0, i);
          rest = rest.slice(i + 1);
          if (c === '"') break;
          const escaped = rest.slice(0, 1);
          rest = rest.slice(1);
          value += param === 'filename' && escaped !== '"' ? c + escaped : escaped;
        }
      } else {
        const end = rest.indexOf(';');
        if (end !== -1) {
          value = rest.slice(0, end);
          rest = rest.slice(end);
        } else {
          value = rest.replace(RUBY_SPACE, '').replace(RUBY_SPACE_END, '');
          rest = '';
        }
      }
      if (param === 'name') name = value;
      else if (param === 'filename') filename = value;
      else if (param === 'filename*') filenameStar = value;
      const next = rest.indexOf(';');
      if (next !== -1) rest = rest.slice(next + 1);
    }
  } else {
    name = R3_CONTENT_ID.exec(head)?.[1];
  }
  const file = filenameStar !== undefined ? filenameStar.split("'").slice(2).join("'") : filename;
  if (name === undefined || name === '') name = file ?? `${R3_CONTENT_TYPE.exec(head)?.[1] ?? 'text/plain'}[]`;
  return file === undefined ? { kind: 'field', name } : { kind: 'file', name };
}

/**
 * Every name a part's headers could give it, loosely: each `name=` value anywhere in the block (so
 * also inside quotes and in `filename=`, erring on the side of seeing too much), a Content-ID, and a
 * Content-Type (Rack names a nameless part `<type>[]`). Values are unquoted and unescaped.
 */
export function candidateNames(head: string): string[] {
  const out: string[] = [];
  for (const m of head.matchAll(/name\*?[ \t]*=[ \t]*("((?:\\.|[^"\\])*)"?|[^;\s"]*)/gi)) {
    const v = m[2] ?? m[1] ?? '';
    out.push(v, v.replace(/\\(.)/g, '$1'));
  }
  for (const m of head.matchAll(/(?:content-id|content-type):[ \t]*([^\r\n]*)/gi))
    out.push(m[1]!.trim().replace(/^<|>$/g, ''), m[1]!);
  return out;
}
