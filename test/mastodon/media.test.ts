/** @module Media uploads: type sniffing, validation, limits, v1 and v2 answers, and reading an attachment back. */
import http from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { appAndUsers, call, jpeg, mediaForm, mp3, mp4, png, useUpstream } from './support.js';

const LIMIT = 64 * 1024;
const server = useUpstream({ maxUploadBytes: LIMIT, baseUrl: 'https://social.example' });
let user = '';
let other = '';
let app = '';

beforeAll(async () => {
  [app = '', user = '', other = ''] = await appAndUsers(server.url, 2);
});

function upload(version: 1 | 2, form: FormData, token = user): ReturnType<typeof call> {
  return call(server.url, 'POST', `/api/v${version}/media`, { token, multipart: form });
}

describe('POST /api/v1/media', () => {
  it('answers 200 with a finished image attachment, its size read from the file', async () => {
    const res = await upload(1, mediaForm(png(640, 480), { description: 'a test image' }, 'cat.png'));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      type: 'image',
      description: 'a test image',
      remote_url: null,
      blurhash: null,
      meta: { original: { width: 640, height: 480, size: '640x480' } },
    });
    expect(res.body.id).toMatch(/^\d+$/);
    expect(res.body.url).toMatch(
      /^https:\/\/social\.example\/system\/media_attachments\/files\/\d+\/original\/\d+\.png$/,
    );
    expect(res.body.preview_url).toMatch(/^https:\/\/social\.example\//);
  });

  it('detects the type from the content, not from the declared part type or name', async () => {
    const form = new FormData();
    form.append('file', new Blob([jpeg()], { type: 'video/mp4' }), 'misleading.mp4');
    const res = await upload(1, form);
    expect(res.status).toBe(200);
    expect(res.body.type).toBe('image');
    expect(res.body.url).toMatch(/\.jpg$/);
  });

  it('answers 200 with a finished video on v1', async () => {
    const res = await upload(1, mediaForm(mp4()));
    expect(res.status).toBe(200);
    expect(res.body.type).toBe('video');
    expect(res.body.url).toMatch(/\.mp4$/);
  });

  it('records a valid focus point in meta', async () => {
    const res = await upload(1, mediaForm(png(), { focus: '-0.5,1.0' }));
    expect(res.status).toBe(200);
    expect(res.body.meta.focus).toEqual({ x: -0.5, y: 1 });
  });

  it.each(['1.5,0', '0', 'a,b', '0,0,0', '0,-1.01'])('answers 422 for focus %j', async (focus) => {
    const res = await upload(1, mediaForm(png(), { focus }));
    expect(res.status).toBe(422);
    expect(res.body.error).toMatch(/^Validation failed: Focus/);
  });

  it('answers 422 "File content type is invalid" for an unsupported format', async () => {
    const res = await upload(1, mediaForm(new TextEncoder().encode('just some text, not media at all')));
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ error: 'Validation failed: File content type is invalid' });
  });

  it('answers 422 when the file is missing, empty, or sent as a plain field', async () => {
    const noFile = new FormData();
    noFile.append('description', 'nothing attached');
    expect((await upload(1, noFile)).status).toBe(422);
    expect((await upload(1, mediaForm(new Uint8Array(0)))).status).toBe(422);
    const asField = new FormData();
    asField.append('file', 'not a file');
    const res = await upload(1, asField);
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("Validation failed: File can't be blank");
    const json = await call(server.url, 'POST', '/api/v1/media', { token: user, json: { file: 'x' } });
    expect(json.status).toBe(422);
  });

  it('accepts an image thumbnail and refuses any other with 422', async () => {
    const good = mediaForm(mp3());
    good.append('thumbnail', new Blob([png()]), 'thumb.png');
    const ok = await upload(1, good);
    expect(ok.status).toBe(200);
    expect(ok.body.type).toBe('audio');
    expect(ok.body.preview_url).not.toBeNull();
    const bad = mediaForm(mp3());
    bad.append('thumbnail', new Blob([mp4()]), 'thumb.mp4');
    const refused = await upload(1, bad);
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatch(/Thumbnail/);
  });

  it('answers 422 for a description over 1500 characters', async () => {
    const res = await upload(1, mediaForm(png(), { description: 'x'.repeat(1501) }));
    expect(res.status).toBe(422);
  });

  it('answers 401 without a token and 422 for an app token', async () => {
    const none = await call(server.url, 'POST', '/api/v1/media', { multipart: mediaForm(png()) });
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ error: 'The access token is invalid' });
    const appOnly = await upload(1, mediaForm(png()), app);
    expect(appOnly.status).toBe(422);
    expect(appOnly.body).toEqual({ error: 'This method requires an authenticated user' });
  });

  it('answers 413 JSON for a file over the limit and keeps serving', async () => {
    const big = new Uint8Array(LIMIT + 1);
    big.set(png());
    const res = await upload(1, mediaForm(big));
    expect(res.status).toBe(413);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body.error).toMatch(/too large/);
    expect((await upload(1, mediaForm(png()))).status).toBe(200);
  });

  it('accepts a file of exactly the limit', async () => {
    const exact = new Uint8Array(LIMIT);
    exact.set(png());
    expect((await upload(1, mediaForm(exact))).status).toBe(200);
  });

  it('answers 413 at once for a declared length far over the limit, before the body is sent', async () => {
    const url = new URL('/api/v1/media', server.url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${user}`,
          'content-type': 'multipart/form-data; boundary=XYZ',
          'content-length': String(1024 * 1024 * 1024),
        },
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
        req.destroy();
      });
      req.on('error', reject);
      // Only the headers go out: the answer must not wait for a gigabyte that never comes.
      req.flushHeaders();
    });
    expect(status).toBe(413);
  });
});

describe('POST /api/v2/media and GET /api/v1/media/:id', () => {
  it('answers 200 for an image on v2', async () => {
    const res = await upload(2, mediaForm(png()));
    expect(res.status).toBe(200);
    expect(res.body.url).not.toBeNull();
  });

  it('answers 202 with url null for video and audio, then GET shows the finished url', async () => {
    for (const file of [mp4(), mp3()]) {
      const res = await upload(2, mediaForm(file));
      expect(res.status).toBe(202);
      expect(res.body.url).toBeNull();
      const shown = await call(server.url, 'GET', `/api/v1/media/${res.body.id as string}`, { token: user });
      expect(shown.status).toBe(200);
      expect(shown.body.id).toBe(res.body.id);
      expect(shown.body.url).toMatch(/^https:\/\/social\.example\//);
    }
  });

  it("answers 404 for an unknown id or someone else's attachment", async () => {
    const mine = await upload(2, mediaForm(png()));
    expect((await call(server.url, 'GET', `/api/v1/media/${mine.body.id as string}`, { token: other })).status).toBe(
      404,
    );
    const unknown = await call(server.url, 'GET', '/api/v1/media/1', { token: user });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error: 'Record not found' });
  });

  it('answers 401 for GET without a token', async () => {
    expect((await call(server.url, 'GET', '/api/v1/media/1')).status).toBe(401);
  });
});
