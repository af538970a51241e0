/**
 * @module The requests the differential test sends to both Rack::Attack and rategate: every throttle
 * of Mastodon's table, every token source, method override, the safelist and the blocklist, e-mail
 * capitalisation and formats, built from a few actors (IPs, tokens, sessions, addresses). Each request
 * carries tags naming what about it may be judged (test/differential/judged.ts).
 */
import fc from 'fast-check';

/** The access tokens that exist, and their owner (null: an app-only token, client credentials). */
export const TOKENS: Readonly<Record<string, string | null>> = { tokA: '1', tokA2: '1', tokB: '2', appTok: null };
/** The admin's IP blocks, on both sides. */
export const BLOCKED = ['203.0.113.66'];

export type Tag =
  | 'token-param' // a token sent as access_token / bearer_token (query, form or JSON)
  | 'json' // a JSON body (Rack does not parse it for Rack::Attack)
  | 'unknown-token' // a token that does not exist
  | 'rails-404' // a path Rails would answer 404
  | 'made-up-cookie' // a session cookie the app never issued
  | 'second-session' // a second session of a user who has another one
  | 'session' // a real session cookie (of a signed-in Warden user)
  | 'session-elsewhere' // a real session cookie on a request Mastodon's other throttles read it for
  | 'email-case' // an e-mail address not as Devise stores it (capitals, surrounding blanks)
  | 'paging-in-form'; // a paging parameter in a form body

/** Who may send a request, and how it authenticates. */
export type Cred =
  | 'none'
  | 'header:tokA'
  | 'header:tokA2'
  | 'header:tokB'
  | 'header:appTok'
  | 'header:bogus'
  | 'lowerBearer:tokB'
  | 'query:access_token=tokA'
  | 'query:bearer_token=tokB'
  | 'form:access_token=tokB'
  | 'json:access_token=tokA'
  | 'session:s1'
  | 'session:s1b'
  | 'session:s2'
  | 'session:forged';

/** Sessions: the Warden user each one signs in (the cookie values come from the Ruby app). */
export const SESSIONS: Readonly<Record<string, string>> = { s1: '1', s1b: '1', s2: '2' };
/**
 * Sessions waiting for a two-factor code (Mastodon's `session[:attempt_user_id]`), one per user: the
 * two-factor step of a user signed in by a session cookie above is sent with that user's pending session.
 */
export const PENDING: Readonly<Record<string, string>> = { p1: '1', p2: '2' };
export const SESSION_COOKIE = '_mastodon_session';

export const IPS = ['198.51.100.1', '198.51.100.2', '2001:db8:1:1::1', '2001:db8:1:1::2', '2001:db8:2::1'];
export const EMAILS = [
  'victim@example.com',
  'Victim@Example.COM',
  ' victim@example.com ',
  'other@example.com',
  'e4@example.com',
  'e5@example.com',
  'e6@example.com',
];

export const KINDS = [
  'api-get',
  'api-paging',
  'web-paging',
  'paging-form',
  'media',
  'media-odd',
  'media-proxy',
  'api-sign-up',
  'delete',
  'delete-odd',
  'unreblog',
  'delete-override-form',
  'delete-override-header',
  'override-in-query',
  'override-on-get',
  'sign-up-web',
  'password-reset',
  'confirmation',
  'confirmation-api',
  'login',
  'login-json',
  'login-otp',
  'password-change',
  'password-change-patch',
  'password-change-override',
  'status-edit',
  'patch-other',
  'plain-web',
] as const;
export type Kind = (typeof KINDS)[number];

/** What the generator draws; `build` turns it into a request. */
export interface Action {
  kind: Kind;
  /** An index into IPS, or 'blocked', or 'local' (no X-Forwarded-For: the host itself). */
  ip: number | 'blocked' | 'local';
  cred: Cred;
  email: number;
  json: boolean; // `.json` on the routes that take a format
}

export interface Req {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
  tags: Tag[];
  /** What relates two requests (the same client, account, token, address or pending sign-in): for judging. */
  ipGroup: string;
  account: string | null;
  token: string | null;
  email: string | null;
  /** The user whose two-factor sign-in the request's session waits for. */
  pending: string | null;
  label: string;
}

/** Kinds of the web (cookie) side: the only ones a session cookie is sent with. */
const WEB = new Set<Kind>([
  'web-paging',
  'sign-up-web',
  'password-reset',
  'confirmation',
  'login',
  'password-change',
  'password-change-patch',
  'password-change-override',
  'plain-web',
]);

function ipGroup(ip: string): string {
  return ip.includes(':') ? ip.split(':').slice(0, 4).join(':') : ip;
}

/** `cookies`: the session cookie of each of SESSIONS and PENDING, as the Ruby app issued it. */
export function build(a: Action, cookies: Readonly<Record<string, string>>): Req {
  const tags: Tag[] = [];
  const headers: Record<string, string> = {};
  const ip = a.ip === 'local' ? '127.0.0.1' : a.ip === 'blocked' ? BLOCKED[0]! : IPS[a.ip]!;
  if (a.ip !== 'local') headers['X-Forwarded-For'] = ip;
  const email = EMAILS[a.email]!;
  const fmt = a.json ? '.json' : '';
  const form: string[] = [];
  const query: string[] = [];
  let method = 'GET';
  let path = '/';
  let jsonBody: Record<string, unknown> | null = null;
  let emailUsed: string | null = null;
  const withEmail = () => {
    form.push(`user%5Bemail%5D=${encodeURIComponent(email)}`);
    emailUsed = email.trim().toLowerCase();
    if (email !== email.trim().toLowerCase()) tags.push('email-case');
  };
  switch (a.kind) {
    case 'api-get':
      path = '/api/v1/timelines/home';
      break;
    case 'api-paging':
      path = '/api/v1/timelines/home';
      query.push(a.json ? 'since_id=3' : 'max_id=5');
      break;
    case 'web-paging':
      path = '/explore';
      query.push('page=2');
      break;
    case 'paging-form':
      method = 'POST';
      path = '/filters';
      form.push(a.json ? 'min_id=4' : 'page=2');
      tags.push('paging-in-form');
      break;
    case 'media':
      method = 'POST';
      path = a.json ? '/api/v2/media' : '/api/v1/media';
      form.push('description=x');
      break;
    case 'media-odd':
      method = 'POST';
      path = a.json ? '/api/v3/media' : '/API/V1/MEDIA';
      tags.push('rails-404');
      break;
    case 'media-proxy':
      path = '/media_proxy/1/original';
      break;
    case 'api-sign-up':
      method = 'POST';
      path = '/api/v1/accounts';
      form.push('username=u', 'agreement=1');
      break;
    case 'delete':
      method = 'DELETE';
      path = '/api/v1/statuses/1';
      break;
    case 'delete-odd':
      method = 'DELETE';
      path = '/api/v1/statuses/abc';
      tags.push('rails-404');
      break;
    case 'unreblog':
      method = 'POST';
      path = '/api/v1/statuses/12/unreblog';
      break;
    case 'delete-override-form':
      method = 'POST';
      path = '/api/v1/statuses/7';
      form.push('_method=delete');
      break;
    case 'delete-override-header':
      method = 'POST';
      path = '/api/v1/statuses/7';
      headers['X-HTTP-Method-Override'] = 'DELETE';
      break;
    // Rack overrides only a POST, and reads `_method` from the form body only.
    case 'override-in-query':
      method = 'POST';
      path = '/api/v1/statuses/7';
      query.push('_method=delete');
      break;
    case 'override-on-get':
      method = 'GET';
      path = '/api/v1/statuses/7';
      headers['X-HTTP-Method-Override'] = 'DELETE';
      break;
    case 'sign-up-web':
      method = 'POST';
      path = `/auth${fmt}`;
      withEmail();
      break;
    case 'password-reset':
      method = 'POST';
      path = `/auth/password${fmt}`;
      withEmail();
      break;
    case 'confirmation':
      method = 'POST';
      path = `/auth/confirmation${fmt}`;
      withEmail();
      break;
    case 'confirmation-api':
      method = 'POST';
      path = '/api/v1/emails/confirmations';
      break;
    case 'login':
      method = 'POST';
      path = `/auth/sign_in${fmt}`;
      withEmail();
      break;
    // The two-factor step: the code, no e-mail, and (with a session credential) that user's pending session.
    case 'login-otp':
      method = 'POST';
      path = `/auth/sign_in${fmt}`;
      form.push('user%5Botp_attempt%5D=123456');
      break;
    case 'login-json':
      method = 'POST';
      path = `/auth/sign_in${fmt}`;
      jsonBody = { user: { email } };
      emailUsed = email.trim().toLowerCase();
      if (email !== email.trim().toLowerCase()) tags.push('email-case');
      break;
    case 'password-change':
      method = 'PUT';
      path = `/auth${fmt}`;
      form.push('user%5Bpassword%5D=x');
      break;
    case 'password-change-patch':
      method = 'PATCH';
      path = `/auth${fmt}`;
      form.push('user%5Bpassword%5D=x');
      break;
    case 'password-change-override':
      method = 'POST';
      path = '/auth';
      form.push('_method=put', 'user%5Bpassword%5D=x');
      break;
    case 'status-edit':
      method = 'PUT';
      path = '/api/v1/statuses/3';
      form.push('status=edited');
      break;
    case 'patch-other':
      method = 'PATCH';
      path = '/api/v1/accounts/update_credentials';
      form.push('note=x');
      break;
    case 'plain-web':
      path = '/about';
      break;
  }

  let account: string | null = null;
  let token: string | null = null;
  let pending: string | null = null;
  const [how, what] = a.cred.split(':') as [string, string | undefined];
  if (how === 'header' || how === 'lowerBearer') {
    token = what!;
    headers.Authorization = `${how === 'header' ? 'Bearer' : 'bearer'} ${token}`;
  } else if (how === 'query' || how === 'form' || how === 'json') {
    const [name, value] = what!.split('=') as [string, string];
    token = value;
    tags.push('token-param');
    // A GET carries no body: its form token goes in the query instead.
    if (how === 'query' || method === 'GET') query.push(`${name}=${value}`);
    else if (jsonBody !== null) jsonBody[name] = value;
    else if (how === 'json' && form.length === 0) jsonBody = { [name]: value };
    else form.push(`${name}=${value}`);
  } else if (how === 'session' && a.kind === 'login-otp') {
    if (what === 'forged') {
      headers.Cookie = `${SESSION_COOKIE}=forged-pending${ip.replace(/\W/g, '')}`;
      tags.push('made-up-cookie');
    } else {
      pending = SESSIONS[what!]!;
      headers.Cookie = `${SESSION_COOKIE}=${cookies[`p${pending}`]}`;
    }
  } else if (how === 'session' && WEB.has(a.kind)) {
    const sid = what!;
    if (sid === 'forged') {
      headers.Cookie = `${SESSION_COOKIE}=forged${ip.replace(/\W/g, '')}`;
      tags.push('made-up-cookie');
    } else {
      headers.Cookie = `${SESSION_COOKIE}=${cookies[sid]}`;
      account = SESSIONS[sid]!;
      tags.push('session');
      if (sid === 's1b') tags.push('second-session');
      if (!a.kind.startsWith('password-change')) tags.push('session-elsewhere');
    }
  }
  if (token !== null) {
    if (!(token in TOKENS)) tags.push('unknown-token');
    else account = TOKENS[token]!;
  }

  let body: string | undefined;
  if (jsonBody !== null) {
    if (form.length > 0) throw new Error('a request has a JSON body or a form, not both');
    body = JSON.stringify(jsonBody);
    headers['Content-Type'] = 'application/json';
    tags.push('json');
  } else if (form.length > 0) {
    body = form.join('&');
    headers['Content-Type'] = 'application/x-www-form-urlencoded';
  }
  const fullPath = query.length > 0 ? `${path}?${query.join('&')}` : path;
  return {
    method,
    path: fullPath,
    headers,
    ...(body === undefined ? {} : { body }),
    tags,
    ipGroup: ipGroup(ip),
    account,
    token,
    email: emailUsed,
    pending,
    label: `${method} ${fullPath} ip=${a.ip} cred=${a.cred}${emailUsed === null ? '' : ` email=${JSON.stringify(email)}`}${body === undefined ? '' : ` body=${body}`}`,
  };
}

const CREDS: Cred[] = [
  'none',
  'none',
  'header:tokA',
  'header:tokA',
  'header:tokA2',
  'header:tokB',
  'header:appTok',
  'header:bogus',
  'lowerBearer:tokB',
  'query:access_token=tokA',
  'query:bearer_token=tokB',
  'form:access_token=tokB',
  'json:access_token=tokA',
  'session:s1',
  'session:s1',
  'session:s1b',
  'session:s2',
  'session:forged',
];

/** One request: mostly from a few public clients, now and then from the host itself or a blocked IP. */
export const action: fc.Arbitrary<Action> = fc.record({
  kind: fc.constantFrom(...KINDS),
  ip: fc.oneof(
    { weight: 20, arbitrary: fc.nat({ max: IPS.length - 1 }) },
    { weight: 1, arbitrary: fc.constantFrom<'blocked' | 'local'>('blocked', 'local') },
  ),
  cred: fc.constantFrom(...CREDS),
  email: fc.nat({ max: EMAILS.length - 1 }),
  json: fc.boolean(),
});

/** The tags a drawn request carries (they do not depend on the session cookies' values). */
export function tagsOf(a: Action): Tag[] {
  return build(a, { s1: 'x', s1b: 'y', s2: 'z', p1: 'v', p2: 'w' }).tags;
}

/** Kinds and credentials that bring no deliberate difference of their own (judged.ts). */
const PLAIN_KINDS = KINDS.filter((k) => k !== 'media-odd' && k !== 'delete-odd' && k !== 'login-json');
const PLAIN_CREDS: Cred[] = [
  'none',
  'header:tokA',
  'header:tokA2',
  'header:tokB',
  'header:appTok',
  'lowerBearer:tokB',
  'session:s1',
  'session:s2',
];

/**
 * Sequences that draw from a narrow pool (one to three kinds, one or two IPs, one or two credentials),
 * so limits of 2 to 12 are reached and refusals compared, not only admissions. `plain`: only requests
 * whose tags are in `allowedTags` (a session cookie where it would bring another tag is left off).
 */
export function sequenceOf(plain?: { allowedTags: ReadonlySet<Tag> }): fc.Arbitrary<Action[]> {
  const kindPool = plain ? PLAIN_KINDS : [...KINDS];
  const credPool = plain ? PLAIN_CREDS : CREDS;
  return fc
    .record({
      kinds: fc.uniqueArray(fc.constantFrom(...kindPool), { minLength: 1, maxLength: 3 }),
      ips: fc.uniqueArray(
        action.map((a) => a.ip),
        { minLength: 1, maxLength: 2 },
      ),
      creds: fc.uniqueArray(fc.constantFrom(...credPool), { minLength: 1, maxLength: 2 }),
    })
    .chain(({ kinds, ips, creds }) =>
      fc.array(
        fc
          .record({
            kind: fc.constantFrom(...kinds),
            ip: fc.constantFrom(...ips),
            cred: fc.constantFrom(...creds),
            email: fc.nat({ max: EMAILS.length - 1 }),
            json: fc.boolean(),
          })
          .map((a): Action =>
            plain && !tagsOf(a).every((t) => plain.allowedTags.has(t)) ? { ...a, cred: 'none' } : a,
          ),
        { minLength: 4, maxLength: 16 },
      ),
    );
}
