/**
 * @module One request as the pipeline sees it, each fact found once: the peer and the client behind it
 * (one X-Forwarded-For walk), the method Rails routes by, the normalized path and query, the rules of
 * that route (one match), the token Doorkeeper reads, and the rule facts. screen() fills it; the guard
 * stage, decide and the access log read it.
 */
import type http from 'node:http';
import type { CompiledRule } from '../config/types.js';
import type { ClientIp, Peer } from '../identity/index.js';
import { firstHeader } from '../http/message.js';
import { RequestFacts, type BodyParams } from '../rails/index.js';
import { NO_RULES } from './decision.js';
import type { RequestPolicy } from './policy.js';

export class RequestView {
  private clientIp: ClientIp | undefined;
  private ruleFacts: RequestFacts | undefined;
  /** The method Rails routes by (Rack's override applied once the params are read). */
  method: string;
  /** The normalized path (the raw target until it is normalized). */
  path: string;
  /** The query string with its `?` (or ''). */
  query = '';
  /** The limit rules of (method, path): matched once per routed method. */
  matched: readonly CompiledRule[] = NO_RULES;
  /** The token Doorkeeper will authenticate the request with, wherever it was sent; null: none. */
  token: string | null = null;
  /** The `param:` names' values (query and body together), by name as written. */
  values: BodyParams | undefined;
  /** Every wanted name the body peek found, the body alone (for `when.query`). */
  form: BodyParams | undefined;

  constructor(
    readonly req: http.IncomingMessage,
    readonly policy: RequestPolicy,
    readonly peer: Peer,
  ) {
    this.method = req.method ?? 'GET';
    this.path = req.url ?? '';
  }

  /** The client behind the trusted proxies: the X-Forwarded-For / Forwarded walk, done once when first asked. */
  get client(): ClientIp {
    return (this.clientIp ??= this.policy.resolveIp.behind(this.peer, this.req.headers['x-forwarded-for'], this.req.headers.forwarded));
  }

  /** What `when:` and `per:` rules read (headers, query, body, token), built once when first asked. */
  facts(): RequestFacts {
    return (this.ruleFacts ??= new RequestFacts(this.req.headers, this.query, () => this.token, this.values, this.form));
  }

  /** The trusted account header's value, when the config names one. */
  accountHeader(): string | undefined {
    const name = this.policy.accountHeader;
    return name !== undefined ? firstHeader(this.req.headers[name]) : undefined;
  }

  /** Routes the request by the method Rails will see: matched again only when the override changed it. */
  routeAs(method: string): void {
    if (method === this.method) return;
    this.method = method;
    this.matched = this.policy.snapshot.matcher.match(method, this.path);
  }
}
