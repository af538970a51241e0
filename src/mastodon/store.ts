/** @module The built-in upstream's records, held in Maps for the life of one handler. */
import { createHash, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

export type Visibility = 'public' | 'unlisted' | 'private' | 'direct';
export type MediaType = 'image' | 'gifv' | 'video' | 'audio' | 'unknown';

export interface AppRecord {
  readonly id: string;
  readonly name: string;
  readonly website: string | null;
  readonly scopes: readonly string[];
  readonly redirectUris: readonly string[];
  readonly clientId: string;
  readonly clientSecret: string;
}

export interface TokenRecord {
  readonly appId: string;
  /** Null for an app-only (client credentials) token: it has no owner. */
  readonly accountId: string | null;
  readonly scopes: readonly string[];
  /** Unix seconds, as the Token entity carries it. */
  readonly createdAt: number;
}

export interface AccountRecord {
  readonly id: string;
  readonly username: string;
  readonly email: string;
  readonly passwordHash: Buffer;
  readonly passwordSalt: Buffer;
  readonly locale: string;
  readonly reason: string | null;
  readonly createdAt: Date;
  /** The owner's own settings (update_credentials): an automated account, and one that approves its followers. */
  bot: boolean;
  locked: boolean;
  statusesCount: number;
  lastStatusAt: Date | null;
}

export interface ImageSize {
  readonly width: number;
  readonly height: number;
}

export interface MediaRecord {
  readonly id: string;
  readonly accountId: string;
  readonly type: MediaType;
  readonly mimeType: string;
  readonly extension: string;
  readonly size: number;
  readonly dimensions: ImageSize | null;
  readonly description: string | null;
  readonly focus: { readonly x: number; readonly y: number } | null;
  readonly hasThumbnail: boolean;
  statusId: string | null;
}

export interface PollRecord {
  readonly id: string;
  readonly options: readonly string[];
  readonly multiple: boolean;
  readonly hideTotals: boolean;
  readonly expiresAt: Date;
}

export interface StatusRecord {
  readonly id: string;
  readonly accountId: string;
  readonly appId: string | null;
  readonly text: string;
  readonly spoilerText: string;
  readonly sensitive: boolean;
  readonly visibility: Visibility;
  readonly language: string | null;
  readonly inReplyToId: string | null;
  readonly inReplyToAccountId: string | null;
  readonly mediaIds: readonly string[];
  readonly poll: PollRecord | null;
  /** Set on a boost: the wrapper status points at the original. */
  readonly reblogOfId: string | null;
  readonly createdAt: Date;
  deletedAt: Date | null;
  repliesCount: number;
  reblogsCount: number;
}

/**
 * Snowflake-like ids (milliseconds shifted left 16 bits, plus a sequence), as Mastodon's: digits only,
 * increasing, and not guessable as 1, 2, 3 across restarts.
 */
export class IdGenerator {
  private last = 0n;

  next(now = Date.now()): string {
    let id = BigInt(now) << 16n;
    if (id <= this.last) id = this.last + 1n;
    this.last = id;
    return id.toString();
  }
}

/** Doorkeeper's tokens are 43 url-safe characters; so are ours. */
export function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

// Cheap scrypt cost: these records live only in memory, and tests sign up many accounts.
const SCRYPT_OPTIONS = { N: 1024, r: 8, p: 1 } as const;

function scryptAsync(password: string, salt: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, 32, SCRYPT_OPTIONS, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

export async function hashPassword(password: string): Promise<{ hash: Buffer; salt: Buffer }> {
  const salt = randomBytes(16);
  return { hash: await scryptAsync(password, salt), salt };
}

export async function checkPassword(account: AccountRecord, password: string): Promise<boolean> {
  const candidate = await scryptAsync(password, account.passwordSalt);
  return timingSafeEqual(candidate, account.passwordHash);
}

export class Store {
  readonly ids = new IdGenerator();
  readonly apps = new Map<string, AppRecord>();
  readonly appsByClientId = new Map<string, AppRecord>();
  /** Keyed by the SHA-256 of the token, so a heap dump does not hand out live tokens. */
  private readonly tokens = new Map<string, TokenRecord>();
  readonly accounts = new Map<string, AccountRecord>();
  /** Lower-cased: usernames and e-mail addresses are unique regardless of case. */
  readonly accountsByUsername = new Map<string, AccountRecord>();
  readonly accountsByEmail = new Map<string, AccountRecord>();
  readonly media = new Map<string, MediaRecord>();
  readonly statuses = new Map<string, StatusRecord>();
  /** `accountId:statusId` → the id of that account's boost of that status. */
  readonly reblogs = new Map<string, string>();

  issueToken(
    appId: string,
    accountId: string | null,
    scopes: readonly string[],
  ): { token: string; record: TokenRecord } {
    const token = randomToken();
    const record: TokenRecord = { appId, accountId, scopes, createdAt: Math.floor(Date.now() / 1000) };
    this.tokens.set(digest(token), record);
    return { token, record };
  }

  findToken(token: string): TokenRecord | undefined {
    return this.tokens.get(digest(token));
  }

  addAccount(account: AccountRecord): void {
    this.accounts.set(account.id, account);
    this.accountsByUsername.set(account.username.toLowerCase(), account);
    this.accountsByEmail.set(account.email.toLowerCase(), account);
  }

  reblogKey(accountId: string, statusId: string): string {
    return `${accountId}:${statusId}`;
  }
}

function digest(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}
