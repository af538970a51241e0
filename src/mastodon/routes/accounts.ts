/** @module Sign-up (`POST /api/v1/accounts`) with Mastodon's per-field error codes, and `verify_credentials`. */
import type { Handler, RouteContext } from '../context.js';
import { credentialAccountEntity, tokenEntity } from '../entities.js';
import { getBool, getString, type ParamHash } from '../params.js';
import { HttpError } from '../reply.js';
import { hashPassword, type AccountRecord } from '../store.js';

const USERNAME = /^[a-z0-9_]+$/i;
// Devise's e-mail check (something@something), plus a dot in the domain as Mastodon's MX check implies.
const EMAIL = /^[^@\s]+@[^@\s]+\.[^@\s]+$/;
const MAX_USERNAME = 30;
const MIN_PASSWORD = 8;
// bcrypt reads only 72 bytes, so Mastodon refuses longer passwords rather than silently truncating.
const MAX_PASSWORD = 72;
const MAX_REASON = 1000;

/** Mastodon's reserved names plus the usual mailbox names that must not be handed to strangers. */
const RESERVED_USERNAMES: ReadonlySet<string> = new Set([
  'admin',
  'administrator',
  'root',
  'support',
  'help',
  'mod',
  'moderator',
  'moderators',
  'webmaster',
  'postmaster',
  'hostmaster',
  'abuse',
  'security',
  'staff',
  'owner',
  'mastodon',
  'system',
  'noreply',
  'no_reply',
  'instance_actor',
  'api',
  'www',
]);

/** The interface languages Mastodon ships (a representative subset). */
export const LOCALES: ReadonlySet<string> = new Set([
  'ar',
  'ast',
  'be',
  'bg',
  'bn',
  'br',
  'ca',
  'cs',
  'cy',
  'da',
  'de',
  'el',
  'en',
  'en-GB',
  'eo',
  'es',
  'es-AR',
  'es-MX',
  'et',
  'eu',
  'fa',
  'fi',
  'fr',
  'fr-CA',
  'fy',
  'ga',
  'gd',
  'gl',
  'he',
  'hi',
  'hr',
  'hu',
  'hy',
  'id',
  'is',
  'it',
  'ja',
  'ka',
  'kab',
  'ko',
  'ku',
  'lt',
  'lv',
  'ms',
  'nl',
  'nn',
  'no',
  'oc',
  'pl',
  'pt-BR',
  'pt-PT',
  'ro',
  'ru',
  'sk',
  'sl',
  'sq',
  'sr',
  'sv',
  'ta',
  'th',
  'tr',
  'uk',
  'vi',
  'zh-CN',
  'zh-HK',
  'zh-TW',
]);

type ErrorCode =
  | 'ERR_BLANK'
  | 'ERR_INVALID'
  | 'ERR_TAKEN'
  | 'ERR_RESERVED'
  | 'ERR_ACCEPTED'
  | 'ERR_TOO_LONG'
  | 'ERR_TOO_SHORT'
  | 'ERR_INCLUSION';

/** Attribute names as Mastodon's English locale spells them in full messages. */
const ATTRIBUTE_NAMES: Readonly<Record<string, string>> = {
  username: 'Username',
  email: 'E-mail address',
  password: 'Password',
  agreement: 'Service agreement',
  locale: 'Locale',
  reason: 'Reason',
};

class Details {
  private readonly byField = new Map<string, Array<{ error: ErrorCode; description: string }>>();

  add(field: string, error: ErrorCode, description: string): void {
    const list = this.byField.get(field) ?? [];
    list.push({ error, description });
    this.byField.set(field, list);
  }

  get empty(): boolean {
    return this.byField.size === 0;
  }

  toError(): HttpError {
    const messages: string[] = [];
    const details: Record<string, unknown> = {};
    for (const [field, list] of this.byField) {
      details[field] = list;
      for (const { description } of list) messages.push(`${ATTRIBUTE_NAMES[field] ?? field} ${description}`);
    }
    return new HttpError(422, { error: `Validation failed: ${messages.join(', ')}`, details });
  }
}

/** A text field; a hash or array where text belongs is reported as that field being invalid. */
function textField(params: ParamHash, key: string, details: Details): string | undefined | null {
  try {
    return getString(params, key);
  } catch {
    details.add(key, 'ERR_INVALID', 'is invalid');
    return null;
  }
}

function blank(v: string | undefined): v is undefined {
  return v === undefined || v.trim() === '';
}

function checkUsername(username: string | undefined, store: RouteContext['store'], details: Details): void {
  if (blank(username)) return details.add('username', 'ERR_BLANK', "can't be blank");
  if (!USERNAME.test(username))
    details.add('username', 'ERR_INVALID', 'must contain only letters, numbers and underscores');
  if (username.length > MAX_USERNAME) {
    details.add('username', 'ERR_TOO_LONG', `is too long (maximum is ${MAX_USERNAME} characters)`);
  }
  if (RESERVED_USERNAMES.has(username.toLowerCase())) details.add('username', 'ERR_RESERVED', 'is reserved');
  else if (store.accountsByUsername.has(username.toLowerCase())) {
    details.add('username', 'ERR_TAKEN', 'has already been taken');
  }
}

function checkEmail(email: string | undefined, store: RouteContext['store'], details: Details): void {
  if (blank(email)) details.add('email', 'ERR_BLANK', "can't be blank");
  else if (!EMAIL.test(email.trim())) details.add('email', 'ERR_INVALID', 'is invalid');
  else if (store.accountsByEmail.has(email.trim().toLowerCase()))
    details.add('email', 'ERR_TAKEN', 'has already been taken');
}

function checkPassword(password: string | undefined, details: Details): void {
  if (password === undefined || password === '') details.add('password', 'ERR_BLANK', "can't be blank");
  else if ([...password].length < MIN_PASSWORD) {
    details.add('password', 'ERR_TOO_SHORT', `is too short (minimum is ${MIN_PASSWORD} characters)`);
  } else if ([...password].length > MAX_PASSWORD) {
    details.add('password', 'ERR_TOO_LONG', `is too long (maximum is ${MAX_PASSWORD} characters)`);
  }
}

/** The agreement, the locale and the reason: what sign-up asks beyond the credentials. */
function checkTerms(
  params: ParamHash,
  details: Details,
): { locale: string | undefined | null; reason: string | undefined | null } {
  let agreement: boolean | undefined;
  try {
    agreement = getBool(params, 'agreement');
  } catch {
    agreement = undefined;
  }
  if (agreement !== true) details.add('agreement', 'ERR_ACCEPTED', 'must be accepted');

  const locale = textField(params, 'locale', details);
  if (locale !== null && !blank(locale) && !LOCALES.has(locale)) {
    details.add('locale', 'ERR_INCLUSION', 'is not included in the list');
  }

  const reason = textField(params, 'reason', details);
  if (typeof reason === 'string' && [...reason].length > MAX_REASON) {
    details.add('reason', 'ERR_TOO_LONG', `is too long (maximum is ${MAX_REASON} characters)`);
  }
  return { locale, reason };
}

export const signUp: Handler = async (ctx) => {
  const caller = ctx.requireToken();
  const { params } = await ctx.params();
  const details = new Details();
  const { store } = ctx;

  const username = textField(params, 'username', details);
  if (username !== null) checkUsername(username, store, details);
  const email = textField(params, 'email', details);
  if (email !== null) checkEmail(email, store, details);
  const password = textField(params, 'password', details);
  if (password !== null) checkPassword(password, details);

  const { locale, reason } = checkTerms(params, details);

  if (
    !details.empty ||
    username === null ||
    email === null ||
    blank(username) ||
    blank(email) ||
    password === undefined ||
    password === null
  ) {
    throw details.toError();
  }

  const { hash, salt } = await hashPassword(password);
  // Checked again after the await: a concurrent sign-up may have taken the name meanwhile.
  if (store.accountsByUsername.has(username.toLowerCase()))
    details.add('username', 'ERR_TAKEN', 'has already been taken');
  if (store.accountsByEmail.has(email.trim().toLowerCase()))
    details.add('email', 'ERR_TAKEN', 'has already been taken');
  if (!details.empty) throw details.toError();

  const account: AccountRecord = {
    id: store.ids.next(),
    username,
    email: email.trim(),
    passwordHash: hash,
    passwordSalt: salt,
    locale: locale === null || blank(locale) ? 'en' : locale,
    reason: typeof reason === 'string' && reason !== '' ? reason : null,
    createdAt: new Date(ctx.opts.now()),
    bot: false,
    locked: false,
    statusesCount: 0,
    lastStatusAt: null,
  };
  store.addAccount(account);
  // The new user's token carries the signing-up app's scopes, as Mastodon's AppSignUpService does.
  const app = store.apps.get(caller.token.appId);
  const { token, record } = store.issueToken(caller.token.appId, account.id, app?.scopes ?? caller.token.scopes);
  return { status: 200, body: tokenEntity(token, record) };
};

/** Mastodon's profile update, the two flags only (`bot`, `locked`; form or JSON booleans as Rails reads them). */
export const updateCredentials: Handler = async (ctx) => {
  const { account } = ctx.requireUser();
  const { params } = await ctx.params();
  const bot = getBool(params, 'bot');
  const locked = getBool(params, 'locked');
  if (bot !== undefined) account.bot = bot;
  if (locked !== undefined) account.locked = locked;
  return { status: 200, body: credentialAccountEntity(account, ctx.opts.baseUrl) };
};

/** Kept to one Map lookup and one serialisation: the gateway's account introspection calls it. */
export const verifyCredentials: Handler = async (ctx) => {
  const { account, token } = ctx.requireUser();
  // Doorkeeper's scope check, as Mastodon's `read:accounts`: a write-only token is known but not named.
  if (!token.scopes.some((s) => s === 'read' || s === 'read:accounts'))
    throw new HttpError(403, 'This action is outside the authorized scopes');
  return { status: 200, body: credentialAccountEntity(account, ctx.opts.baseUrl) };
};
