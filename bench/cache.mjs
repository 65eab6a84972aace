// The response cache's memory bound: 1,000,000 distinct getPet keys (each a Pet body of the
// interface's size) through the memory store (dist), which must stay within `maxBytes` by its own
// count and, run with --expose-gc, by the heap and array buffers it really grew after GC. Prints one JSON line; exits 1 when the bound is broken.
//
//   npm run build && node --expose-gc bench/cache.mjs
//
// Environment: BENCH_CACHE_KEYS (1000000), BENCH_CACHE_MAX_BYTES (67108864).
import { MemoryCacheStore } from '../dist/policies/cache/memory.js';
import { envNum, isMain } from './lib.mjs';

const gc = globalThis.gc;
// The heap and the Buffers' array buffers after a full GC (only measured with --expose-gc).
const heapMb = () => {
  gc?.();
  gc?.();
  const m = process.memoryUsage();
  return (m.heapUsed + m.arrayBuffers) / 1048576;
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
  const growth = after - before;
  // The store's own count within maxBytes, and (measured with GC) the process's real growth too.
  const held = worst <= maxBytes && (gc === undefined || growth * 1048576 <= maxBytes);
  return { keys, maxBytes, entries: store.count, heldBytes: store.size, worstHeldBytes: worst, heapGrowthMb: Number(growth.toFixed(1)), gcMeasured: gc !== undefined, held };
}

if (isMain(import.meta.url)) {
  const r = runCacheBound();
  process.stdout.write(JSON.stringify(r) + '\n');
  // With --json (bench/run.mjs) the verdict travels in the JSON line, which a failing exit would lose.
  if (!r.held && !process.argv.includes('--json')) process.exitCode = 1;
}
