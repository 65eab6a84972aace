// The auth policy's request phase with a key of the policy file and with a key of the registry
// (answered from the local copy), no sockets: the per-request cost of the registry is one more
// Map lookup after the file's, and no Redis round trip. A real redis-server fills the registry.
// Interleaved rounds, median. (The machine must be quiet: on a shared one the ratio is noise.)
//
//   npx tsc -p tsconfig.json && node bench/registry.mjs
//
// Environment: BENCH_REG_ROUNDS (7), BENCH_REG_MS (150: the length of one pass of one case).
// Exits 1 when a registry key costs more than 5% over a file key.
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

function exchange(key) {
  return { head: { method: 'GET', target: '/v1/pets', headers: { authorization: `Bearer ${key}` }, remoteAddress: '127.0.0.1' }, operation: { id: 'listPets' }, upstreamHeaders: {}, responseHeaders: {} };
}

if (isMain(import.meta.url)) {
  const rounds = envNum('BENCH_REG_ROUNDS', 7, 1, 100);
  const passMs = envNum('BENCH_REG_MS', 150, 10, 10_000);
  const redis = await startRedis();
  try {
    const cases = await registryCases(redis.url);
    for (const c of cases) for (let i = 0; i < 200_000; i++) c.fn(i);
    const results = microRounds(cases, rounds, passMs);
    console.log(`# auth with the key registry\n\n${JSON.stringify(machine())}\n`);
    console.log(table(['case', 'µs per op (median)', 'range'], results.map((r) => [r.name, fmt(r.ns / 1000, 3), `${fmt(r.min / 1000, 3)} - ${fmt(r.max / 1000, 3)}`])));
    const ratio = results[2].ns / results[0].ns;
    console.log(`\nregistry key / file key: ${fmt(ratio, 3)} (budget ${BUDGET}): ${ratio <= BUDGET ? 'within' : 'OVER'}; Redis round trips per request: 0`);
    process.exitCode = ratio <= BUDGET ? 0 : 1;
  } finally {
    await closeRegistries();
    await redis.stop();
  }
}
