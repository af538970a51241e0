/** @module Statuses: post, show, delete (with its source for redraft), boost and undo the boost. */
import type { Handler, RouteContext } from '../context.js';
import { primaryLanguage, statusEntity } from '../entities.js';
import { getBool, getHash, getInt, getPresent, getString, getStringArray, type ParamHash } from '../params.js';
import { HttpError, notFound, RECORD_NOT_FOUND, validationFailed } from '../reply.js';
import type { AccountRecord, PollRecord, StatusRecord, Store, Visibility } from '../store.js';

const MAX_CHARS = 500;
const MAX_MEDIA = 4;
const POLL_MAX_OPTIONS = 4;
const POLL_MAX_OPTION_CHARS = 50;
const POLL_MIN_EXPIRY = 5 * 60;
const POLL_MAX_EXPIRY = 31 * 24 * 60 * 60;
const VISIBILITIES: ReadonlySet<string> = new Set(['public', 'unlisted', 'private', 'direct']);
const REBLOG_VISIBILITIES: ReadonlySet<string> = new Set(['public', 'unlisted', 'private']);
// ISO 639-1/-3 codes with an optional region; Mastodon checks them against its language list.
const LANGUAGE = /^[a-z]{2,3}(?:-[A-Za-z0-9]{2,8})?$/;

function chars(text: string): number {
  return [...text].length;
}

function gone(): HttpError {
  // SPEC §5: a record that existed and was deleted answers 410 when looked up by id.
  return new HttpError(410, RECORD_NOT_FOUND);
}

/** Who may see a status here: there are no follows or mentions, so private and direct are the author's. */
function visibleTo(status: StatusRecord, viewerId: string | null): boolean {
  return status.visibility === 'public' || status.visibility === 'unlisted' || status.accountId === viewerId;
}

/** The status of the path id that the viewer may see; 410 once deleted, 404 when unknown or hidden. */
function findVisible(ctx: RouteContext, viewerId: string | null): StatusRecord {
  const status = ctx.store.statuses.get(ctx.id);
  if (status === undefined || !visibleTo(status, viewerId)) throw notFound();
  if (status.deletedAt !== null) throw gone();
  return status;
}

function parsePoll(poll: ParamHash): Omit<PollRecord, 'id'> {
  const options = getStringArray(poll, 'options', 'poll[options]') ?? [];
  const errors: string[] = [];
  if (options.length < 2) errors.push('Poll options must have more than one item');
  if (options.length > POLL_MAX_OPTIONS) errors.push(`Poll options can't contain more than ${POLL_MAX_OPTIONS} items`);
  if (options.some((o) => o.trim() === '')) errors.push("Poll options can't be blank");
  if (options.some((o) => chars(o) > POLL_MAX_OPTION_CHARS)) {
    errors.push(`Poll options cannot be longer than ${POLL_MAX_OPTION_CHARS} characters each`);
  }
  if (new Set(options.map((o) => o.trim())).size !== options.length)
    errors.push('Poll options contain duplicate items');
  const expiresIn = getInt(poll, 'expires_in', 'poll[expires_in]');
  if (expiresIn === undefined) errors.push("Poll expiration can't be blank");
  else if (expiresIn < POLL_MIN_EXPIRY) errors.push('Poll expiration is too soon');
  else if (expiresIn > POLL_MAX_EXPIRY) errors.push('Poll expiration is too far into the future');
  const multiple = getBool(poll, 'multiple', 'poll[multiple]') ?? false;
  const hideTotals = getBool(poll, 'hide_totals', 'poll[hide_totals]') ?? false;
  if (errors.length > 0) throw validationFailed(errors.join(', '));
  return { options, multiple, hideTotals, expiresAt: new Date(Date.now() + (expiresIn ?? 0) * 1000) };
}

function attachableMedia(store: Store, account: AccountRecord, ids: readonly string[]): string[] {
  const unique = [...new Set(ids)];
  if (unique.length > MAX_MEDIA) throw validationFailed(`Cannot attach more than ${MAX_MEDIA} files`);
  const missing = unique.filter((id) => {
    const media = store.media.get(id);
    return media === undefined || media.accountId !== account.id || media.statusId !== null;
  });
  if (missing.length > 0) throw validationFailed(`Media attachments with IDs ${missing.join(', ')} not found`);
  const types = unique.map((id) => store.media.get(id)?.type);
  if (types.length > 1 && types.some((t) => t === 'video' || t === 'audio' || t === 'gifv')) {
    throw validationFailed('Cannot attach a video to a post that already contains images');
  }
  return unique;
}

/** The status replied to, if any: one that exists, is not a boost, and the author may see; else 404. */
function replyParent(store: Store, inReplyToId: string | undefined, viewerId: string): StatusRecord | undefined {
  let parent: StatusRecord | undefined;
  if (inReplyToId !== undefined) {
    parent = store.statuses.get(inReplyToId);
    if (
      parent === undefined ||
      parent.deletedAt !== null ||
      parent.reblogOfId !== null ||
      !visibleTo(parent, viewerId)
    ) {
      throw new HttpError(404, 'The post you are trying to reply to does not appear to exist.');
    }
  }
  return parent;
}

export const createStatus: Handler = async (ctx) => {
  const caller = ctx.requireUser();
  const { account } = caller;
  const { store } = ctx;
  const { params } = await ctx.params();

  const text = getString(params, 'status') ?? '';
  const spoilerText = getString(params, 'spoiler_text') ?? '';
  const mediaIds = getStringArray(params, 'media_ids', 'media_ids[]')?.filter((id) => id !== '') ?? [];
  const pollParams = getHash(params, 'poll');
  const visibility = getPresent(params, 'visibility') ?? 'public';
  const language = getPresent(params, 'language');
  const inReplyToId = getPresent(params, 'in_reply_to_id');
  // Mastodon marks a post sensitive whenever it carries a content warning.
  const sensitive = (getBool(params, 'sensitive') ?? false) || spoilerText.trim() !== '';

  if (text.trim() === '' && mediaIds.length === 0) throw validationFailed("Text can't be blank");
  if (chars(text) + chars(spoilerText) > MAX_CHARS)
    throw validationFailed(`Text character limit of ${MAX_CHARS} exceeded`);
  if (!VISIBILITIES.has(visibility)) throw validationFailed('Visibility is not included in the list');
  if (language !== undefined && !LANGUAGE.test(language)) throw validationFailed('Language is not a valid language');
  if (pollParams !== undefined && mediaIds.length > 0)
    throw validationFailed('Cannot attach files to a post with a poll');
  const poll = pollParams === undefined ? null : { id: store.ids.next(), ...parsePoll(pollParams) };

  const parent = replyParent(store, inReplyToId, account.id);
  const media = attachableMedia(store, account, mediaIds);

  const now = new Date();
  const status: StatusRecord = {
    id: store.ids.next(now.getTime()),
    accountId: account.id,
    appId: caller.token.appId,
    text,
    spoilerText,
    sensitive,
    visibility: visibility as Visibility,
    language: language ?? primaryLanguage(account.locale),
    inReplyToId: parent?.id ?? null,
    inReplyToAccountId: parent?.accountId ?? null,
    mediaIds: media,
    poll,
    reblogOfId: null,
    createdAt: now,
    deletedAt: null,
    repliesCount: 0,
    reblogsCount: 0,
  };
  store.statuses.set(status.id, status);
  for (const id of media) {
    const record = store.media.get(id);
    if (record !== undefined) record.statusId = status.id;
  }
  if (parent !== undefined) parent.repliesCount += 1;
  account.statusesCount += 1;
  account.lastStatusAt = now;
  return { status: 200, body: statusEntity(status, ctx.view(account.id)) };
};

export const showStatus: Handler = async (ctx) => {
  const viewer = ctx.optionalCaller()?.account ?? null;
  const status = findVisible(ctx, viewer?.id ?? null);
  return { status: 200, body: statusEntity(status, ctx.view(viewer?.id ?? null)) };
};

/** Marks a status deleted and undoes what it counted; a boost's removal also lowers the original's count. */
function removeStatus(store: Store, status: StatusRecord, keepMedia: boolean): void {
  if (status.deletedAt !== null) return;
  status.deletedAt = new Date();
  const author = store.accounts.get(status.accountId);
  if (author !== undefined) author.statusesCount = Math.max(0, author.statusesCount - 1);
  if (status.inReplyToId !== null) {
    const parent = store.statuses.get(status.inReplyToId);
    if (parent !== undefined) parent.repliesCount = Math.max(0, parent.repliesCount - 1);
  }
  if (status.reblogOfId !== null) {
    const original = store.statuses.get(status.reblogOfId);
    if (original !== undefined) original.reblogsCount = Math.max(0, original.reblogsCount - 1);
    store.reblogs.delete(store.reblogKey(status.accountId, status.reblogOfId));
  }
  for (const id of status.mediaIds) {
    const media = store.media.get(id);
    if (media === undefined) continue;
    // Delete-and-redraft: the attachments go back to the author, to be attached to the new draft.
    if (keepMedia) media.statusId = null;
    else store.media.delete(id);
  }
  // Boosts of a deleted status go with it.
  if (status.reblogOfId === null && status.reblogsCount > 0) {
    for (const other of store.statuses.values()) {
      if (other.reblogOfId === status.id && other.deletedAt === null) removeStatus(store, other, false);
    }
  }
}

export const deleteStatus: Handler = async (ctx) => {
  const { account } = ctx.requireUser();
  const { params } = await ctx.params();
  const status = ctx.store.statuses.get(ctx.id);
  if (status === undefined || status.accountId !== account.id) throw notFound();
  if (status.deletedAt !== null) throw gone();
  const deleteMedia = getBool(params, 'delete_media') ?? false;
  // Serialised before removal, so the answer shows the status as it was (with its attachments).
  const body = { ...statusEntity(status, ctx.view(account.id)), text: status.text };
  removeStatus(ctx.store, status, !deleteMedia);
  return { status: 200, body };
};

export const reblogStatus: Handler = async (ctx) => {
  const caller = ctx.requireUser();
  const { account } = caller;
  const { store } = ctx;
  const { params } = await ctx.params();
  const target = findVisible(ctx, account.id);
  // Boosting a boost boosts the original, as Mastodon does.
  const original = target.reblogOfId === null ? target : store.statuses.get(target.reblogOfId);
  if (original === undefined || original.deletedAt !== null) throw gone();
  if (original.visibility === 'direct' || (original.visibility === 'private' && original.accountId !== account.id)) {
    throw validationFailed('Reblog of status is not allowed');
  }
  const visibility = getPresent(params, 'visibility') ?? 'public';
  if (!REBLOG_VISIBILITIES.has(visibility)) throw validationFailed('Visibility is not included in the list');

  const key = store.reblogKey(account.id, original.id);
  const existingId = store.reblogs.get(key);
  const existing = existingId === undefined ? undefined : store.statuses.get(existingId);
  // Boosting twice is not an error: the existing boost is returned.
  if (existing !== undefined && existing.deletedAt === null) {
    return { status: 200, body: statusEntity(existing, ctx.view(account.id)) };
  }

  const now = new Date();
  const reblog: StatusRecord = {
    id: store.ids.next(now.getTime()),
    accountId: account.id,
    appId: caller.token.appId,
    text: '',
    spoilerText: '',
    sensitive: false,
    visibility: visibility as Visibility,
    language: null,
    inReplyToId: null,
    inReplyToAccountId: null,
    mediaIds: [],
    poll: null,
    reblogOfId: original.id,
    createdAt: now,
    deletedAt: null,
    repliesCount: 0,
    reblogsCount: 0,
  };
  store.statuses.set(reblog.id, reblog);
  store.reblogs.set(key, reblog.id);
  original.reblogsCount += 1;
  account.statusesCount += 1;
  account.lastStatusAt = now;
  return { status: 200, body: statusEntity(reblog, ctx.view(account.id)) };
};

export const unreblogStatus: Handler = async (ctx) => {
  const { account } = ctx.requireUser();
  const { store } = ctx;
  const target = findVisible(ctx, account.id);
  const original = target.reblogOfId === null ? target : store.statuses.get(target.reblogOfId);
  if (original === undefined || original.deletedAt !== null) throw gone();
  const reblogId = store.reblogs.get(store.reblogKey(account.id, original.id));
  const reblog = reblogId === undefined ? undefined : store.statuses.get(reblogId);
  // Not boosted is fine: Mastodon answers with the original all the same.
  if (reblog !== undefined) removeStatus(store, reblog, false);
  return { status: 200, body: statusEntity(original, ctx.view(account.id)) };
};
