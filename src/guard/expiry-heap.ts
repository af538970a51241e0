/** @module A binary min-heap of (expiry, name) pairs: the guard's entries in the order they end, O(log n) a push or pop. */

export class ExpiryHeap {
  private readonly times: number[] = [];
  private readonly names: string[] = [];

  get size(): number {
    return this.times.length;
  }

  /** The earliest expiry, or Infinity when empty. */
  peek(): number {
    return this.times.length === 0 ? Infinity : this.times[0]!;
  }

  push(time: number, name: string): void {
    const { times, names } = this;
    let i = times.length;
    times.push(time);
    names.push(name);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (times[parent]! <= time) break;
      times[i] = times[parent]!;
      names[i] = names[parent]!;
      i = parent;
    }
    times[i] = time;
    names[i] = name;
  }

  /** Removes the earliest pair; its name. Call only when not empty. */
  pop(): string {
    const { times, names } = this;
    const top = names[0]!;
    const lastTime = times.pop()!;
    const lastName = names.pop()!;
    const n = times.length;
    if (n === 0) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const c = l + 1 < n && times[l + 1]! < times[l]! ? l + 1 : l;
      if (times[c]! >= lastTime) break;
      times[i] = times[c]!;
      names[i] = names[c]!;
      i = c;
    }
    times[i] = lastTime;
    names[i] = lastName;
    return top;
  }

  clear(): void {
    this.times.length = 0;
    this.names.length = 0;
  }
}
