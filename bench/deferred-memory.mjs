// Diagnostic launcher (bench/run.ts system `rategate-memory-deferred`, only with --only): the compiled
// gateway with the memory store's answers delivered one event-loop turn later (setImmediate), as the
// Redis store's batching delivers them, without Redis. It tells the cost of the asynchronous decision
// itself (turns, promise hops) apart from ioredis, sockets and a fourth busy process.
//   node bench/deferred-memory.mjs <dist dir> serve …
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const dist = path.resolve(process.argv[2]);
const { MemoryStore } = await import(pathToFileURL(path.join(dist, 'limiter', 'memory', 'store.js')).href);
MemoryStore.prototype.consume = function consume(specs) {
  const out = this.consumeSync(specs);
  return new Promise((resolve) => setImmediate(resolve, out));
};
// No synchronous answer either: every decision takes the deferred path.
MemoryStore.prototype.consumeLocal = () => undefined;
process.argv.splice(2, 1);
await import(pathToFileURL(path.join(dist, 'cli', 'index.js')).href);
