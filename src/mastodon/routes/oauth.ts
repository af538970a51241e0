/** @module Client apps and OAuth tokens: `POST /api/v1/apps` and `POST /oauth/token`, answering as Doorkeeper does. */
import type { Handler } from '../context.js';
import { applicationEntity, tokenEntity } from '../entities.js';
import { getPresent, getString, getStringArray, type ParamHash } from '../params.js';
import { HttpError, validationFailed } from '../reply.js';
import { checkPassword, randomToken, type AppRecord } from '../store.js';

const OOB = 'urn:ietf:wg:oauth:2.0:oob';
const MAX_APP_NAME = 60;
// Mastodon's top-level scopes; the granular ones (`read:statuses`, `admin:read:accounts`) extend them.
const SCOPE = /^(?:read|write|follow|push|profile|crypto|admin:(?:read|write))(?::[a-z_]+)?$/;
const DEFAULT_SCOPES = ['read'];

const INVALID_CLIENT = {
  error: 'invalid_client',
  error_description:
    'Client authentication failed due to unknown client, no client authentication included, or unsupported authentication method.',
};
const INVALID_GRANT = {
  error: 'invalid_grant',
  error_description:
    'The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client.',
};
const INVALID_SCOPE = {
  error: 'invalid_scope',
  error_description: 'The requested scope is invalid, unknown, or malformed.',
};

function splitScopes(raw: string | undefined): string[] | undefined {
  if (raw === undefined) return undefined;
  const scopes = raw.split(/\s+/).filter((s) => s !== '');
  return scopes.length === 0 ? undefined : [...new Set(scopes)];
}

/** An app registered with `write` may be granted `write:statuses`; the reverse does not hold. */
function allowed(scope: string, appScopes: readonly string[]): boolean {
  return appScopes.some((granted) => scope === granted || scope.startsWith(`${granted}:`));
}

/** `redirect_uris` may be one string (newline- or space-separated) or an array of them. */
function redirectUris(params: ParamHash): string[] {
  const raw = Array.isArray(params['redirect_uris'])
    ? (getStringArray(params, 'redirect_uris') ?? [])
    : [getString(params, 'redirect_uris') ?? ''];
  return raw.flatMap((s) => s.split(/\s+/)).filter((s) => s !== '');
}

function isAbsoluteUri(uri: string): boolean {
  if (uri === OOB) return true;
  try {
    const parsed = new URL(uri);
    return parsed.protocol !== '' && parsed.hash === '';
  } catch {
    return false;
  }
}

export const createApp: Handler = async (ctx) => {
  const { params } = await ctx.params();
  const name = getPresent(params, 'client_name')?.trim();
  const uris = redirectUris(params);
  const scopes = splitScopes(getString(params, 'scopes')) ?? DEFAULT_SCOPES;
  const website = getPresent(params, 'website') ?? null;
  const errors: string[] = [];
  if (name === undefined) errors.push("Application name can't be blank");
  else if ([...name].length > MAX_APP_NAME)
    errors.push(`Application name is too long (maximum is ${MAX_APP_NAME} characters)`);
  if (uris.length === 0) errors.push("Redirect URI can't be blank");
  else if (!uris.every(isAbsoluteUri)) errors.push('Redirect URI must be an absolute URI.');
  if (!scopes.every((s) => SCOPE.test(s))) errors.push('Scopes must be valid');
  if (website !== null && !isAbsoluteUri(website)) errors.push('Website is invalid');
  if (errors.length > 0 || name === undefined) throw validationFailed(errors.join(', '));

  const app: AppRecord = {
    id: ctx.store.ids.next(),
    name,
    website,
    scopes,
    redirectUris: uris,
    clientId: randomToken(),
    clientSecret: randomToken(),
  };
  ctx.store.apps.set(app.id, app);
  ctx.store.appsByClientId.set(app.clientId, app);
  return { status: 200, body: applicationEntity(app, true) };
};

/** Client credentials from the body, or from HTTP Basic as Doorkeeper also accepts. */
function clientCredentials(authorization: string | undefined, params: ParamHash): { id?: string; secret?: string } {
  const basic = authorization === undefined ? null : /^Basic[ \t]+([A-Za-z0-9+/=]+)[ \t]*$/i.exec(authorization);
  if (basic?.[1] !== undefined) {
    const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon > 0) {
      return {
        id: decodeURIComponent(decoded.slice(0, colon)),
        secret: decodeURIComponent(decoded.slice(colon + 1)),
      };
    }
  }
  const id = getPresent(params, 'client_id');
  const secret = getPresent(params, 'client_secret');
  return { ...(id === undefined ? {} : { id }), ...(secret === undefined ? {} : { secret }) };
}

export const issueToken: Handler = async (ctx) => {
  const { params } = await ctx.params();
  const grantType = getPresent(params, 'grant_type');
  if (grantType === undefined) {
    throw new HttpError(400, {
      error: 'invalid_request',
      error_description: 'Missing required parameter: grant_type.',
    });
  }
  if (grantType !== 'client_credentials' && grantType !== 'password') {
    throw new HttpError(400, {
      error: 'unsupported_grant_type',
      error_description: 'The authorization grant type is not supported by the authorization server.',
    });
  }

  let creds: { id?: string; secret?: string };
  try {
    creds = clientCredentials(ctx.req.headers.authorization, params);
  } catch {
    throw new HttpError(401, INVALID_CLIENT);
  }
  const app = creds.id === undefined ? undefined : ctx.store.appsByClientId.get(creds.id);
  if (app === undefined || creds.secret === undefined || creds.secret !== app.clientSecret) {
    throw new HttpError(401, INVALID_CLIENT);
  }

  const requested = splitScopes(getString(params, 'scope'));
  // Doorkeeper grants the server's default scopes when none are asked for, if the app may have them.
  const scopes = requested ?? DEFAULT_SCOPES;
  if (!scopes.every((s) => allowed(s, app.scopes))) throw new HttpError(400, INVALID_SCOPE);

  let accountId: string | null = null;
  if (grantType === 'password') {
    const email = getString(params, 'username');
    const password = getString(params, 'password');
    const account = email === undefined ? undefined : ctx.store.accountsByEmail.get(email.toLowerCase());
    // Unknown e-mail and wrong password get the same answer, so the endpoint does not list accounts.
    if (account === undefined || password === undefined || !(await checkPassword(account, password))) {
      throw new HttpError(400, INVALID_GRANT);
    }
    accountId = account.id;
  }

  const { token, record } = ctx.store.issueToken(app.id, accountId, scopes);
  return { status: 200, body: tokenEntity(token, record) };
};
