/** @module What the admin listener serves from: the policy, the store, the guard, the credentials, the status page's sources. */
import type { FleetSketches } from '../fleet/fleet.js';
import type { Guard } from '../guard/guard.js';
import type { Store, StoreLog } from '../limiter/types.js';
import type { RequestPolicy } from '../pipeline/policy.js';
import type { StatusSources } from './status-data.js';
import type { AdminCredential } from './token.js';

export interface AdminApi {
  policy: () => RequestPolicy;
  store: Store;
  /** Runtime blocks, exemptions, bans and triage (absent: those endpoints answer 404). */
  guard?: Guard;
  /** The admin tokens in force (see loadAdminCredentials), read per request so a reload can rotate them. */
  credentials: () => readonly AdminCredential[];
  /** Whether the listener accepts connections from this host only (see isLoopbackListen). */
  loopbackOnly: boolean;
  /** The Host names this listener answers to besides admin.allowedHosts (see listenerNames). */
  names: ReadonlySet<string>;
  /** The status page's live sources (absent: `/`, `/status` and `/status.json` answer 404). */
  status?: StatusSources;
  /** Where the audit line of each admin write goes (absent: none is written). */
  log?: StoreLog;
  /** The replicas sharing the store (absent: a memory store, /admin/limited is this process's). */
  fleet?: FleetSketches | undefined;
}
