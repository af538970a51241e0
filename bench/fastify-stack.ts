/**
 * @module The comparison stack: fastify + @fastify/rate-limit (Redis store) + @fastify/reply-from.
 *
 * One rate limit per request, keyed by client IP (trustProxy, so X-Forwarded-For from loopback counts),
 * limit 1e9 per hour so nothing is rejected; `GET /api/v1/exhausted` has its own route limit of 1 per
 * hour (the rejected scenario). Bodies are not parsed (every content type is passed through as a stream).
 * Logger off, as the other systems' access logs are. Without `--redis`, @fastify/rate-limit's own
 * in-process store (its memory peer).
 *
 *   node --import tsx bench/fastify-stack.ts --listen 127.0.0.1:8082 --upstream http://127.0.0.1:3000 [--redis redis://127.0.0.1:6390]
 */
import { parseArgs } from 'node:util';
import Fastify from 'fastify';
import rateLimit from '@fastify/rate-limit';
import replyFrom from '@fastify/reply-from';
import { Redis } from 'ioredis';

const { values } = parseArgs({
  options: { listen: { type: 'string' }, upstream: { type: 'string' }, redis: { type: 'string' } },
});
const [host, port] = (values.listen ?? '127.0.0.1:8082').split(':') as [string, string];
const redis = values.redis === undefined ? undefined : new Redis(values.redis, { maxRetriesPerRequest: 1 });

const app = Fastify({ logger: false, trustProxy: true });
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', (_req, _payload, done) => done(null));
await app.register(rateLimit, {
  global: true,
  max: 1_000_000_000,
  timeWindow: '1 hour',
  ...(redis ? { redis, nameSpace: 'fastify-bench-' } : {}),
});
await app.register(replyFrom, {
  base: values.upstream ?? 'http://127.0.0.1:3000',
  undici: { connections: 128, pipelining: 1 },
});

app.get('/api/v1/exhausted', { config: { rateLimit: { max: 1, timeWindow: '1 hour' } } }, (_req, reply) =>
  reply.from(),
);
app.all('/*', (_req, reply) => reply.from());

await app.listen({ host, port: Number(port) });
console.log(`fastify stack on http://${host}:${port}`);
const stop = (): void => {
  void app.close().then(() => {
    redis?.disconnect();
    process.exit(0);
  });
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
