// The auth policy's request phase with a key of the policy file and with a key of the registry
// (answered from the local copy), no sockets: the per-request cost of the registry is one more
// Map lookup after the file's, and no Redis round trip. A real redis-server fills the registry.
// Interleaved rounds, median. (The machine must be quiet: on a shared one the ratio is noise.)
//
//   npx tsc -p tsconfig.json && node bench/registry.mjs
//
// Environment: BENCH_REG_ROUNDS (7), BENCH_REG_MS (150: the length of one pass of one case).
// Exits 1 when a registry key costs more than 5% over a file key.
import { Chain as CoreChain } from '../dist/core/chain.js';
import { shippedApi } from '../dist/api/index.js';
class Chain extends CoreChain { constructor(p) { super(p, shippedApi().router); } }
import { auth, hashKey } from '../dist/policies/auth/index.js';
import { KeyRegistry } from '../dist/registry/registry.js';
import { closeRegistries } from '../dist/registry/index.js';
import { newRegistryKey } from '../dist/registry/format.js';
import { envNum, fmt, isMain, machine, microRounds, startRedis, table } from './lib.mjs';

const BUDGET = 1.05;

export async function registryCases(redisUrl) {
  const registry = { redis: { url: redisUrl }, prefix: 'bench:', syncIntervalMs: 5000, maxStaleSeconds: 86400, commandTimeoutMs: 1000 };
  const writer = new KeyRegistry(registry, { env: {}, follow: false });
  await writer.ready;
  const issued = await writer.create({ id: 'registry-key' });
  await writer.close();
  const fileKey = newRegistryKey();
  // 100 file keys, as a real policy may hold: the registry key is looked up after missing them.
  const keys = [{ id: 'file-key', hash: hashKey(fileKey) }, ...Array.from({ length: 99 }, (_, i) => ({ id: `k${i}`, hash: hashKey(newRegistryKey()) }))];
  const base = { keys, keysFromEnv: null, realm: 'petstore', upstreamAuthorization: 'drop', bruteForce: null };
  const withRegistry = auth.create({ ...base, registry }, { env: {} });
  const fileOnly = auth.create({ ...base, registry: null }, { env: {} });
  // The policy's registry fills its local copy (bounded wait).
  for (let i = 0; i < 100; i++) {
    if (withRegistry.onRequest(exchange(issued.key)) === undefined) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  if (withRegistry.onRequest(exchange(issued.key)) !== undefined) throw new Error('the registry key is not in the local copy');
  const fileEx = exchange(fileKey);
  const regEx = exchange(issued.key);
  return [
    { name: 'auth onRequest, file key, no registry', fn: () => (fileOnly.onRequest(fileEx) === undefined ? 1 : 0) },
    { name: 'auth onRequest, file key, registry on', fn: () => (withRegistry.onRequest(fileEx) === undefined ? 1 : 0) },
    { name: 'auth onRequest, registry key (local copy)', fn: () => (withRegistry.onRequest(regEx) === undefined ? 1 : 0) },
  ];
}

/** Commands Redis has processed so far (INFO stats), read over a connection of its own. */
async function commandsProcessed(url) {
  const { createClient } = await import('redis');
  const client = createClient({ url, socket: { connectTimeout: 2000, reconnectStrategy: false } });
  await client.connect();
  try {
    return Number(/total_commands_processed:(\d+)/.exec(String(await client.info('stats')))?.[1] ?? NaN);
  } finally {
    await client.quit();
  }
}

/**
 * For `npm run bench` (bench/run.mjs): the same rounds, with the Redis commands counted while they
 * run (INFO before and after; its own INFO and the connection around it are taken off), so the
 * round trips per request are measured, not assumed.
 */
export async function runRegistry({ rounds = envNum('BENCH_REG_ROUNDS', 7, 1, 100), passMs = envNum('BENCH_REG_MS', 150, 10, 10_000) } = {}) {
  const redis = await startRedis();
  try {
    const cases = await registryCases(redis.url);
    let calls = 0;
    const counted = cases.map((c) => ({ name: c.name, fn: (i) => (calls++, c.fn(i)) }));
    for (const c of cases) for (let i = 0; i < 200_000; i++) c.fn(i);
    // What one reading costs in commands (the client's handshake, INFO, QUIT), measured, taken off.
    const first = await commandsProcessed(redis.url);
    const before = await commandsProcessed(redis.url);
    const results = microRounds(counted, rounds, passMs);
    const commands = Math.max(0, (await commandsProcessed(redis.url)) - before - (before - first));
    const ratio = results[2].ns / results[0].ns;
    const markdown = [
      '### Key registry: the cost of a registry key',
      '',
      `${JSON.stringify(machine())}; ${rounds} interleaved rounds of ${passMs} ms per case (median). The auth policy's request phase (dist), no sockets; the registry filled from a real redis-server.`,
      '',
      table(['case', 'µs per op (median)', 'range'], results.map((r) => [r.name, fmt(r.ns / 1000, 3), `${fmt(r.min / 1000, 3)} - ${fmt(r.max / 1000, 3)}`])),
      '',
      `Registry key ÷ file key: **${fmt(ratio, 3)}** (goal ≤ ${BUDGET}: ${ratio <= BUDGET ? 'met' : '**not met**'}). Redis commands while ${fmt(calls)} requests were decided: ${fmt(commands)} (${fmt(commands / Math.max(1, calls), 6)} per request; goal: none per request; what remains is the registry's periodic sync).`,
    ].join('\n');
    return { results, ratio, budget: BUDGET, calls, commands, markdown };
  } finally {
    await closeRegistries();
    await redis.stop();
  }
}

/** A listPets exchange as the chain opens it (its fact slots included), before any policy ran. */
function exchange(key) {
  return new Chain([]).open({ method: 'GET', target: '/v1/pets', headers: { authorization: `Bearer ${key}` }, remoteAddress: '127.0.0.1' });
}

if (isMain(import.meta.url)) {
  const r = await runRegistry();
  console.log(r.markdown);
  process.exitCode = r.ratio <= BUDGET ? 0 : 1;
}
