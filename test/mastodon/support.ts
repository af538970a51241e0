/** @module Helpers for the built-in upstream's tests: a client, sign-up shortcuts and tiny media files. */
import { afterAll, beforeAll } from 'vitest';
import { startUpstream, type RunningUpstream, type UpstreamOptions } from '../../src/mastodon/index.js';

export interface Answer {
  status: number;
  headers: Headers;
  // Tests read arbitrary JSON fields; `any` keeps the assertions short.
  body: any;
}

export interface RequestOptions {
  token?: string;
  query?: string | URLSearchParams;
  json?: unknown;
  form?: URLSearchParams | Record<string, string>;
  multipart?: FormData;
  headers?: Record<string, string>;
  /** A raw body, sent with whatever Content-Type `headers` say. */
  raw?: string | Uint8Array;
}

/** Starts one upstream for the enclosing `describe` (or file) and closes it afterwards. */
export function useUpstream(opts: UpstreamOptions = {}): { readonly url: string; readonly upstream: RunningUpstream } {
  let running: RunningUpstream | undefined;
  beforeAll(async () => {
    running = await startUpstream({ port: 0, ...opts });
  });
  afterAll(async () => {
    await running?.close();
  });
  return {
    get url() {
      if (running === undefined) throw new Error('upstream not started');
      return running.url;
    },
    get upstream() {
      if (running === undefined) throw new Error('upstream not started');
      return running;
    },
  };
}

export async function call(base: string, method: string, path: string, opts: RequestOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token !== undefined) headers['authorization'] = `Bearer ${opts.token}`;
  let body: string | Uint8Array | FormData | URLSearchParams | undefined;
  if (opts.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(opts.json);
  } else if (opts.form !== undefined) {
    body = opts.form instanceof URLSearchParams ? opts.form : new URLSearchParams(opts.form);
  } else if (opts.multipart !== undefined) {
    body = opts.multipart;
  } else if (opts.raw !== undefined) {
    body = opts.raw;
  }
  const query = opts.query === undefined ? '' : `?${opts.query.toString()}`;
  const res = await fetch(`${base}${path}${query}`, { method, headers, ...(body === undefined ? {} : { body }) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON; the raw text is what the test sees.
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

export interface App {
  client_id: string;
  client_secret: string;
}

export async function registerApp(base: string, scopes = 'read write follow push'): Promise<App> {
  const res = await call(base, 'POST', '/api/v1/apps', {
    form: { client_name: 'test app', redirect_uris: 'urn:ietf:wg:oauth:2.0:oob', scopes },
  });
  if (res.status !== 200) throw new Error(`app registration failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as App;
}

export async function appToken(base: string, app?: App): Promise<string> {
  const client = app ?? (await registerApp(base));
  const res = await call(base, 'POST', '/oauth/token', {
    form: {
      grant_type: 'client_credentials',
      client_id: client.client_id,
      client_secret: client.client_secret,
      scope: 'read write',
    },
  });
  if (res.status !== 200) throw new Error(`client credentials failed: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body as { access_token: string }).access_token;
}

/** An app token, and the tokens of `users` fresh users signed up with it: [app, user 1, user 2, …]. */
export async function appAndUsers(base: string, users: number): Promise<string[]> {
  const app = await appToken(base);
  const tokens = [app];
  for (let i = 0; i < users; i++) tokens.push((await newUser(base, app)).token);
  return tokens;
}

let counter = 0;

/** A fresh, unique sign-up; returns the user's token and the names used. */
export async function newUser(
  base: string,
  token?: string,
): Promise<{ token: string; username: string; email: string; password: string }> {
  counter += 1;
  const username = `user${process.pid}_${counter}`;
  const email = `${username}@example.com`;
  const password = 'correct horse battery';
  const res = await call(base, 'POST', '/api/v1/accounts', {
    token: token ?? (await appToken(base)),
    form: { username, email, password, agreement: 'true', locale: 'en' },
  });
  if (res.status !== 200) throw new Error(`sign-up failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { token: (res.body as { access_token: string }).access_token, username, email, password };
}

/** A PNG signature and IHDR header, enough for type and size detection. */
export function png(width = 4, height = 3, padding = 32): Uint8Array {
  const buf = Buffer.alloc(33 + padding);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(buf, 0);
  buf.writeUInt32BE(13, 8);
  buf.write('IHDR', 12, 'latin1');
  buf.writeUInt32BE(width, 16);
  buf.writeUInt32BE(height, 20);
  return new Uint8Array(buf);
}

export function jpeg(): Uint8Array {
  return new Uint8Array([
    0xff,
    0xd8,
    0xff,
    0xe0,
    0x00,
    0x10,
    0x4a,
    0x46,
    0x49,
    0x46,
    0x00,
    0x01,
    ...new Array<number>(40).fill(0),
  ]);
}

export function mp4(): Uint8Array {
  const buf = Buffer.alloc(64);
  buf.writeUInt32BE(32, 0);
  buf.write('ftypisom', 4, 'latin1');
  return new Uint8Array(buf);
}

export function mp3(): Uint8Array {
  return new Uint8Array([...Buffer.from('ID3', 'latin1'), 0x04, 0x00, ...new Array<number>(40).fill(0)]);
}

/** A multipart form with `file` (and whatever else is given); no part type, so only sniffing decides. */
export function mediaForm(file: Uint8Array, fields: Record<string, string> = {}, filename = 'upload.bin'): FormData {
  const form = new FormData();
  form.append('file', new Blob([file]), filename);
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  return form;
}
