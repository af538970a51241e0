/**
 * @module The first stage: `block.ips`, then the guard's runtime blocks and IP bans — refused 403 before
 * anything else (never counted, never forwarded). Banned and blocked clients get Mastodon's IP-block
 * answer: nothing tells them which. A guard without runtime blocks or IP bans costs one check.
 */
import { ERROR_BODIES } from '../http/errors.js';
import { ipBanKey } from '../guard/rules.js';
import { catalogued, refusal, type Decision } from './decision.js';
import { GO_ON, type Stage } from './drive.js';

/** `block.ips`: Mastodon's IP blocks answer 403 with this body. */
const BLOCKED: Decision = Object.freeze(catalogued('FORBIDDEN', 'blocked'));
export const BLOCKED_RUNTIME: Decision = Object.freeze(refusal(403, ERROR_BODIES.FORBIDDEN, 'blocked'));
export const BANNED: Decision = Object.freeze(refusal(403, ERROR_BODIES.FORBIDDEN, 'banned'));

export const blockStage: Stage = {
  name: 'blocks',
  run(ctx, s) {
    const v = s.view;
    const { guard } = ctx;
    // Decided before anything else: a blocked client is never counted, never forwarded.
    if (v.policy.blockIps !== null && v.policy.blockIps.contains(v.client.address)) {
      guard?.metrics?.blockedRequests.labels('config').inc();
      return BLOCKED;
    }
    if (guard === undefined || !guard.hasEarly()) return GO_ON;
    const blocks = guard.runtimeBlocks();
    if (blocks !== null && blocks.contains(v.client.address)) {
      guard.metrics?.blockedRequests.labels('runtime').inc();
      return BLOCKED_RUNTIME;
    }
    const ban = guard.bans.ipBan(ipBanKey(v.client.key));
    if (ban !== null && !v.exempt(ctx.runtimeExempt)) {
      guard.metrics?.bannedRequests.labels(ban).inc();
      return BANNED;
    }
    return GO_ON;
  },
};
