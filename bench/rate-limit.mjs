// The cost of the memory rate-limit store per decision (the target: at most 2 µs per request), and
// of the whole rate-limit policy's onRequest on top of it (headers included), no sockets.
// Keys: one hot key (a consumer that calls all the time) and 10,000 keys in turn (many consumers);
// a limit that never trips, as `npm run bench` runs it. Interleaved rounds, median.
//
//   npx tsc -p tsconfig.json && node bench/rate-limit.mjs
//
// Environment: BENCH_RL_ROUNDS (7), BENCH_RL_MS (150: the length of one pass of one case).
// Exits 1 when the memory store's median is over the 2 µs budget.
import { Chain as CoreChain } from '../dist/core/chain.js';
import { shippedApi } from '../dist/api/index.js';
class Chain extends CoreChain { constructor(p) { super(p, shippedApi().router); } }
import { KEY_ID } from '../dist/policies/auth/facts.js';
import { rateLimit } from '../dist/policies/rate-limit/index.js';
import { MemoryRateLimitStore } from '../dist/stores/memory.js';
import { envNum, fmt, isMain, machine, microRounds, table } from './lib.mjs';

const BUDGET_NS = 2000;
const NEVER = { limit: 1_000_000_000, windowMs: 60_000 };

export function rateLimitCases() {
  const store = new MemoryRateLimitStore();
  const keys = Array.from({ length: 10_000 }, (_, i) => `consumer-${i}`);
  const policy = rateLimit.create(
    { limit: NEVER.limit, windowSeconds: 60, perKey: {}, store: 'memory', onStoreError: 'open' },
    { env: {}, openStore: () => store },
  );
  const chain = new Chain([]);
  const exchanges = keys.map((keyId) => {
    const ex = chain.open({ method: 'GET', target: '/v1/pets', headers: {} });
    ex.set(KEY_ID, keyId);
    return ex;
  });
  return [
    { name: 'memory store take, 10,000 keys', fn: (i) => (store.take(keys[i % 10_000], NEVER).allowed ? 1 : 0) },
    { name: 'memory store take, one key', fn: () => (store.take(keys[0], NEVER).allowed ? 1 : 0) },
    { name: 'policy onRequest (take + headers), 10,000 keys', fn: (i) => (policy.onRequest(exchanges[i % 10_000]) === undefined ? 1 : 0) },
  ];
}

if (isMain(import.meta.url)) {
  const rounds = envNum('BENCH_RL_ROUNDS', 7, 1, 100);
  const passMs = envNum('BENCH_RL_MS', 150, 10, 10_000);
  const cases = rateLimitCases();
  // Warm-up outside the rounds: the store's first million-entry arrays are promoted and the JIT
  // settles (otherwise whichever case runs first pays for it).
  for (const c of cases) for (let i = 0; i < 1_000_000; i++) c.fn(i);
  const results = microRounds(cases, rounds, passMs);
  console.log(`# rate-limit microbenchmark\n\n${JSON.stringify(machine())}\n`);
  console.log(
    table(
      ['case', 'µs per op (median)', 'range'],
      results.map((r) => [r.name, fmt(r.ns / 1000, 3), `${fmt(r.min / 1000, 3)} - ${fmt(r.max / 1000, 3)}`]),
    ),
  );
  const worst = Math.max(results[0].ns, results[1].ns);
  console.log(`\nmemory store: ${fmt(worst / 1000, 3)} µs per take (budget ${fmt(BUDGET_NS / 1000, 1)} µs): ${worst <= BUDGET_NS ? 'within' : 'OVER'}`);
  process.exitCode = worst <= BUDGET_NS ? 0 : 1;
}
