/** The rate-limited warnings of store trouble: one line per node per interval, and every event counted in one. */
import { describe, expect, it } from 'vitest';
import { StoreWarnings } from '../../src/limiter/store-warnings.js';
import type { StoreLog } from '../../src/limiter/types.js';
import { FakeClock } from '../support/clock.js';

interface Line {
  msg: string;
  obj: { node: string; errors: Record<string, number>; fallback: Record<string, number> };
}

function setup(): { w: StoreWarnings; clock: FakeClock; lines: Line[] } {
  const lines: Line[] = [];
  const log: StoreLog = { warn: (obj, msg) => lines.push({ msg, obj: obj as Line['obj'] }), info: () => {} };
  const clock = new FakeClock();
  return { w: new StoreWarnings({ log, where: { store: 'redis' }, clock }), clock, lines };
}

describe('store warnings', () => {
  it('write the first trouble at once with the decision it caused, then at most one line per node per 10 s, counting every event', () => {
    const { w, clock, lines } = setup();
    w.error('a:1', 'timeout');
    w.decided('a:1', 'admitted');
    clock.advance(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]!.msg).toBe(
      'store node a:1: 1 timeout, 1 decision by the fault policy (1 admitted, 0 refused, 0 answered 503) (at most one such line per 10 s)',
    );
    // 25 s of trouble, 4 events a second.
    for (let t = 0; t < 100; t++) {
      clock.advance(250);
      w.error('a:1', t % 2 === 0 ? 'timeout' : 'connection');
      w.decided('a:1', t % 5 === 0 ? 'refused' : 'admitted');
    }
    clock.advance(60_000);
    expect(lines.length).toBeLessThanOrEqual(4); // at 0, 10, 20 and 30 s
    const sum = (f: (l: Line) => number): number => lines.reduce((n, l) => n + f(l), 0);
    expect(sum((l) => (l.obj.errors.timeout ?? 0) + (l.obj.errors.connection ?? 0))).toBe(101);
    expect(sum((l) => l.obj.fallback.admitted! + l.obj.fallback.refused!)).toBe(101);
    expect(sum((l) => l.obj.fallback.refused!)).toBe(20);
    expect(clock.pendingTimers).toBe(0); // quiet: no timer left
  });

  it('keep nodes apart, and start afresh after a quiet interval', () => {
    const { w, clock, lines } = setup();
    w.error('a:1', 'timeout');
    w.error('b:2', 'connection');
    w.error('b:2', 'connection');
    clock.advance(0);
    expect(lines.map((l) => [l.obj.node, l.msg.split(': ')[1]])).toEqual([
      ['a:1', '1 timeout (at most one such line per 10 s)'],
      ['b:2', '2 connection errors (at most one such line per 10 s)'],
    ]);
    clock.advance(30_000);
    w.decided('a:1', 'unavailable');
    clock.advance(0);
    expect(lines).toHaveLength(3);
    expect(lines[2]!.obj.fallback).toEqual({ admitted: 0, refused: 0, unavailable: 1 });
  });
});
