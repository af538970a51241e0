/**
 * @module Scenario `memory`: bytes per distinct client, measured in its own process by
 * bench/memory-per-client.ts (the store and the request path in front of it), and through the real
 * gateway with the Mastodon table by bench/memory-gateway.ts (the figure store.maxKeys's default rests on).
 */
import { runScript } from '../lib/procs.js';
import type { GatewayMemoryResult, PerClientResult } from '../lib/types.js';

/** bench/memory-per-client.ts: what a distinct client costs the memory store and the request path in front of it. */
export async function benchPerClient(): Promise<PerClientResult> {
  const clients = 150_000;
  process.stdout.write(`memory per distinct client (${clients.toLocaleString('en')} clients, in-process, full GC) … `);
  const r = await runScript<PerClientResult>('bench/memory-per-client.ts', { clients }, 180_000);
  process.stdout.write(
    `${r.rssBytesPerClient} B RSS, ${r.heapBytesPerClient} B heap + external; ${r.heapBytesPerClientAfterExpiry} B left after expiry\n`,
  );
  const gatewayClients = 40_000;
  process.stdout.write(
    `memory per distinct client through the gateway (${gatewayClients.toLocaleString('en')} IPv6 /64s, Mastodon table, full GC) … `,
  );
  const g = await runScript<GatewayMemoryResult>('bench/memory-gateway.ts', { clients: gatewayClients }, 300_000);
  process.stdout.write(
    `${g.rssBytesPerClient} B RSS a client (${g.bucketsPerClient} buckets); a bucket ${g.rssBytesPerBucket} B RSS, ${g.heapBytesPerBucket} B heap + external\n`,
  );
  return { ...r, gateway: g };
}
