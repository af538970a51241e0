/**
 * The body peek over real sockets: a client sends a body to a small proxy that peeks at it and
 * forwards `peek.body` with undici to an upstream that hashes what it receives.
 */
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { request as undiciRequest } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { peekBody, ParamBeyondPeekError } from '../../src/rails/body-peek.js';
import { compileWantedParams } from '../../src/rails/request-params.js';
import { scaledMs } from '../support/speed.js';

const MAX = 4096;
const wanted = compileWantedParams(['access_token', 'bearer_token', '_method', 'user[email]']);

interface UpstreamSeen {
  sha256: string;
  bytes: number;
  complete: boolean;
}

let upstream: http.Server;
let upstreamUrl: string;
let proxy: http.Server;
let proxyUrl: string;
const upstreamSeen: UpstreamSeen[] = [];

function listen(server: http.Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    const hash = createHash('sha256');
    let bytes = 0;
    const seen: UpstreamSeen = { sha256: '', bytes: 0, complete: false };
    upstreamSeen.push(seen);
    req.on('data', (c: Buffer) => {
      hash.update(c);
      bytes += c.length;
    });
    req.on('end', () => {
      Object.assign(seen, { sha256: hash.digest('hex'), bytes, complete: true });
      res.end(JSON.stringify(seen));
    });
  });
  upstreamUrl = await listen(upstream);

  proxy = http.createServer((req, res) => {
    void (async () => {
      const peek = await peekBody(req, { wanted, maxBytes: MAX });
      if (peek.kind === 'beyond' || peek.kind === 'malformed') {
        res.writeHead(400, { connection: 'close' });
        res.end(JSON.stringify({ kind: peek.kind, error: peek.message }));
        return;
      }
      const headers: Record<string, string> = {};
      if (req.headers['content-type'] !== undefined) headers['content-type'] = req.headers['content-type'];
      if (req.headers['content-length'] !== undefined) headers['content-length'] = req.headers['content-length'];
      try {
        const up = await undiciRequest(upstreamUrl, { method: 'POST', headers, body: peek.body });
        const seen = (await up.body.json()) as UpstreamSeen;
        res.end(
          JSON.stringify({
            kind: peek.kind,
            values: peek.kind === 'read' ? Object.fromEntries(peek.values) : {},
            form: peek.kind === 'read' && peek.form,
            seen,
          }),
        );
      } catch (err) {
        const beyond =
          err instanceof ParamBeyondPeekError || (err as { cause?: unknown }).cause instanceof ParamBeyondPeekError;
        res.writeHead(400, { connection: 'close' });
        res.end(JSON.stringify({ kind: beyond ? 'beyond-after-forwarding' : 'error', error: (err as Error).message }));
      }
    })();
  });
  proxyUrl = await listen(proxy);
});

afterAll(async () => {
  proxy.closeAllConnections();
  upstream.closeAllConnections();
  await new Promise((r) => proxy.close(r));
  await new Promise((r) => upstream.close(r));
});

interface Answer {
  status: number;
  body: { kind: string; values?: Record<string, string>; form?: boolean; seen?: UpstreamSeen; error?: string };
}

/** Sends `body` (a Buffer, or chunks written one by one: chunked transfer) through the proxy. */
function send(contentType: string | undefined, body: Buffer | Buffer[] | Readable): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const u = new URL(proxyUrl);
    const headers: http.OutgoingHttpHeaders = {};
    if (contentType !== undefined) headers['content-type'] = contentType;
    if (Buffer.isBuffer(body)) headers['content-length'] = body.length;
    const req = http.request(
      { host: u.hostname, port: u.port, method: 'POST', path: '/', headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Answer['body'],
          }),
        );
      },
    );
    req.on('error', reject);
    if (Buffer.isBuffer(body)) req.end(body);
    else if (Array.isArray(body)) {
      for (const c of body) req.write(c);
      req.end();
    } else body.pipe(req);
  });
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

function multipart(
  boundary: string,
  parts: Array<{ name: string; value?: string; file?: Buffer; filename?: string }>,
): Buffer {
  const out: Buffer[] = [];
  for (const p of parts) {
    if (p.file !== undefined) {
      out.push(
        Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"; filename="${p.filename ?? 'f.bin'}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
        ),
      );
      out.push(p.file, Buffer.from('\r\n'));
    } else
      out.push(
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"\r\n\r\n${p.value ?? ''}\r\n`),
      );
  }
  out.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(out);
}

describe('URL-encoded and JSON bodies', () => {
  it('finds a token in a URL-encoded body and forwards the bytes unchanged', async () => {
    const body = Buffer.from('status=hello+world&access_token=tok-123&user[email]=a%40b.c');
    const a = await send('application/x-www-form-urlencoded', body);
    expect(a.status).toBe(200);
    expect(a.body.values).toEqual({ access_token: 'tok-123', 'user[email]': 'a@b.c' });
    expect(a.body.form).toBe(true);
    expect(a.body.seen).toEqual({ sha256: sha(body), bytes: body.length, complete: true });
  });

  it('reads a POST without a Content-Type as a form, as Rack does', async () => {
    const a = await send(undefined, Buffer.from('_method=delete'));
    expect(a.body.values).toEqual({ _method: 'delete' });
  });

  it('finds a token and a nested name in a JSON body, and says it is not a form', async () => {
    const body = Buffer.from(JSON.stringify({ bearer_token: 'tok-json', user: { email: 'x@y.z' }, _method: 'delete' }));
    const a = await send('application/json; charset=utf-8', body);
    expect(a.body.values).toEqual({ bearer_token: 'tok-json', 'user[email]': 'x@y.z', _method: 'delete' });
    expect(a.body.form).toBe(false);
    expect(a.body.seen!.sha256).toBe(sha(body));
  });

  it('reads chunked bodies (no Content-Length) the same way', async () => {
    const parts = [Buffer.from('a=1&acc'), Buffer.from('ess_tok'), Buffer.from('en=tok-chunked')];
    const a = await send('application/x-www-form-urlencoded', parts);
    expect(a.body.values).toEqual({ access_token: 'tok-chunked' });
    expect(a.body.seen).toEqual({ sha256: sha(Buffer.concat(parts)), bytes: 28, complete: true });
  });

  it('reports a body over the bound as beyond, declared or chunked, and never forwards it', async () => {
    const before = upstreamSeen.length;
    const big = Buffer.from(`status=${'x'.repeat(MAX)}&access_token=late`);
    const declared = await send('application/x-www-form-urlencoded', big);
    expect(declared).toMatchObject({ status: 400, body: { kind: 'beyond' } });
    expect(declared.body.error).toMatch(/4096 bytes/);
    const chunked = await send('application/json', [
      Buffer.from('{"s":"'),
      Buffer.alloc(MAX, 0x61),
      Buffer.from('","access_token":"late"}'),
    ]);
    expect(chunked).toMatchObject({ status: 400, body: { kind: 'beyond' } });
    expect(upstreamSeen.length).toBe(before);
  });

  it('refuses a form body whose _method or token reads differently split on "&" and ";" (Rack 3.1 vs Rails 8)', async () => {
    const a = await send('application/x-www-form-urlencoded', Buffer.from('_method=delete&x=1;_method=get'));
    expect(a.body.kind).toBe('malformed');
    expect(a.body.error).toMatch(/%3B/);
  });

  it('reports bodies Rails would refuse as malformed', async () => {
    expect((await send('application/json', Buffer.from('{"a":'))).body.kind).toBe('malformed');
    expect((await send('application/x-www-form-urlencoded', Buffer.from('user=1&user[email]=x'))).body.kind).toBe(
      'malformed',
    );
  });

  it('passes a body of another type through untouched, with no values', async () => {
    const body = randomBytes(10_000);
    const a = await send('application/octet-stream', body);
    expect(a.body).toMatchObject({ kind: 'opaque', seen: { sha256: sha(body), bytes: body.length, complete: true } });
  });
});

describe('multipart bodies', () => {
  it('finds fields before the first file part and forwards every byte, file included', async () => {
    const body = multipart('XyZ', [
      { name: 'access_token', value: 'tok-mp' },
      { name: 'description', value: 'a cat' },
      { name: 'file', file: randomBytes(300_000) },
      { name: 'focus', value: '0.1,0.2' },
    ]);
    const a = await send('multipart/form-data; boundary=XyZ', body);
    expect(a.status).toBe(200);
    expect(a.body.values).toEqual({ access_token: 'tok-mp' });
    expect(a.body.seen).toEqual({ sha256: sha(body), bytes: body.length, complete: true });
  });

  it('reads a multipart body sent in small chunks', async () => {
    const body = multipart('b0', [
      { name: 'user[email]', value: 'm@p.q' },
      { name: 'file', file: randomBytes(50_000) },
    ]);
    const chunks: Buffer[] = [];
    for (let i = 0; i < body.length; i += 7_777) chunks.push(body.subarray(i, i + 7_777));
    const a = await send('multipart/form-data; boundary=b0', chunks);
    expect(a.body.values).toEqual({ 'user[email]': 'm@p.q' });
    expect(a.body.seen!.sha256).toBe(sha(body));
  });

  it('refuses a wanted field after the first file part: the upstream never receives a complete body', async () => {
    const body = multipart('q1', [
      { name: 'file', file: randomBytes(200_000) },
      { name: 'access_token', value: 'tok-late' },
    ]);
    const before = upstreamSeen.length;
    const a = await send('multipart/form-data; boundary=q1', body);
    expect(a.status).toBe(400);
    expect(a.body.kind).toBe('beyond-after-forwarding');
    expect(a.body.error).toMatch(/after a file part/);
    expect(upstreamSeen.slice(before).every((s) => !s.complete)).toBe(true);
  });

  it('reports a wanted field after a file in the held bytes as beyond, before forwarding', async () => {
    const body = multipart('q2', [
      { name: 'file', file: Buffer.from('tiny') },
      { name: '_method', value: 'delete' },
    ]);
    const before = upstreamSeen.length;
    const a = await send('multipart/form-data; boundary=q2', body);
    expect(a.body.kind).toBe('beyond');
    expect(upstreamSeen.length).toBe(before);
  });

  it('lets other fields follow the file', async () => {
    const body = multipart('q3', [
      { name: 'file', file: randomBytes(100_000) },
      { name: 'description', value: 'late but harmless' },
    ]);
    const a = await send('multipart/related; boundary=q3', body);
    expect(a.status).toBe(200);
    expect(a.body.seen!.sha256).toBe(sha(body));
  });

  it('reports fields past the bound with no file part yet as beyond', async () => {
    const body = multipart('q4', [
      { name: 'description', value: 'x'.repeat(MAX * 2) },
      { name: 'access_token', value: 't' },
    ]);
    expect((await send('multipart/form-data; boundary=q4', body)).body.kind).toBe('beyond');
  });

  it('reads the last name= as every Rack does, and refuses a counted name the Rack versions read differently', async () => {
    const raw = Buffer.from(
      '--d1\r\nContent-Disposition: form-data; name="description"; name="access_token"\r\n\r\nhidden-token\r\n--d1--\r\n',
    );
    const last = await send('multipart/form-data; boundary=d1', raw);
    expect(last.body.kind).toBe('read');
    expect(last.body.values).toEqual({ access_token: 'hidden-token' });
    const noName = Buffer.from(
      '--d2\r\nContent-Disposition: form-data\r\nContent-ID: <access_token>\r\n\r\nt\r\n--d2--\r\n',
    );
    expect((await send('multipart/form-data; boundary=d2', noName)).body.kind).toBe('malformed');
    expect((await send('multipart/form-data; boundary=a; boundary=b', Buffer.from('--a\r\n'))).body.kind).toBe(
      'malformed',
    );
  });

  it('refuses any mention of a counted name after a file part, even one busboy would read as another name', async () => {
    const file = multipart('d3', [{ name: 'file', file: randomBytes(100_000) }]).subarray(0, -8); // drop "--d3--\r\n"
    const late = Buffer.concat([
      file,
      Buffer.from('--d3\r\nContent-Disposition: form-data; name="x"; name="access_token"\r\n\r\nt\r\n--d3--\r\n'),
    ]);
    const a = await send('multipart/form-data; boundary=d3', late);
    expect(a.status).toBe(400);
    expect(['beyond', 'beyond-after-forwarding']).toContain(a.body.kind);
  });

  it('reports a multipart body without a boundary as malformed', async () => {
    expect((await send('multipart/form-data', Buffer.from('whatever'))).body.kind).toBe('malformed');
  });

  it(
    'streams a large upload without holding it: memory stays flat while 256 MiB pass',
    async () => {
      const boundary = 'big';
      const head = Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="access_token"\r\n\r\ntok-big\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
      );
      const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
      const block = randomBytes(1024 * 1024);
      const blocks = 256;
      const expected = createHash('sha256').update(head);
      for (let i = 0; i < blocks; i++) expected.update(block);
      expected.update(tail);
      function* gen(): Generator<Buffer> {
        yield head;
        for (let i = 0; i < blocks; i++) yield block;
        yield tail;
      }
      const baseline = process.memoryUsage().rss;
      let peak = baseline;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
      try {
        const a = await send('multipart/form-data; boundary=big', Readable.from(gen()));
        expect(a.body.values).toEqual({ access_token: 'tok-big' });
        expect(a.body.seen).toEqual({
          sha256: expected.digest('hex'),
          bytes: head.length + blocks * block.length + tail.length,
          complete: true,
        });
      } finally {
        clearInterval(sampler);
      }
      if (process.env.PEEK_MEMORY_REPORT) console.log(`rss growth ${((peak - baseline) / 1048576).toFixed(1)} MiB`);
      expect(peak - baseline).toBeLessThan(96 * 1024 * 1024);
    },
    scaledMs(60_000),
  );
});
