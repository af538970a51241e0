/** @module What a route of the built-in upstream gets: the request, the records, and auth and parameter helpers. */
import type { IncomingMessage } from 'node:http';
import type { View } from './entities.js';
import { parseRequest, type ParseOptions, type ParsedRequest } from './params.js';
import { HttpError } from './reply.js';
import type { AccountRecord, Store, TokenRecord } from './store.js';

export interface ResolvedOptions {
  readonly maxUploadBytes: number;
  readonly baseUrl: string;
  /** The upstream's clock (epoch ms): when an account is created. */
  readonly now: () => number;
}

export interface Reply {
  readonly status: number;
  readonly body: unknown;
}

export type Handler = (ctx: RouteContext) => Promise<Reply>;

export interface Caller {
  readonly token: TokenRecord;
  readonly account: AccountRecord | null;
}

export interface UserCaller extends Caller {
  readonly account: AccountRecord;
}

/** Doorkeeper's 401 text; Mastodon clients match on it to send the user back to log in. */
export const INVALID_TOKEN = 'The access token is invalid';
export const USER_REQUIRED = 'This method requires an authenticated user';

// Only the header is read: tokens in the query string end up in access logs.
const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;

export class RouteContext {
  readonly req: IncomingMessage;
  readonly store: Store;
  readonly opts: ResolvedOptions;
  readonly rawQuery: string;
  /** The record id captured from the path (`/api/v1/statuses/:id`), else ''. */
  readonly id: string;
  private caller: Caller | null | undefined;

  constructor(req: IncomingMessage, store: Store, opts: ResolvedOptions, rawQuery: string, id: string) {
    this.req = req;
    this.store = store;
    this.opts = opts;
    this.rawQuery = rawQuery;
    this.id = id;
  }

  /** The token's owner, or null when no token was sent or it is unknown (public routes ignore bad tokens). */
  optionalCaller(): Caller | null {
    if (this.caller !== undefined) return this.caller;
    const header = this.req.headers.authorization;
    const match = header === undefined ? null : BEARER.exec(header);
    const token = match?.[1] === undefined ? undefined : this.store.findToken(match[1]);
    if (token === undefined) return (this.caller = null);
    const account = token.accountId === null ? null : (this.store.accounts.get(token.accountId) ?? null);
    return (this.caller = { token, account });
  }

  /** Any valid token, app-only included; 401 otherwise. */
  requireToken(): Caller {
    const caller = this.optionalCaller();
    if (caller === null) throw new HttpError(401, INVALID_TOKEN);
    return caller;
  }

  /** A token with an owner; 401 without a valid token, 422 for an app-only token, as Mastodon answers. */
  requireUser(): UserCaller {
    const caller = this.requireToken();
    if (caller.account === null) throw new HttpError(422, USER_REQUIRED);
    return caller as UserCaller;
  }

  params<T = never>(opts: ParseOptions<T> = {}): Promise<ParsedRequest<T>> {
    return parseRequest(this.req, this.rawQuery, opts);
  }

  view(viewerId: string | null): View {
    return { store: this.store, baseUrl: this.opts.baseUrl, viewerId };
  }
}
