/**
 * @module A rule's `per:` compiled against the kind table: its syntax check (the schema's), its tag for a
 * request (the bucket's hash tag and the ban or in-flight key), the tags an operator's value stands for,
 * and how `explain` shows it. A key is a list of parts, each of one kind: today one part; a composite
 * (`per: [KIND, KIND]`) is more parts of the same table, with the same operations.
 */
import {
  KIND_BY_TAG,
  KIND_NAMES,
  KINDS,
  NO_NAME,
  type KeyFacts,
  type KeyKind,
  type KindArg,
  type KindName,
  type TypedContext,
} from './kinds.js';
import { tagMemoOf, type TagMemo } from './tag-memo.js';

/** One part of a key: a kind and its compiled name. */
export interface KeyPart {
  readonly kind: KindName;
  readonly spec: KeyKind;
  readonly arg: KindArg;
  /** `per:` as written for this part, the name normalized (`header:x-app-id`). */
  readonly label: string;
}

/** A rule's compiled `per:`. */
export interface RuleKey {
  /** `per:` as written, names normalized (`header:x-app-id`, `param:user[email]`). */
  readonly label: string;
  readonly parts: readonly KeyPart[];
  /** What reading it needs from a request (NEED flags). */
  readonly needs: number;
  /** Whether `overrides[].keys` may name its values. */
  readonly overrideKeys: boolean;
  /** `missing: ip`: a request lacking a part counts per IP instead of skipping the rule. */
  readonly missingIp: boolean;
  /** The tag of this request's bucket (`ip:203.0.113.7`, `global`), or null: the request lacks the key. */
  tag(facts: KeyFacts): string | null;
}

/** The hint of a `per:` value no kind reads, listing the table's syntaxes. */
export const PER_HINT = KIND_NAMES.map((k) => KINDS[k].syntax).join(', ');

/** The shape of a `per:` value (the JSON Schema's pattern): a kind, with `:NAME` where it takes one. */
export const PER_PATTERN = new RegExp(
  `^(${KIND_NAMES.map((k) => (KINDS[k].compileName === null ? k : `${k}:.*`)).join('|')})$`,
  's',
);

/** What each kind means, for the schema's description: `ip (…), account (…)`. */
export const PER_MEANINGS = KIND_NAMES.map((k) => `${KINDS[k].syntax}: ${KINDS[k].meaning}`).join(' ');

/** The tag of a key value: `ip:203.0.113.7`; the global bucket's is `global`. */
export function tagOf(spec: KeyKind, value: string): string {
  return value === '' ? spec.tag : `${spec.tag}:${value}`;
}

/** The key value of a one-part tag (tagOf's inverse): `acct:a:42` → `a:42`, `global` → ''. */
export function tagValue(tag: string): string {
  const colon = tag.indexOf(':');
  return colon < 0 ? '' : tag.slice(colon + 1);
}

class SingleKey implements RuleKey {
  readonly parts: readonly KeyPart[];
  readonly label: string;
  readonly needs: number;
  readonly overrideKeys: boolean;
  readonly missingIp = false;
  /** Tags by value for this kind (`ip:` and the value). */
  private readonly tags: TagMemo;
  /**
   * The last value read and its tag: a client seen again (its value the same string, from the identity
   * caches) gets the same tag string, so the bucket built from it can be reused too (policy.ts bucketsFor).
   * A holder of its own: the key is frozen (shallowly), its memo is not.
   */
  private readonly last: { value: string | null; tag: string } = { value: null, tag: '' };

  constructor(private readonly part: KeyPart) {
    this.parts = Object.freeze([part]);
    this.label = part.label;
    this.needs = part.spec.needs;
    this.overrideKeys = part.spec.overrideKeys;
    this.tags = tagMemoOf(`${part.spec.tag}:`);
  }

  tag(facts: KeyFacts): string | null {
    const value = this.part.spec.read(this.part.arg, facts);
    if (value === null) return null;
    const last = this.last;
    if (value === last.value) return last.tag;
    last.value = value;
    return (last.tag = value === '' ? this.part.spec.tag : this.tags.of(value));
  }
}

/** Between the parts of a composite tag (`sig:mastodon.example|ip:203.0.113.7`): no kind's value holds it. */
export const PART_SEPARATOR = '|';

/** A part's tag under a `missing: ip` rule when the request lacks the part: the client's IP. */
const ipTag = (facts: KeyFacts): string => tagOf(KINDS.ip, facts.ipKey);

/**
 * `per: [KIND, KIND, …]` (or one kind with `missing: ip`): one bucket per combination of the parts'
 * values, the tag their tags joined. A part the request lacks skips the rule, or with `missing: ip`
 * counts the client's IP in its place (once: a key that has an ip part already keeps that one).
 */
class CompositeKey implements RuleKey {
  readonly label: string;
  readonly needs: number;
  readonly overrideKeys: boolean;
  /** Whether a part is the client's IP (then a missing part adds nothing under `missing: ip`). */
  private readonly hasIp: boolean;

  constructor(
    readonly parts: readonly KeyPart[],
    readonly missingIp: boolean,
  ) {
    this.label = parts.length === 1 ? parts[0]!.label : `[${parts.map((p) => p.label).join(', ')}]`;
    this.needs = parts.reduce((n, p) => n | p.spec.needs, 0);
    this.overrideKeys = parts.length > 1 || parts[0]!.spec.overrideKeys;
    this.hasIp = parts.some((p) => p.kind === 'ip');
  }

  tag(facts: KeyFacts): string | null {
    let tag = '';
    for (let i = 0; i < this.parts.length; i++) {
      const part = this.parts[i]!;
      const value = part.spec.read(part.arg, facts);
      let t: string;
      if (value !== null) t = tagOf(part.spec, value);
      else if (!this.missingIp) return null;
      else if (this.hasIp) continue;
      else t = ipTag(facts);
      tag = tag === '' ? t : tag + PART_SEPARATOR + t;
    }
    return tag;
  }
}

/** The part `per` names, or the error (as the schema reports it). */
export function parsePart(per: string): KeyPart | string {
  const colon = per.indexOf(':');
  const kind = (colon < 0 ? per : per.slice(0, colon)) as KindName;
  const spec: KeyKind | undefined = Object.prototype.hasOwnProperty.call(KINDS, kind) ? KINDS[kind] : undefined;
  if (spec === undefined || colon < 0 !== (spec.compileName === null))
    return `must be one of ${PER_HINT} (got ${JSON.stringify(per)})`;
  if (spec.compileName === null) return Object.freeze({ kind, spec, arg: NO_NAME, label: kind });
  const arg = spec.compileName(per.slice(colon + 1), per);
  if (typeof arg === 'string') return arg;
  return Object.freeze({ kind, spec, arg, label: `${kind}:${arg.name}` });
}

/**
 * Compiles a `per:` value the schema has accepted (one kind, or a list of two or more); throws on one it
 * would refuse. `missing: 'ip'`: a request lacking a part counts per IP instead of skipping the rule.
 */
export function compileKey(per: string | readonly string[], missing?: 'ip' | 'skip'): RuleKey {
  const parts = (typeof per === 'string' ? [per] : per).map((p) => {
    const part = parsePart(p);
    if (typeof part === 'string') throw new Error(part);
    return part;
  });
  if (parts.length === 1 && missing !== 'ip') return Object.freeze(new SingleKey(parts[0]!));
  return Object.freeze(new CompositeKey(Object.freeze(parts), missing === 'ip'));
}

/** The error of a composite `per:` list (the schema's check beside each part's own), or null. */
export function compositeError(per: readonly string[]): string | null {
  if (per.length < 2) return 'a composite key lists two or more kinds (write one kind without brackets)';
  const labels = per.map((p) => {
    const part = parsePart(p);
    return typeof part === 'string' ? p : part.label;
  });
  const twice = labels.find((l, i) => labels.indexOf(l) !== i);
  if (twice !== undefined) return `lists ${twice} twice`;
  if (labels.includes('global')) return 'global is one bucket for everyone: it adds nothing to a composite key';
  return null;
}

/** The schema's check of a `per:` value of PER_PATTERN's shape (the NAME): its error, or null. */
export function perError(per: string): string | null {
  const part = parsePart(per);
  return typeof part === 'string' ? part : null;
}

/**
 * The tags an operator's value stands for under `key` (the first as the admin API names the bucket),
 * or the hint of what it must be. A composite key takes one value per part, in order (a tuple).
 */
export function typedTags(
  key: RuleKey,
  text: string | readonly string[],
  ctx: TypedContext,
): readonly string[] | { readonly hint: string } {
  const texts = typeof text === 'string' ? [text] : text;
  if (texts.length !== key.parts.length) return { hint: tupleHint(key, ctx) };
  let tags: string[] = [''];
  for (let i = 0; i < key.parts.length; i++) {
    const part = key.parts[i]!;
    const values = part.spec.typed(part.arg, texts[i]!, ctx);
    if (values.length === 0) return { hint: key.parts.length === 1 ? part.spec.typedHint(ctx) : tupleHint(key, ctx) };
    tags = tags.flatMap((t) => values.map((v) => (t === '' ? '' : t + PART_SEPARATOR) + tagOf(part.spec, v)));
  }
  return tags;
}

/** What a key's value is, part by part: "the signing server's domain, then an IP address". */
function tupleHint(key: RuleKey, ctx: TypedContext): string {
  if (key.parts.length === 1) return key.parts[0]!.spec.typedHint(ctx);
  return `one value per part of ${key.label}: ${key.parts.map((p) => p.spec.typedHint(ctx)).join(', then ')}`;
}

/**
 * A bucket key or ban key as an operator knows the client, from the key alone (`sign-up:{ip:203.0.113.7}`
 * → `203.0.113.7`, `{acct:a:42}` → `account 42`, a digest → its first 16 hex digits); an override's
 * bucket says so. A tag no kind has is shown as it is.
 */
export function displayKey(key: string): string {
  const open = key.indexOf('{');
  const tag = open < 0 ? key : key.slice(open + 1, key.endsWith('}') ? -1 : undefined);
  const shown = tag.split(PART_SEPARATOR).map(displayPart).join(' + ');
  const override = open < 0 ? null : /:o(\d+):$/.exec(key.slice(0, open));
  return override ? `${shown} (override ${override[1]})` : shown;
}

/** One part of a tag as an operator knows it (`ip:203.0.113.7` → `203.0.113.7`). */
function displayPart(tag: string): string {
  const colon = tag.indexOf(':');
  const spec = KIND_BY_TAG.get(colon < 0 ? tag : tag.slice(0, colon));
  return spec === undefined ? tag : spec.display(colon < 0 ? '' : tag.slice(colon + 1));
}

/** Whether a key is the client's IP alone (a ban on it refuses the client on every route). */
export function isClientIpKey(key: RuleKey): boolean {
  return key.parts.length === 1 && key.parts[0]!.spec.operatorNames === 'client-ip';
}

/** The request parameters a key reads (the body peek looks for them). */
export function keyParams(key: RuleKey): string[] {
  const names: string[] = [];
  for (const p of key.parts) {
    const name = p.spec.wantsParam(p.arg);
    if (name !== null) names.push(name);
  }
  return names;
}

/** How `explain` names what a request lacks for this key ("header x-app-id"). */
export function keyWhat(key: RuleKey, facts?: KeyFacts): string {
  const lacking = facts === undefined ? key.parts : key.parts.filter((p) => p.spec.read(p.arg, facts) === null);
  return (lacking.length > 0 ? lacking : key.parts).map((p) => p.spec.what(p.arg)).join(' and ');
}

/** How `explain` shows this request's key under `key` (its tag `tag`, from `key.tag`), part by part. */
export function keyShown(key: RuleKey, facts: KeyFacts, tag: string): string {
  if (key.parts.length === 1 && !tag.startsWith(`${KINDS.ip.tag}:`))
    return key.parts[0]!.spec.shown(key.parts[0]!.arg, facts, tagValue(tag));
  const shown: string[] = [];
  const missing: string[] = [];
  for (const p of key.parts) {
    const value = p.spec.read(p.arg, facts);
    if (value !== null) shown.push(p.spec.shown(p.arg, facts, value));
    else missing.push(p.spec.what(p.arg));
  }
  if (missing.length === 0) return shown.join(' + ');
  // The parts counted per IP in their place (`missing: ip`) say so; a key with an ip part shows that one.
  if (!key.parts.some((q) => q.kind === 'ip')) shown.push(KINDS.ip.shown(NO_NAME, facts, facts.ipKey));
  return `${shown.join(' + ')} (no ${missing.join(' and ')}: missing: ip)`;
}
