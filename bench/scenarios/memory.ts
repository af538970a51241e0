/**
 * @module Scenario `memory`: bytes per distinct client, measured in its own process by bench/memory-per-client.ts.
 */
import { runScript } from '../lib/procs.js';
import type { PerClientResult } from '../lib/types.js';

/** bench/memory-per-client.ts: what a distinct client costs the memory store and the request path in front of it. */
export async function benchPerClient(): Promise<PerClientResult> {
  const clients = 150_000;
  process.stdout.write(`memory per distinct client (${clients.toLocaleString('en')} clients, in-process, full GC) … `);
  const r = await runScript<PerClientResult>('bench/memory-per-client.ts', { clients }, 180_000);
  process.stdout.write(`${r.rssBytesPerClient} B RSS, ${r.heapBytesPerClient} B heap + external; ${r.heapBytesPerClientAfterExpiry} B left after expiry\n`);
  return r;
}
