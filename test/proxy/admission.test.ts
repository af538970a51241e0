/** @module The upstream pool's admission as pure logic (proxy/admission.ts): lines, shares, deadlines and counts. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  UpstreamAdmission,
  type AdmissionLimits,
  type AdmissionRefusal,
  type Waiter,
} from '../../src/proxy/admission.js';

/** A waiter that records what the admission told it. */
class Probe implements Waiter {
  prevWaiter: Waiter | null = null;
  nextWaiter: Waiter | null = null;
  waitTimer: NodeJS.Timeout | null = null;
  waitOrder = 0;
  told: 'admitted' | 'expired' | null = null;
  constructor(
    readonly name: string,
    public upload: boolean,
    private readonly log: string[],
  ) {}
  admitted(): void {
    this.told = 'admitted';
    this.log.push(this.name);
  }
  expired(): void {
    this.told = 'expired';
  }
}

let limits: AdmissionLimits;
let refused: AdmissionRefusal[];
let waiting: number;
let log: string[];
const make = (connections: number): UpstreamAdmission =>
  new UpstreamAdmission(connections, () => limits, {
    refused: (r) => void refused.push(r),
    waiting: (d) => void (waiting += d),
  });

beforeEach(() => {
  vi.useFakeTimers();
  limits = { upstreamQueueTimeout: 1000, maxUpstreamConnectionsPerIp: 2 };
  refused = [];
  waiting = 0;
  log = [];
});
afterEach(() => vi.useRealTimers());

describe('UpstreamAdmission', () => {
  it('gives connections at once while it has them, then keeps the others in line, oldest first', () => {
    const a = make(2);
    const [p1, p2, p3, p4] = ['p1', 'p2', 'p3', 'p4'].map((n) => new Probe(n, false, log));
    expect(a.acquire(p1!)).toBe(true);
    expect(a.acquire(p2!)).toBe(true);
    expect(a.acquire(p3!)).toBe(false);
    expect(a.acquire(p4!)).toBe(false);
    expect(waiting).toBe(2);
    a.release(false);
    expect(log).toEqual(['p3']);
    a.release(false);
    expect(log).toEqual(['p3', 'p4']);
    expect(waiting).toBe(0);
  });

  it('lets bodies still arriving hold half the connections, and others pass them in line', () => {
    const a = make(4);
    const uploads = ['u1', 'u2', 'u3'].map((n) => new Probe(n, true, log));
    expect(uploads.map((u) => a.acquire(u))).toEqual([true, true, false]);
    const plain = new Probe('p1', false, log);
    expect(a.acquire(plain)).toBe(true);
    // A freed plain connection goes to no upload while the uploads' share is full.
    a.release(false);
    expect(log).toEqual([]);
    a.release(true);
    expect(log).toEqual(['u3']);
  });

  it('moves a waiting upload whose body has arrived to the other line, keeping its place', () => {
    const a = make(2);
    expect(a.acquire(new Probe('u0', true, log))).toBe(true);
    expect(a.acquire(new Probe('p0', false, log))).toBe(true);
    const u1 = new Probe('u1', true, log);
    const p1 = new Probe('p1', false, log);
    expect(a.acquire(u1)).toBe(false);
    expect(a.acquire(p1)).toBe(false);
    a.bodyArrived(u1, false);
    expect(u1.upload).toBe(false);
    a.release(false);
    expect(log).toEqual(['u1']);
    a.release(false);
    expect(log).toEqual(['u1', 'p1']);
  });

  it('frees a place in the uploads’ share when a connected upload’s body has arrived', () => {
    const a = make(4);
    const u1 = new Probe('u1', true, log);
    expect(a.acquire(u1)).toBe(true);
    expect(a.acquire(new Probe('u2', true, log))).toBe(true);
    const u3 = new Probe('u3', true, log);
    expect(a.acquire(u3)).toBe(false);
    a.bodyArrived(u1, true);
    expect(log).toEqual(['u3']);
    // u1 now gives back a plain connection.
    a.release(u1.upload);
    expect(a.acquire(new Probe('p', false, log))).toBe(true);
  });

  it('expires a waiter after upstreamQueueTimeout, counts it, and a cancelled waiter never hears of it', () => {
    const a = make(1);
    expect(a.acquire(new Probe('held', false, log))).toBe(true);
    const late = new Probe('late', false, log);
    const gone = new Probe('gone', false, log);
    a.acquire(late);
    a.acquire(gone);
    a.cancel(gone);
    vi.advanceTimersByTime(999);
    expect(late.told).toBeNull();
    vi.advanceTimersByTime(1);
    expect(late.told).toBe('expired');
    expect(gone.told).toBeNull();
    expect(refused).toEqual(['queue_timeout']);
    expect(waiting).toBe(0);
    a.release(false);
    expect(log).toEqual([]);
  });

  it('counts each client up to its cap, and not at all with 0', () => {
    const a = make(8);
    expect([a.enter('10.0.0.1'), a.enter('10.0.0.1'), a.enter('10.0.0.1'), a.enter('10.0.0.2')]).toEqual([
      'counted',
      'counted',
      'refused',
      'counted',
    ]);
    expect(refused).toEqual(['per_ip_cap']);
    a.leave('10.0.0.1');
    expect(a.enter('10.0.0.1')).toBe('counted');
    a.leave('10.0.0.1');
    a.leave('10.0.0.1');
    a.leave('10.0.0.2');
    expect(a.clientsHolding).toBe(0);
    limits = { ...limits, maxUpstreamConnectionsPerIp: 0 };
    for (let i = 0; i < 100; i++) expect(a.enter('10.0.0.1')).toBe('uncapped');
    expect(a.clientsHolding).toBe(0);
  });

  it('keeps each client’s count exact across a reload that sets or lifts the cap', () => {
    const a = make(8);
    expect(a.enter('10.0.0.1')).toBe('counted');
    limits = { ...limits, maxUpstreamConnectionsPerIp: 0 };
    expect(a.enter('10.0.0.1')).toBe('uncapped'); // gives nothing back later
    limits = { ...limits, maxUpstreamConnectionsPerIp: 2 };
    expect(a.enter('10.0.0.1')).toBe('counted');
    expect(a.enter('10.0.0.1')).toBe('refused');
    a.leave('10.0.0.1');
    a.leave('10.0.0.1');
    expect(a.clientsHolding).toBe(0);
  });

  it('takes the release of an exchange that ends as it is admitted without losing count', () => {
    const a = make(1);
    expect(a.acquire(new Probe('held', false, log))).toBe(true);
    // Ends at once, as a request undici refuses synchronously does.
    const quick: Waiter = Object.assign(new Probe('quick', false, log), { admitted: () => a.release(false) });
    const next = new Probe('next', false, log);
    a.acquire(quick);
    a.acquire(next);
    a.release(false);
    expect(log).toEqual(['next']);
    expect(a.waiting).toBe(0);
  });
});
