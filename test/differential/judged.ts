/**
 * @module The ONE list of judged differences between rategate (config/examples/mastodon.yaml) and real
 * Rack::Attack running Mastodon's throttles. The differential test (rack-attack.test.ts) fails on any
 * disagreement none of these explains: a new difference is either a bug to fix or judged here, with why.
 */
import type { Req, Tag } from './requests.js';

export type Verdict = 'pass' | '429' | '403';

export interface Step {
  req: Req;
  ruby: Verdict;
  gate: Verdict;
  /** The Rack::Attack throttle that refused, on a Ruby 429. */
  rubyThrottle: string;
}

export interface Judged {
  id: string;
  why: string;
  /** Whether this difference explains `step`, given the steps before it in the same sequence. */
  explains(step: Step, before: readonly Step[]): boolean;
}

/** The same client (IP or /64), account, token, e-mail address or pending sign-in: one may have spent the other's budget. */
export function related(a: Req, b: Req): boolean {
  return (
    a.ipGroup === b.ipGroup ||
    (a.account !== null && a.account === b.account) ||
    (a.token !== null && a.token === b.token) ||
    (a.email !== null && a.email === b.email) ||
    (a.pending !== null && a.pending === b.pending)
  );
}

/** A tag on this request or on an earlier related one of its sequence. */
function tagged(tag: Tag): Judged['explains'] {
  return (step, before) =>
    step.req.tags.includes(tag) || before.some((s) => s.req.tags.includes(tag) && related(s.req, step.req));
}

/** Deliberate differences, kept (SPEC §4, the README's rack-attack comparison). */
export const deliberate: readonly Judged[] = [
  {
    id: 'all-or-nothing',
    why:
      'rategate charges a request all-or-nothing; Rack::Attack counts it in every throttle before the one that refuses it, ' +
      'so after a refusal Rack::Attack has spent more of the related budgets and refuses sooner; and a request it refused ' +
      'sooner that rategate admitted is charged by rategate in buckets Rack::Attack never reached, which rategate then refuses sooner',
    explains: (step, before) =>
      (step.ruby === '429' &&
        step.gate === 'pass' &&
        before.some((s) => s.ruby === '429' && related(s.req, step.req))) ||
      (step.ruby === 'pass' &&
        step.gate === '429' &&
        before.some((s) => s.ruby === '429' && s.gate === 'pass' && related(s.req, step.req))),
  },
  {
    id: 'token-as-parameter',
    why:
      "Mastodon's throttles do not see a token sent as a parameter (Doorkeeper looks access_token/bearer_token up by Symbol in " +
      "Rack's String-keyed params) and count such requests per IP; rategate counts them per token and account, as Rails authenticates them",
    explains: tagged('token-param'),
  },
  {
    id: 'json-body',
    why: 'Rack does not parse a JSON body for Rack::Attack (no user[email], no token there); rategate reads it',
    explains: tagged('json'),
  },
  {
    id: 'unknown-token',
    why: 'a token that does not exist gets its own per-token bucket in rategate (the digest is counted); Rack::Attack has none for it',
    explains: tagged('unknown-token'),
  },
  {
    id: 'rails-404-path',
    why: 'paths Rails answers 404 (/API/V1/MEDIA, /api/v3/media, DELETE /api/v1/statuses/abc) are judged differently; nothing changes for a real Mastodon',
    explains: tagged('rails-404'),
  },
  {
    id: 'session-not-an-account',
    why:
      'rategate keys the cookie-only password change per session cookie (cookie:_mastodon_session), not per Warden user: a made-up ' +
      'cookie gets a bucket of its own (stricter; it still counts per IP elsewhere), two sessions of one user get two; and a session ' +
      'never makes a request "authenticated" for the other rules (Mastodon counts a signed-in web page per user, rategate per IP)',
    explains: (step, before) =>
      (['made-up-cookie', 'second-session', 'session-elsewhere'] as const).some((t) => tagged(t)(step, before)),
  },
  {
    id: 'session-and-token-of-one-user',
    why:
      "Mastodon counts a user's password changes in one bucket whether they come with the web session or a token " +
      '(authenticated_user_id); rategate cannot tell whose a session is, so it counts the session per cookie and the token per account',
    explains: (step, before) => {
      const account = step.req.account;
      if (account === null) return false;
      const mine = [...before, step].filter((s) => s.req.account === account);
      return mine.some((s) => s.req.tags.includes('session')) && mine.some((s) => s.req.token !== null);
    },
  },
];

/**
 * Bugs fixed in a parallel branch: each entry is deleted when that branch is merged, and the test must
 * then pass without it.
 */
export const pendingFixes: readonly Judged[] = [];

export const judged: readonly Judged[] = [...deliberate, ...pendingFixes];
