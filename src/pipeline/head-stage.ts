/**
 * @module The checks before anything is read: the drain, the path (normalized), headers given twice that
 * Rails would read one way and we another, a `Connection` naming a framing header, the declared size —
 * then the one match of the route's rules. Refused here, a request spends nobody's tokens.
 */
import { GATEWAY_ERRORS, badPathBody } from '../http/errors.js';
import { connectionListed, namesFraming } from '../proxy/hop-by-hop.js';
import { duplicatedHeader } from '../rails/index.js';
import { normalizePath } from '../routing/index.js';
import { catalogued, refusal, type Decision } from './decision.js';
import { GO_ON, type Stage } from './drive.js';

export const SHUTTING_DOWN: Decision = Object.freeze(catalogued('SHUTTING_DOWN'));
export const TOO_LARGE: Decision = Object.freeze(catalogued('PAYLOAD_TOO_LARGE'));
const DUPLICATE_CONTENT_TYPE: Decision = Object.freeze(catalogued('DUPLICATE_CONTENT_TYPE'));
const DUPLICATE_AUTHORIZATION: Decision = Object.freeze(catalogued('DUPLICATE_AUTHORIZATION'));
/** `Connection` naming a framing header: the hop-by-hop strip would change where the request ends. */
export const CONNECTION_FRAMING: Decision = Object.freeze(catalogued('CONNECTION_NAMES_FRAMING'));
/** `block.ips`: Mastodon's IP blocks answer 403 with this body. */
export const BLOCKED: Decision = Object.freeze(catalogued('FORBIDDEN', 'blocked'));

export const headStage: Stage = {
  name: 'head',
  run(ctx, s) {
    const v = s.view;
    if (ctx.drain?.draining === true) return SHUTTING_DOWN;
    const target = normalizePath(v.path);
    if (!target.ok) return refusal(GATEWAY_ERRORS.BAD_PATH.status, badPathBody(target.reason));
    v.path = target.path;
    v.query = target.query;
    const { req, policy } = v;
    const dup = duplicatedHeader(req.rawHeaders);
    if (dup !== null) return dup === 'content-type' ? DUPLICATE_CONTENT_TYPE : DUPLICATE_AUTHORIZATION;
    if (namesFraming(connectionListed(req.headers.connection))) return CONNECTION_FRAMING;
    // Refused before counting: a request that will not be served must not spend anyone's tokens.
    const maxBody = policy.maxBodySize(v.method, v.path);
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > maxBody) return TOO_LARGE;
    s.maxBody = maxBody;
    v.rules = policy.routeRules.of(v.method, v.path);
    return GO_ON;
  },
};
