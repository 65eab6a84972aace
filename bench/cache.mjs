// The response cache's memory bound: 1,000,000 distinct getPet keys (each a Pet body of the
// interface's size) through the memory store (dist), which must stay within `maxBytes` by its own
// count, with the heap after GC beside it. Prints one JSON line; exits 1 when the bound is broken.
//
//   npm run build && node --expose-gc bench/cache.mjs
//
// Environment: BENCH_CACHE_KEYS (1000000), BENCH_CACHE_MAX_BYTES (67108864).
import { MemoryCacheStore } from '../dist/cache/memory.js';
import { envNum, isMain } from './lib.mjs';

const gc = globalThis.gc ?? (() => {});
const heapMb = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed / 1048576;
};

export function runCacheBound() {
  const keys = envNum('BENCH_CACHE_KEYS', 1_000_000, 1);
  const maxBytes = envNum('BENCH_CACHE_MAX_BYTES', 64 * 1024 * 1024, 1024);
  const now = Date.now();
  const store = new MemoryCacheStore(maxBytes, () => now);
  const before = heapMb();
  let worst = 0;
  for (let i = 0; i < keys; i++) {
    const body = Buffer.from(`{"id":${i},"name":"pet ${i}","categoryId":9223372036854775807,"status":"available"}`);
    store.set(`getPet ${i}`, { status: 200, headers: { 'content-type': 'application/json', 'content-length': String(body.length) }, body, born: now, freshUntil: now + 30_000, staleUntil: now + 330_000 });
    if (store.size > worst) worst = store.size;
  }
  const after = heapMb();
  return { keys, maxBytes, entries: store.count, heldBytes: store.size, worstHeldBytes: worst, heapGrowthMb: Number((after - before).toFixed(1)), held: worst <= maxBytes };
}

if (isMain(import.meta.url)) {
  const r = runCacheBound();
  process.stdout.write(JSON.stringify(r) + '\n');
  // With --json (bench/run.mjs) the verdict travels in the JSON line, which a failing exit would lose.
  if (!r.held && !process.argv.includes('--json')) process.exitCode = 1;
}
