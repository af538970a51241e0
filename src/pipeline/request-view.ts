/**
 * @module One request as the pipeline sees it, each fact found once: the peer and the client behind it
 * (one X-Forwarded-For / Forwarded walk), whether it is exempt, the method Rails routes by, the
 * normalized path and query, the rules of that route (one match), the token Doorkeeper reads and its
 * digest, the account, and the facts `per:` and `when:` read (keys/kinds.ts KeyFacts). The stages fill
 * it and read it; it needs no socket (explain and replay build one from a described request).
 */
import type http from 'node:http';
// The module's binding, not the global: globalThis.performance is a getter, called on every use.
import { performance } from 'node:perf_hooks';
import { forwardedForNodes, type ClientIp, type ParsedForwarded, type Peer } from '../identity/index.js';
import type { ConnectionMemo } from '../identity/connection-memo.js';
import { extendedChain } from '../identity/forwarded.js';
import { isIntrospectable, tokenDigest } from '../identity/token-digest.js';
import type { KeyFacts } from '../keys/index.js';
import type { AccountFacts } from '../identity/account-facts.js';
import { firstHeader } from '../http/message.js';
import { NO_QUERY, RequestFacts, type BodyParams, type QueryParams } from '../rails/index.js';
import type { RequestPolicy } from './policy.js';
import { NO_ROUTE_RULES, type RouteRules } from './route-rules.js';
import type { Trace } from './trace.js';
import type { RequestSpans } from '../observability/tracing.js';

/** A request head as the decision reads it: node:http's IncomingMessage is one; so is a request `explain` describes. */
export interface RequestHead {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  readonly headers: http.IncomingHttpHeaders;
  readonly rawHeaders: readonly string[];
}

export class RequestView implements KeyFacts, ParsedForwarded {
  private clientIp: ClientIp | undefined;
  private forwardedNodes: (string | null)[] | null | undefined;
  private ruleFacts: RequestFacts | undefined;
  private digest: string | null | undefined;
  private introspectable: boolean | undefined;
  private exemptFound: boolean | undefined;
  private facts_: AccountFacts | null | undefined;
  /** The method Rails routes by (Rack's override applied once the params are read). */
  method: string;
  /** The normalized path (the raw target until it is normalized). */
  path: string;
  /** The query string with its `?` (or ''). */
  query = '';
  /** The rules of (method, path): limits, bans, in-flight limits and what they need; matched once per routed method. */
  rules: RouteRules = NO_ROUTE_RULES;
  /** The token Doorkeeper will authenticate the request with, wherever it was sent; null: none. */
  token: string | null = null;
  /** The account key once known (null: none); undefined while not looked up. */
  account: string | null | undefined = undefined;
  /** The query, parsed once (rails/request-params.ts). */
  queryParams: QueryParams = NO_QUERY;
  /** The `param:` names' values (query and body together), by name as written. */
  values: BodyParams | undefined;
  /** Every wanted name the body peek found, the body alone (for `when.query`). */
  form: BodyParams | undefined;
  /** Why each rule counted the request or not: kept for explain and replay; null on the serving path. */
  trace: Trace | null = null;
  /** The request's spans when tracing is on (observability/tracing.ts); null: off, nothing traced. */
  span: RequestSpans | null = null;

  constructor(
    readonly req: RequestHead,
    readonly policy: RequestPolicy,
    readonly peer: Peer,
    /** The client when the caller already knows it (explain's --ip); else the walk behind the peer. */
    client?: ClientIp,
    /** What the connection's requests share (identity/connection-memo.ts); null: none (explain, replay). */
    private readonly conn: ConnectionMemo | null = null,
  ) {
    this.method = req.method ?? 'GET';
    this.path = req.url ?? '';
    this.clientIp = client;
  }

  /** The client behind the trusted proxies: the X-Forwarded-For / Forwarded walk, done once when first asked. */
  get client(): ClientIp {
    if (this.clientIp !== undefined) return this.clientIp;
    const xff = this.req.headers['x-forwarded-for'];
    const { behind } = this.policy.resolveIp;
    if (this.conn !== null && this.peer.trusted && typeof xff === 'string')
      return (this.clientIp = this.conn.clientBehind(behind, this.peer, xff));
    return (this.clientIp = behind(this.peer, xff, this.req.headers.forwarded === undefined ? undefined : this));
  }

  /** A trusted proxy's X-Forwarded-For with the peer's address appended, as sent upstream (the connection's when the same). */
  extendedChain(xff: string, peer: Peer): string {
    return this.conn !== null ? this.conn.extendedChain(xff, peer) : extendedChain(xff, peer.client.address);
  }

  /** `Forwarded`'s `for=` nodes, parsed once: the client walk and the headers sent upstream read them. */
  forwardedFor(): (string | null)[] | null {
    if (this.forwardedNodes === undefined) this.forwardedNodes = forwardedForNodes(this.req.headers.forwarded ?? '');
    return this.forwardedNodes;
  }

  /** Whether the client is exempt (`exempt.ips`, or a runtime exemption): found once per request. */
  exempt(runtime: ((address: string) => boolean) | undefined): boolean {
    if (this.exemptFound === undefined) {
      const client = this.client;
      const cfg = this.policy.exemptIps;
      // The resolver answered exempt.ips when it parsed the address; a client made elsewhere is looked up.
      const listed = client.exempt ?? (cfg !== null && cfg.contains(client.address));
      this.exemptFound = listed || runtime?.(client.address) === true;
    }
    return this.exemptFound;
  }

  /** The trusted account header's value, when the config names one. */
  accountHeader(): string | undefined {
    const name = this.policy.accountHeader;
    return name !== undefined ? firstHeader(this.req.headers[name]) : undefined;
  }

  /**
   * The account known without I/O (token and header modes, an introspection cache hit), kept for the
   * rest of the request; undefined when the upstream must be asked.
   */
  knownAccount(): string | null | undefined {
    if (this.account === undefined)
      this.account = this.policy.account.known(this.token, this.accountHeader(), this.peer.trusted, this);
    return this.account;
  }

  /**
   * The account, looked up once per request: an upstream call on an introspection cache miss (the
   * stages ask only when knownAccount() has no answer).
   */
  lookUpAccount(): Promise<string | null> {
    const known = this.knownAccount();
    if (known !== undefined) return Promise.resolve(known);
    const found = this.policy.account.resolve(this.token, this.accountHeader(), this.peer.trusted, this);
    const span = this.span;
    const started = span !== null ? performance.now() : 0;
    return Promise.resolve(found).then((account) => {
      if (span !== null) span.introspected(started, performance.now(), account);
      return (this.account = account);
    });
  }

  /** Routes the request by the method Rails will see: matched again only when the override changed it. */
  routeAs(method: string): void {
    if (method === this.method) return;
    this.method = method;
    this.rules = this.policy.routeRules.of(method, this.path);
  }

  // What the key kinds read (keys/kinds.ts KeyFacts).

  get ipKey(): string {
    return this.client.key;
  }

  get accountKey(): string | null {
    return this.account ?? null;
  }

  /** What the upstream told of the account (`when.account`); null when nothing (or no account). */
  accountFacts(): AccountFacts | null {
    if (this.account === undefined) return null; // not looked up yet: nothing to keep
    if (this.facts_ === undefined)
      this.facts_ = this.account === null ? null : (this.policy.account.facts(this.account) ?? null);
    return this.facts_;
  }

  /**
   * The token's SHA-256 hex, computed once per request (the account resolver and `per: token` share it),
   * and not again for the same token on the same connection (identity/connection-memo.ts).
   */
  tokenDigest(): string | null {
    if (this.digest === undefined) {
      const t = this.token;
      this.digest = t === null ? null : this.conn !== null ? this.conn.tokenDigest(t) : tokenDigest(t);
    }
    return this.digest;
  }

  /** Whether the token has a Doorkeeper token's form (token-digest.ts), checked once per token and connection. */
  tokenIntrospectable(): boolean {
    if (this.introspectable === undefined) {
      const t = this.token;
      this.introspectable = t !== null && (this.conn !== null ? this.conn.tokenIntrospectable(t) : isIntrospectable(t));
    }
    return this.introspectable;
  }

  header(name: string): string | undefined {
    return this.facts().header(name);
  }

  cookie(name: string): string | undefined {
    return this.facts().cookie(name);
  }

  param(name: string, path: readonly string[]): string | undefined {
    return this.facts().param(name, path);
  }

  rawToken(): string | null {
    return this.token;
  }

  /** What Rack reads (headers, cookies, query, body values), built once when first asked. */
  facts(): RequestFacts {
    return (this.ruleFacts ??= new RequestFacts(this.req.headers, this.queryParams, this.values, this.form));
  }
}
