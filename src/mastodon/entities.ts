/** @module Mastodon's JSON entities (Application, Token, Account, MediaAttachment, Status, Poll) from the records. */
import type { AccountRecord, AppRecord, MediaRecord, PollRecord, StatusRecord, Store, TokenRecord } from './store.js';

export interface View {
  readonly store: Store;
  readonly baseUrl: string;
  /** The account asking, for the per-viewer fields; null for an anonymous or app-only caller. */
  readonly viewerId: string | null;
}

export function applicationEntity(app: AppRecord, withSecret: boolean): Record<string, unknown> {
  const entity: Record<string, unknown> = {
    id: app.id,
    name: app.name,
    website: app.website,
    scopes: app.scopes,
    redirect_uri: app.redirectUris.join('\n'),
    redirect_uris: app.redirectUris,
    vapid_key: null,
  };
  if (withSecret) {
    entity['client_id'] = app.clientId;
    entity['client_secret'] = app.clientSecret;
    entity['client_secret_expires_at'] = 0;
  }
  return entity;
}

export function tokenEntity(token: string, record: TokenRecord): Record<string, unknown> {
  return {
    access_token: token,
    token_type: 'Bearer',
    scope: record.scopes.join(' '),
    created_at: record.createdAt,
  };
}

/** Mastodon reports an account's creation as midnight UTC of that day, so sign-up times do not leak. */
function dayStart(date: Date): string {
  return `${date.toISOString().slice(0, 10)}T00:00:00.000Z`;
}

export function accountEntity(account: AccountRecord, baseUrl: string): Record<string, unknown> {
  const avatar = `${baseUrl}/avatars/original/missing.png`;
  const header = `${baseUrl}/headers/original/missing.png`;
  return {
    id: account.id,
    username: account.username,
    acct: account.username,
    display_name: '',
    locked: account.locked,
    bot: account.bot,
    discoverable: null,
    indexable: false,
    group: false,
    created_at: dayStart(account.createdAt),
    note: '',
    url: `${baseUrl}/@${account.username}`,
    uri: `${baseUrl}/users/${account.username}`,
    avatar,
    avatar_static: avatar,
    header,
    header_static: header,
    followers_count: 0,
    following_count: 0,
    statuses_count: account.statusesCount,
    last_status_at: account.lastStatusAt === null ? null : account.lastStatusAt.toISOString().slice(0, 10),
    emojis: [],
    fields: [],
  };
}

/** The caller's own account, with `source` (what the profile editor needs) and `role`. */
export function credentialAccountEntity(account: AccountRecord, baseUrl: string): Record<string, unknown> {
  return {
    ...accountEntity(account, baseUrl),
    source: {
      privacy: 'public',
      sensitive: false,
      language: primaryLanguage(account.locale),
      note: '',
      fields: [],
      follow_requests_count: 0,
      hide_collections: null,
      discoverable: null,
      indexable: false,
    },
    role: { id: '-99', name: '', permissions: '0', color: '', highlighted: false },
  };
}

export function primaryLanguage(locale: string): string {
  return (locale.split('-', 1)[0] ?? locale).toLowerCase();
}

export function mediaEntity(media: MediaRecord, baseUrl: string, processing = false): Record<string, unknown> {
  const path = `${baseUrl}/system/media_attachments/files/${media.id}`;
  const meta: Record<string, unknown> = {};
  if (media.dimensions !== null) {
    const { width, height } = media.dimensions;
    meta['original'] = { width, height, size: `${width}x${height}`, aspect: width / height };
  }
  if (media.focus !== null) meta['focus'] = { x: media.focus.x, y: media.focus.y };
  const hasPreview = media.type === 'image' || media.hasThumbnail;
  return {
    id: media.id,
    type: media.type,
    url: processing ? null : `${path}/original/${media.id}.${media.extension}`,
    preview_url: hasPreview ? `${path}/small/${media.id}.${media.type === 'image' ? media.extension : 'png'}` : null,
    remote_url: null,
    preview_remote_url: null,
    text_url: null,
    meta,
    description: media.description,
    blurhash: null,
  };
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) =>
    c === '&' ? '&amp;' : c === '<' ? '&lt;' : c === '>' ? '&gt;' : c === '"' ? '&quot;' : '&#39;',
  );
}

/** Plain text as Mastodon renders it: blank lines split paragraphs, single newlines become breaks. */
export function textToHtml(text: string): string {
  if (text === '') return '';
  return text
    .replace(/\r\n?/g, '\n')
    .split(/\n{2,}/)
    .map((para) => `<p>${escapeHtml(para).replace(/\n/g, '<br />')}</p>`)
    .join('');
}

function pollEntity(poll: PollRecord, ownerId: string, view: View): Record<string, unknown> {
  const entity: Record<string, unknown> = {
    id: poll.id,
    expires_at: poll.expiresAt.toISOString(),
    expired: poll.expiresAt.getTime() <= Date.now(),
    multiple: poll.multiple,
    votes_count: 0,
    voters_count: poll.multiple ? 0 : null,
    options: poll.options.map((title) => ({ title, votes_count: poll.hideTotals ? null : 0 })),
    emojis: [],
  };
  if (view.viewerId !== null) {
    // Mastodon counts a poll's author as having voted, so their client shows the results.
    entity['voted'] = view.viewerId === ownerId;
    entity['own_votes'] = [];
  }
  return entity;
}

export function statusEntity(status: StatusRecord, view: View): Record<string, unknown> {
  const { store, baseUrl, viewerId } = view;
  const account = store.accounts.get(status.accountId);
  if (account === undefined) throw new Error(`status ${status.id} has no account`);
  const original = status.reblogOfId === null ? undefined : store.statuses.get(status.reblogOfId);
  const statusUrl = `${baseUrl}/users/${account.username}/statuses/${status.id}`;
  const entity: Record<string, unknown> = {
    id: status.id,
    created_at: status.createdAt.toISOString(),
    in_reply_to_id: status.inReplyToId,
    in_reply_to_account_id: status.inReplyToAccountId,
    sensitive: status.sensitive,
    spoiler_text: status.spoilerText,
    visibility: status.visibility,
    language: status.language,
    uri: original === undefined ? statusUrl : `${statusUrl}/activity`,
    url: original === undefined ? `${baseUrl}/@${account.username}/${status.id}` : null,
    replies_count: status.repliesCount,
    reblogs_count: status.reblogsCount,
    favourites_count: 0,
    edited_at: null,
    content: textToHtml(status.text),
    reblog: original === undefined ? null : statusEntity(original, view),
    account: accountEntity(account, baseUrl),
    media_attachments: status.mediaIds.flatMap((id) => {
      const media = store.media.get(id);
      return media === undefined ? [] : [mediaEntity(media, baseUrl)];
    }),
    mentions: [],
    tags: [],
    emojis: [],
    card: null,
    poll: status.poll === null ? null : pollEntity(status.poll, status.accountId, view),
  };
  // Mastodon shows the posting app only to the author.
  const app = status.appId === null ? undefined : store.apps.get(status.appId);
  if (viewerId === status.accountId && app !== undefined)
    entity['application'] = { name: app.name, website: app.website };
  if (viewerId !== null) {
    const target = original ?? status;
    entity['favourited'] = false;
    entity['reblogged'] = store.reblogs.has(store.reblogKey(viewerId, target.id));
    entity['muted'] = false;
    entity['bookmarked'] = false;
    if (viewerId === status.accountId) entity['pinned'] = false;
    entity['filtered'] = [];
  }
  return entity;
}
