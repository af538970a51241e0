/** @module Statuses: posting (with media and polls, in every encoding), reading, deleting, boosting. */
import { beforeAll, describe, expect, it } from 'vitest';
import { appAndUsers, call, mediaForm, mp4, png, useUpstream, type Answer } from './support.js';

const server = useUpstream();
let app = '';
let alice = '';
let bob = '';

beforeAll(async () => {
  [app = '', alice = '', bob = ''] = await appAndUsers(server.url, 2);
});

function post(token: string, form: Record<string, string> | URLSearchParams): Promise<Answer> {
  return call(server.url, 'POST', '/api/v1/statuses', { token, form });
}

async function postText(token: string, status: string, extra: Record<string, string> = {}): Promise<string> {
  const res = await post(token, { status, ...extra });
  expect(res.status).toBe(200);
  return res.body.id as string;
}

async function uploadMedia(token: string, file: Uint8Array = png()): Promise<string> {
  const res = await call(server.url, 'POST', '/api/v1/media', { token, multipart: mediaForm(file) });
  expect(res.status).toBe(200);
  return res.body.id as string;
}

describe('POST /api/v1/statuses', () => {
  it('creates a Status with HTML-escaped content in paragraphs', async () => {
    const res = await post(alice, { status: 'Hello <world> & "friends"\nsecond line\n\nnew paragraph' });
    expect(res.status).toBe(200);
    expect(res.body.content).toBe(
      '<p>Hello &lt;world&gt; &amp; &quot;friends&quot;<br />second line</p><p>new paragraph</p>',
    );
    expect(res.body).toMatchObject({
      visibility: 'public',
      sensitive: false,
      spoiler_text: '',
      language: 'en',
      reblog: null,
      in_reply_to_id: null,
      media_attachments: [],
      mentions: [],
      tags: [],
      poll: null,
      reblogs_count: 0,
      replies_count: 0,
      favourited: false,
      reblogged: false,
    });
    expect(res.body.id).toMatch(/^\d+$/);
    expect(new Date(res.body.created_at as string).toISOString()).toBe(res.body.created_at);
    expect(res.body.account.statuses_count).toBe(1);
  });

  it('gives increasing ids', async () => {
    const first = BigInt(await postText(alice, 'one'));
    const second = BigInt(await postText(alice, 'two'));
    expect(second > first).toBe(true);
  });

  it('attaches media given as media_ids[] and accepts media without text', async () => {
    const a = await uploadMedia(alice);
    const b = await uploadMedia(alice);
    const res = await post(
      alice,
      new URLSearchParams([
        ['media_ids[]', a],
        ['media_ids[]', b],
      ]),
    );
    expect(res.status).toBe(200);
    expect(res.body.media_attachments.map((m: { id: string }) => m.id)).toEqual([a, b]);
    expect(res.body.content).toBe('');
  });

  it('answers 422 with neither text nor media', async () => {
    const res = await post(alice, { status: '   ' });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ error: "Validation failed: Text can't be blank" });
  });

  it("answers 422 for media that is unknown, not the caller's, already used, or more than four", async () => {
    expect((await post(alice, { 'media_ids[]': '12345', status: 'x' })).status).toBe(422);
    const bobs = await uploadMedia(bob);
    expect((await post(alice, { 'media_ids[]': bobs, status: 'x' })).status).toBe(422);
    const used = await uploadMedia(alice);
    expect((await post(alice, { 'media_ids[]': used })).status).toBe(200);
    expect((await post(alice, { 'media_ids[]': used })).status).toBe(422);
    const five = await Promise.all(Array.from({ length: 5 }, () => uploadMedia(alice)));
    const res = await post(alice, new URLSearchParams(five.map((id): [string, string] => ['media_ids[]', id])));
    expect(res.status).toBe(422);
    expect(res.body.error).toMatch(/more than 4/);
  });

  it('answers 422 for a video together with images', async () => {
    const image = await uploadMedia(alice);
    const video = await uploadMedia(alice, mp4());
    expect(
      (
        await post(
          alice,
          new URLSearchParams([
            ['media_ids[]', image],
            ['media_ids[]', video],
          ]),
        )
      ).status,
    ).toBe(422);
  });

  it('answers 422 for text over 500 characters, counting the content warning', async () => {
    expect((await post(alice, { status: 'x'.repeat(501) })).status).toBe(422);
    expect((await post(alice, { status: 'x'.repeat(400), spoiler_text: 'y'.repeat(101) })).status).toBe(422);
    expect((await post(alice, { status: '🐘'.repeat(500) })).status).toBe(200);
  });

  it('answers 422 for an unknown visibility or a malformed language', async () => {
    expect((await post(alice, { status: 'x', visibility: 'secret' })).status).toBe(422);
    expect((await post(alice, { status: 'x', language: 'not a language' })).status).toBe(422);
  });

  it('reads sensitive as a boolean, an empty value meaning not given', async () => {
    const on = await post(alice, { status: 'x', sensitive: 'true' });
    expect(on.body.sensitive).toBe(true);
    const off = await post(alice, { status: 'x', sensitive: 'false' });
    expect(off.body.sensitive).toBe(false);
    const empty = await post(alice, { status: 'x', sensitive: '' });
    expect(empty.body.sensitive).toBe(false);
    const json = await call(server.url, 'POST', '/api/v1/statuses', {
      token: alice,
      json: { status: 'x', sensitive: true },
    });
    expect(json.body.sensitive).toBe(true);
  });

  it('marks a post with a content warning sensitive and keeps visibility and language', async () => {
    const res = await post(alice, { status: 'x', spoiler_text: 'cw', visibility: 'unlisted', language: 'de' });
    expect(res.body).toMatchObject({ sensitive: true, spoiler_text: 'cw', visibility: 'unlisted', language: 'de' });
  });

  it('creates a poll from a URL-encoded form', async () => {
    const res = await post(
      alice,
      new URLSearchParams([
        ['status', 'Which?'],
        ['poll[options][]', 'Tea'],
        ['poll[options][]', 'Coffee'],
        ['poll[expires_in]', '3600'],
        ['poll[multiple]', 'true'],
      ]),
    );
    expect(res.status).toBe(200);
    expect(res.body.poll).toMatchObject({
      multiple: true,
      expired: false,
      votes_count: 0,
      options: [
        { title: 'Tea', votes_count: 0 },
        { title: 'Coffee', votes_count: 0 },
      ],
    });
    const expires = new Date(res.body.poll.expires_at as string).getTime();
    expect(Math.abs(expires - (Date.now() + 3600_000))).toBeLessThan(60_000);
  });

  it('creates the same poll from JSON, multipart and the query string', async () => {
    const json = await call(server.url, 'POST', '/api/v1/statuses', {
      token: alice,
      json: { status: 'Which?', poll: { options: ['A', 'B'], expires_in: 600, multiple: false } },
    });
    const form = new FormData();
    form.append('status', 'Which?');
    form.append('poll[options][]', 'A');
    form.append('poll[options][]', 'B');
    form.append('poll[expires_in]', '600');
    form.append('poll[multiple]', '0');
    const multipart = await call(server.url, 'POST', '/api/v1/statuses', { token: alice, multipart: form });
    const query = await call(server.url, 'POST', '/api/v1/statuses', {
      token: alice,
      query: 'status=Which%3F&poll[options][]=A&poll[options][]=B&poll[expires_in]=600&poll[multiple]=',
    });
    for (const res of [json, multipart, query]) {
      expect(res.status).toBe(200);
      expect(res.body.content).toBe('<p>Which?</p>');
      expect(res.body.poll.options.map((o: { title: string }) => o.title)).toEqual(['A', 'B']);
      expect(res.body.poll.multiple).toBe(false);
    }
  });

  it('answers 422 for polls with too few, too many, duplicate options or a bad expiry', async () => {
    const poll = (options: string[], expires: string): URLSearchParams =>
      new URLSearchParams([
        ['status', 'q'],
        ...options.map((o): [string, string] => ['poll[options][]', o]),
        ['poll[expires_in]', expires],
      ]);
    for (const params of [
      poll(['only'], '600'),
      poll(['a', 'b', 'c', 'd', 'e'], '600'),
      poll(['same', 'same'], '600'),
      poll(['a', 'b'], '10'),
      poll(['a', 'b'], '99999999'),
      poll(['a', 'b'], 'soon'),
      poll(['a', 'x'.repeat(51)], '600'),
    ]) {
      const res = await post(alice, params);
      expect(res.status, params.toString().slice(0, 80)).toBe(422);
      expect(res.body.error).toMatch(/^Validation failed: /);
    }
  });

  it('answers 422 when poll is text rather than a hash', async () => {
    expect((await post(alice, { status: 'q', poll: 'yes' })).status).toBe(422);
  });

  it('threads replies and counts them', async () => {
    const parent = await postText(bob, 'parent');
    const reply = await post(alice, { status: 'reply', in_reply_to_id: parent });
    expect(reply.status).toBe(200);
    expect(reply.body.in_reply_to_id).toBe(parent);
    const shown = await call(server.url, 'GET', `/api/v1/statuses/${parent}`);
    expect(reply.body.in_reply_to_account_id).toBe(shown.body.account.id);
    expect(shown.body.replies_count).toBe(1);
    expect((await post(alice, { status: 'reply', in_reply_to_id: '999' })).status).toBe(404);
  });

  it('answers 401 without a token and 422 for an app token', async () => {
    expect((await call(server.url, 'POST', '/api/v1/statuses', { form: { status: 'x' } })).status).toBe(401);
    const res = await post(app, { status: 'x' });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ error: 'This method requires an authenticated user' });
  });
});

describe('GET /api/v1/statuses/:id', () => {
  it('shows a public status without a token, without per-viewer fields', async () => {
    const id = await postText(alice, 'public post');
    const res = await call(server.url, 'GET', `/api/v1/statuses/${id}`);
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(id);
    expect(res.body.content).toBe('<p>public post</p>');
    expect(res.body).not.toHaveProperty('favourited');
    expect(res.body).not.toHaveProperty('application');
  });

  it('shows a private status to its author only', async () => {
    const id = await postText(alice, 'private post', { visibility: 'private' });
    expect((await call(server.url, 'GET', `/api/v1/statuses/${id}`, { token: alice })).status).toBe(200);
    expect((await call(server.url, 'GET', `/api/v1/statuses/${id}`, { token: bob })).status).toBe(404);
    expect((await call(server.url, 'GET', `/api/v1/statuses/${id}`)).status).toBe(404);
  });

  it('answers 404 Record not found for an unknown or non-numeric id', async () => {
    const res = await call(server.url, 'GET', '/api/v1/statuses/424242');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'Record not found' });
    expect((await call(server.url, 'GET', '/api/v1/statuses/abc')).status).toBe(404);
  });

  it('answers 410 with an error body for a deleted status', async () => {
    const id = await postText(alice, 'soon gone');
    expect((await call(server.url, 'DELETE', `/api/v1/statuses/${id}`, { token: alice })).status).toBe(200);
    const res = await call(server.url, 'GET', `/api/v1/statuses/${id}`);
    expect(res.status).toBe(410);
    expect(res.body).toEqual({ error: 'Record not found' });
  });
});

describe('DELETE /api/v1/statuses/:id', () => {
  it('returns the deleted Status with its plain source as text', async () => {
    const source = 'delete <me> & redraft';
    const id = await postText(alice, source);
    const res = await call(server.url, 'DELETE', `/api/v1/statuses/${id}`, { token: alice });
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(id);
    expect(res.body.text).toBe(source);
    expect(res.body.content).toBe('<p>delete &lt;me&gt; &amp; redraft</p>');
  });

  it('gives the media back for a redraft unless delete_media is set', async () => {
    const media = await uploadMedia(alice);
    const first = await post(alice, { 'media_ids[]': media });
    const deleted = await call(server.url, 'DELETE', `/api/v1/statuses/${first.body.id as string}`, { token: alice });
    expect(deleted.body.media_attachments[0].id).toBe(media);
    const redraft = await post(alice, { 'media_ids[]': media, status: 'again' });
    expect(redraft.status).toBe(200);
    await call(server.url, 'DELETE', `/api/v1/statuses/${redraft.body.id as string}`, {
      token: alice,
      query: 'delete_media=true',
    });
    expect((await post(alice, { 'media_ids[]': media })).status).toBe(422);
  });

  it("answers 404 for an unknown status or someone else's, and leaves theirs alone", async () => {
    const id = await postText(bob, 'not yours');
    const res = await call(server.url, 'DELETE', `/api/v1/statuses/${id}`, { token: alice });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'Record not found' });
    expect((await call(server.url, 'GET', `/api/v1/statuses/${id}`)).status).toBe(200);
    expect((await call(server.url, 'DELETE', '/api/v1/statuses/777', { token: alice })).status).toBe(404);
  });

  it('answers 410 when the author deletes the same status twice', async () => {
    const id = await postText(alice, 'twice');
    expect((await call(server.url, 'DELETE', `/api/v1/statuses/${id}`, { token: alice })).status).toBe(200);
    expect((await call(server.url, 'DELETE', `/api/v1/statuses/${id}`, { token: alice })).status).toBe(410);
  });

  it('answers 401 without a token and 422 for an app token', async () => {
    const id = await postText(alice, 'kept');
    expect((await call(server.url, 'DELETE', `/api/v1/statuses/${id}`)).status).toBe(401);
    expect((await call(server.url, 'DELETE', `/api/v1/statuses/${id}`, { token: app })).status).toBe(422);
  });
});

describe('POST /api/v1/statuses/:id/reblog and /unreblog', () => {
  it('boosts: a wrapper Status by the booster whose reblog is the original, marked reblogged', async () => {
    const id = await postText(alice, 'boost me');
    const res = await call(server.url, 'POST', `/api/v1/statuses/${id}/reblog`, { token: bob });
    expect(res.status).toBe(200);
    expect(res.body.id).not.toBe(id);
    expect(res.body.content).toBe('');
    expect(res.body.reblogged).toBe(true);
    expect(res.body.reblog).toMatchObject({ id, reblogged: true, reblogs_count: 1, content: '<p>boost me</p>' });
    expect(res.body.account.id).not.toBe(res.body.reblog.account.id);
  });

  it('returns the existing boost when boosting twice, and boosts the original of a boost', async () => {
    const id = await postText(alice, 'again');
    const first = await call(server.url, 'POST', `/api/v1/statuses/${id}/reblog`, { token: bob });
    const second = await call(server.url, 'POST', `/api/v1/statuses/${id}/reblog`, { token: bob });
    expect(second.body.id).toBe(first.body.id);
    expect(second.body.reblog.reblogs_count).toBe(1);
    const ofWrapper = await call(server.url, 'POST', `/api/v1/statuses/${first.body.id as string}/reblog`, {
      token: alice,
    });
    expect(ofWrapper.body.reblog.id).toBe(id);
    expect(ofWrapper.body.reblog.reblogs_count).toBe(2);
  });

  it('undoes a boost: the original with reblogged false, the wrapper gone', async () => {
    const id = await postText(alice, 'undo');
    const boost = await call(server.url, 'POST', `/api/v1/statuses/${id}/reblog`, { token: bob });
    const res = await call(server.url, 'POST', `/api/v1/statuses/${id}/unreblog`, { token: bob });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id, reblogged: false, reblogs_count: 0 });
    expect((await call(server.url, 'GET', `/api/v1/statuses/${boost.body.id as string}`)).status).toBe(410);
  });

  it('answers unreblog of a status never boosted with the original, reblogged false', async () => {
    const id = await postText(alice, 'never boosted');
    const res = await call(server.url, 'POST', `/api/v1/statuses/${id}/unreblog`, { token: bob });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id, reblogged: false });
  });

  it('answers 404 for boosting or unboosting a missing status', async () => {
    for (const action of ['reblog', 'unreblog']) {
      const res = await call(server.url, 'POST', `/api/v1/statuses/31337/${action}`, { token: bob });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'Record not found' });
    }
  });

  it("answers 404 for boosting someone else's private status and 422 for a direct one of one's own", async () => {
    const priv = await postText(alice, 'private', { visibility: 'private' });
    expect((await call(server.url, 'POST', `/api/v1/statuses/${priv}/reblog`, { token: bob })).status).toBe(404);
    const direct = await postText(alice, 'direct', { visibility: 'direct' });
    expect((await call(server.url, 'POST', `/api/v1/statuses/${direct}/reblog`, { token: alice })).status).toBe(422);
  });

  it('removes boosts when the original is deleted', async () => {
    const id = await postText(alice, 'going');
    const boost = await call(server.url, 'POST', `/api/v1/statuses/${id}/reblog`, { token: bob });
    await call(server.url, 'DELETE', `/api/v1/statuses/${id}`, { token: alice });
    expect((await call(server.url, 'GET', `/api/v1/statuses/${boost.body.id as string}`)).status).toBe(410);
    expect((await call(server.url, 'POST', `/api/v1/statuses/${id}/reblog`, { token: bob })).status).toBe(410);
  });

  it('answers 401 without a token', async () => {
    const id = await postText(alice, 'x');
    expect((await call(server.url, 'POST', `/api/v1/statuses/${id}/reblog`)).status).toBe(401);
    expect((await call(server.url, 'POST', `/api/v1/statuses/${id}/unreblog`)).status).toBe(401);
  });
});
