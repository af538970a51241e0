/**
 * @module The tags of key values seen lately, one table per kind: a client seen again gets its tag as the
 * same flat string, so the comparisons and hashes of the bucket memos that follow it (pipeline/policy.ts
 * specOf, recent-buckets.ts) find it flat and hashed.
 */
/** Values whose tags a kind keeps (TagMemo): a flood's clients taking turns, well past a thousand. */
export const TAG_MEMO_MAX = 4096;

/**
 * The tags of values seen lately, one table per kind (a tag is the kind's prefix and the value, whatever
 * the rule): a client seen again gets its tag as the same flat string, whose hash the bucket memos have
 * already computed. Built afresh, `prefix + value` past 12 characters is a cons string, which the next
 * comparison with `===` and the next hash flatten in the runtime (~1.5k instructions per request with two
 * ip rules and clients taking turns). Emptied when full: O(size), once per TAG_MEMO_MAX new values.
 */
export class TagMemo {
  private readonly tags = new Map<string, string>();
  constructor(
    private readonly prefix: string,
    private readonly max = TAG_MEMO_MAX,
  ) {}

  /** Values kept (at most `max`). */
  get size(): number {
    return this.tags.size;
  }

  of(value: string): string {
    let tag = this.tags.get(value);
    if (tag === undefined) {
      if (this.tags.size >= this.max) this.tags.clear();
      // join writes one flat string where `+` would make a cons.
      tag = [this.prefix, value].join('');
      this.tags.set(value, tag);
    }
    return tag;
  }
}

const TAG_MEMOS = new Map<string, TagMemo>();
/** The memo of one kind's prefix (`ip:`), shared by every rule and snapshot: a tag depends on nothing else. */
export function tagMemoOf(prefix: string): TagMemo {
  let memo = TAG_MEMOS.get(prefix);
  if (memo === undefined) TAG_MEMOS.set(prefix, (memo = new TagMemo(prefix)));
  return memo;
}
