// Preloaded into a gateway a bench measures (`node --expose-gc --import ./bench/lib/gc-probe.mjs …`): on
// SIGUSR2, three full GCs, then one line `gc-probe {"rss":…,"heap":…}` on stderr (heap: used + external).
process.on('SIGUSR2', () => {
  for (let i = 0; i < 3; i++) globalThis.gc();
  const m = process.memoryUsage();
  process.stderr.write(`gc-probe ${JSON.stringify({ rss: m.rss, heap: m.heapUsed + m.external })}\n`);
});
