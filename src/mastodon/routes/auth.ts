/**
 * @module Devise's session, password-reset and confirmation endpoints (`POST /auth/sign_in`,
 * `/auth/password`, `/auth/confirmation`, each also with `.json`), answering as Mastodon's Devise
 * setup does for JSON clients. They exist so the gateway's `param:user[email]` rules can be exercised
 * end to end: the e-mail arrives as a form field or inside a JSON body.
 */
import type { Handler } from '../context.js';
import { getHash, getString } from '../params.js';
import { HttpError } from '../reply.js';
import { checkPassword } from '../store.js';

/** Devise's failure text for a bad login (the same for an unknown e-mail: no account enumeration). */
export const INVALID_LOGIN = 'Invalid Email or password.';

/** `user[email]` as a form, multipart or JSON body sends it; undefined when absent or not text. */
async function userEmail(
  ctx: Parameters<Handler>[0],
): Promise<{ email: string | undefined; password: string | undefined }> {
  const { params } = await ctx.params();
  const user = getHash(params, 'user');
  if (user === undefined) return { email: undefined, password: undefined };
  return {
    email: getString(user, 'email', 'user[email]')?.trim(),
    password: getString(user, 'password', 'user[password]'),
  };
}

/** `POST /auth/sign_in(.json)`: 201 with the user on success, 401 `Invalid Email or password.` otherwise. */
export const signIn: Handler = async (ctx) => {
  const { email, password } = await userEmail(ctx);
  const account = email === undefined ? undefined : ctx.store.accountsByEmail.get(email.toLowerCase());
  if (account === undefined || password === undefined || !(await checkPassword(account, password))) {
    throw new HttpError(401, INVALID_LOGIN);
  }
  return { status: 201, body: { id: account.id, email: account.email } };
};

/**
 * `POST /auth/password(.json)` and `/auth/confirmation(.json)`: Mastodon runs Devise in paranoid mode,
 * so a known and an unknown e-mail get the same answer (201, empty object); no e-mail at all is 422.
 */
export const paranoidMail: Handler = async (ctx) => {
  const { email } = await userEmail(ctx);
  if (email === undefined || email === '') throw new HttpError(422, "Email can't be blank");
  return { status: 201, body: {} };
};
