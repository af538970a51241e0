/**
 * @module A rule's `per:` compiled against the kind table: its syntax check (the schema's), its tag for a
 * request (the bucket's hash tag and the ban or in-flight key), the tags an operator's value stands for,
 * and how `explain` shows it. A key is a list of parts, each of one kind: today one part; a composite
 * (`per: [KIND, KIND]`) is more parts of the same table, with the same operations.
 */
import { KIND_BY_TAG, KIND_NAMES, KINDS, NO_NAME, type KeyFacts, type KeyKind, type KindArg, type KindName, type TypedContext } from './kinds.js';

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
  /** The tag of this request's bucket (`ip:203.0.113.7`, `global`), or null: the request lacks the key. */
  tag(facts: KeyFacts): string | null;
}

/** The hint of a `per:` value no kind reads, listing the table's syntaxes. */
export const PER_HINT = KIND_NAMES.map((k) => KINDS[k].syntax).join(', ');

/** The shape of a `per:` value (the JSON Schema's pattern): a kind, with `:NAME` where it takes one. */
export const PER_PATTERN = new RegExp(`^(${KIND_NAMES.map((k) => (KINDS[k].compileName === null ? k : `${k}:.*`)).join('|')})$`, 's');

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
  /** `ip:`: the tag without its value, built once. */
  private readonly prefix: string;

  constructor(private readonly part: KeyPart) {
    this.parts = Object.freeze([part]);
    this.label = part.label;
    this.needs = part.spec.needs;
    this.overrideKeys = part.spec.overrideKeys;
    this.prefix = `${part.spec.tag}:`;
  }

  tag(facts: KeyFacts): string | null {
    const value = this.part.spec.read(this.part.arg, facts);
    if (value === null) return null;
    return value === '' ? this.part.spec.tag : this.prefix + value;
  }
}

/** The part `per` names, or the error (as the schema reports it). */
export function parsePart(per: string): KeyPart | string {
  const colon = per.indexOf(':');
  const kind = (colon < 0 ? per : per.slice(0, colon)) as KindName;
  const spec: KeyKind | undefined = Object.prototype.hasOwnProperty.call(KINDS, kind) ? KINDS[kind] : undefined;
  if (spec === undefined || colon < 0 !== (spec.compileName === null)) return `must be one of ${PER_HINT} (got ${JSON.stringify(per)})`;
  if (spec.compileName === null) return Object.freeze({ kind, spec, arg: NO_NAME, label: kind });
  const arg = spec.compileName(per.slice(colon + 1), per);
  if (typeof arg === 'string') return arg;
  return Object.freeze({ kind, spec, arg, label: `${kind}:${arg.name}` });
}

/** Compiles a `per:` value the schema has accepted; throws on one it would refuse. */
export function compileKey(per: string): RuleKey {
  const part = parsePart(per);
  if (typeof part === 'string') throw new Error(part);
  return Object.freeze(new SingleKey(part));
}

/** The schema's check of a `per:` value of PER_PATTERN's shape (the NAME): its error, or null. */
export function perError(per: string): string | null {
  const part = parsePart(per);
  return typeof part === 'string' ? part : null;
}

/**
 * The tags an operator's value stands for under `key` (the first as the admin API names the bucket),
 * or the hint of what it must be.
 */
export function typedTags(key: RuleKey, text: string, ctx: TypedContext): readonly string[] | { readonly hint: string } {
  const part = key.parts[0]!;
  const values = part.spec.typed(part.arg, text, ctx);
  if (values.length === 0) return { hint: part.spec.typedHint(ctx) };
  return values.map((v) => tagOf(part.spec, v));
}

/**
 * A bucket key or ban key as an operator knows the client, from the key alone (`sign-up:{ip:203.0.113.7}`
 * → `203.0.113.7`, `{acct:a:42}` → `account 42`, a digest → its first 16 hex digits); an override's
 * bucket says so. A tag no kind has is shown as it is.
 */
export function displayKey(key: string): string {
  const open = key.indexOf('{');
  const tag = open < 0 ? key : key.slice(open + 1, key.endsWith('}') ? -1 : undefined);
  const colon = tag.indexOf(':');
  const spec = KIND_BY_TAG.get(colon < 0 ? tag : tag.slice(0, colon));
  const shown = spec === undefined ? tag : spec.display(colon < 0 ? '' : tag.slice(colon + 1));
  const override = open < 0 ? null : /:o(\d+):$/.exec(key.slice(0, open));
  return override ? `${shown} (override ${override[1]})` : shown;
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
export function keyWhat(key: RuleKey): string {
  return key.parts.map((p) => p.spec.what(p.arg)).join(' and ');
}

/** How `explain` shows this request's key under `key` (its tag `tag`, from `key.tag`). */
export function keyShown(key: RuleKey, facts: KeyFacts, tag: string): string {
  const part = key.parts[0]!;
  return part.spec.shown(part.arg, facts, tagValue(tag));
}
