/**
 * D3 and D17 through real processes: a gateway (`serve`) on a registry in a real redis-server,
 * the `keys` CLI, and the admin port.
 *
 * - Redis restarts empty (no persistence): the key the gateway knew keeps working; one error line
 *   says the data was lost and what to do; petstore_gateway_key_registry_data_loss is 1 and
 *   ..._data_loss_total 1; /readyz stays 200 and shows it in its detail.
 * - `keys import` of a `keys export` made before (hashes only, no secret) clears it; `keys list`
 *   shows the key again. After a FLUSHALL, `keys reset-epoch` accepts the empty registry: the key
 *   is refused within a second.
 * - Redis stopped: ..._connected 0 and ..._confirmed_age_seconds growing, /readyz still 200 with
 *   the registry disconnected in its detail, while the key still works (before keys misbehave).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parseExposition, value } from '../helpers/prom.js';
import { startRedis } from '../helpers/redis.js';
import { bearer, ensureBuilt, request, runCli, spawnCliUntil, tempDir } from '../helpers/servers.js';
import { until } from '../helpers/wait.js';

ensureBuilt();

const READY = /^(?=[\s\S]*petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) )(?=[\s\S]*"url":"(http:\/\/[^"]+)","msg":"admin listening)/;

// parity: the registry, the keys CLI and the admin port are the same whatever the engine; the engines' auth is covered by keys-outage.test.ts
t.test('Redis loses the registry: detected, kept, restored; cut off: visible', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const dir = tempDir(t, 'keys-loss');
  const file = join(dir, 'p.json');
  writeFileSync(
    file,
    JSON.stringify({ version: 1, upstream: { url: 'builtin' }, policies: { auth: { keysFromEnv: null, registry: { redis: { url: redis.url }, syncIntervalMs: 200 } } } }),
  );
  const created = await runCli(t, ['keys', 'create', '--id', 'partner-gamma', '--policy', file]);
  t.equal(created.code, 0, created.stderr);
  const key = created.stdout.trim();
  const exported = await runCli(t, ['keys', 'export', '--policy', file]);
  t.equal(exported.code, 0, exported.stderr);
  t.notMatch(exported.stdout, key, 'the export holds no secret');
  t.match(JSON.parse(exported.stdout), { format: 'petstore-gateway-keys/1', records: [{ id: 'partner-gamma', secrets: [{ hash: /^sha256:/ }] }] });
  const backup = join(dir, 'backup.json');
  writeFileSync(backup, exported.stdout);

  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--port', '0'], READY, { env: { LOG_LEVEL: 'info' }, timeoutMs: 30_000 });
  const [url, admin] = [match[1]!, match[2]!];
  const pets = async () => (await request(`${url}/v1/pets`, { headers: bearer(key) })).status;
  const scrape = async () => parseExposition((await request(`${admin}/metrics`)).body);
  const metric = async (name: string) => value(await scrape(), `petstore_gateway_key_registry_${name}`, { redis: redis.url });
  const readyz = async () => request(`${admin}/readyz`);
  t.equal(await pets(), 200, 'the registry key works');
  t.equal(await metric('keys'), 1);
  t.equal(await metric('connected'), 1);
  t.equal(await metric('data_loss'), 0);
  t.match((await readyz()).json, { status: 'ready', detail: { keyRegistry: { connected: true, fresh: true, keys: 1, dataLoss: false } } });

  await redis.restart(); // empty: no persistence
  await until('the loss on the metric', async () => (await metric('data_loss')) === 1, 10_000);
  for (let i = 0; i < 5; i++) {
    t.equal(await pets(), 200, `the key keeps working after the loss (${i + 1})`);
    await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(await metric('data_loss_total'), 1, 'counted once');
  const loss = await readyz();
  t.equal(loss.status, 200, 'readiness does not depend on it');
  t.match(loss.json, { detail: { keyRegistry: { dataLoss: true, keys: 1 } } });
  const errors = handle.output().stdout.split('\n').filter((l) => l.includes('"level":50') && l.includes("lost the registry's data"));
  t.equal(errors.length, 1, 'one error line');
  t.match(errors[0], /keys import FILE.*keys reset-epoch/);
  t.match(errors[0], /"keysKept":\["partner-gamma"\]/);
  t.match(handle.output().stdout, /Redis reachable again/, 'the reconnection is logged');

  // A file that is not an export is refused before anything is written (exit 2): still lost.
  const bad = join(dir, 'bad.json');
  writeFileSync(bad, JSON.stringify({ format: 'petstore-gateway-keys/1', records: [{ id: 'x', created: 'now', secrets: [] }] }));
  const refused = await runCli(t, ['keys', 'import', bad, '--policy', file]);
  t.equal(refused.code, 2, refused.stderr);
  t.match(refused.stderr, /record 1 \('x'\) has a date that is not RFC 3339/);
  t.equal(await metric('data_loss'), 1, 'nothing changed');
  // One hash under two ids (one scoped, one not): the key would authenticate as either. Refused.
  const record = JSON.parse(exported.stdout).records[0];
  const twice = join(dir, 'twice.json');
  writeFileSync(twice, JSON.stringify({ format: 'petstore-gateway-keys/1', records: [{ ...record, operations: ['listPets'] }, { ...record, id: 'partner-broad' }] }));
  const doubled = await runCli(t, ['keys', 'import', twice, '--policy', file]);
  t.equal(doubled.code, 2, doubled.stderr);
  t.match(doubled.stderr, /one secret hash under two records \('partner-gamma', 'partner-broad'\); nothing was imported/);
  t.equal(await metric('data_loss'), 1, 'nothing changed');

  const imported = await runCli(t, ['keys', 'import', backup, '--policy', file]);
  t.equal(imported.code, 0, imported.stderr);
  t.match(imported.stderr, /1 key record\(s\) imported/);
  await until('the loss cleared', async () => (await metric('data_loss')) === 0, 3000);
  t.equal(await pets(), 200, 'the key works from Redis again');
  const list = await runCli(t, ['keys', 'list', '--json', '--policy', file]);
  t.match(JSON.parse(list.stdout), { keys: [{ id: 'partner-gamma' }] }, 'keys list shows it again');
  // The hash of a key Redis holds, under another id: refused too, nothing written.
  const broad = join(dir, 'broad.json');
  writeFileSync(broad, JSON.stringify({ format: 'petstore-gateway-keys/1', records: [{ ...record, id: 'partner-broad', operations: undefined }] }));
  const clash = await runCli(t, ['keys', 'import', broad, '--policy', file]);
  t.equal(clash.code, 2, clash.stderr);
  t.match(clash.stderr, /record 'partner-broad' .*the secret hash of the key 'partner-gamma' in the registry; nothing was imported/);
  const after = await runCli(t, ['keys', 'list', '--json', '--policy', file]);
  t.strictSame(JSON.parse(after.stdout).keys.map((k: { id: string }) => k.id), ['partner-gamma'], 'partner-broad was not written');

  spawnSync('redis-cli', ['-p', String(redis.port), 'FLUSHALL'], { timeout: 5000 });
  await until('the second loss', async () => (await metric('data_loss_total')) === 2, 5000);
  t.equal(await pets(), 200, 'kept again');
  const reset = await runCli(t, ['keys', 'reset-epoch', '--policy', file]);
  t.equal(reset.code, 0, reset.stderr);
  await until('the key refused after reset-epoch', async () => (await pets()) === 401, 1000);
  t.equal(await metric('data_loss'), 0);
  t.equal(await metric('keys'), 0);

  // Cut off: visible before keys misbehave.
  const again = await runCli(t, ['keys', 'import', backup, '--policy', file]);
  t.equal(again.code, 0, again.stderr);
  await until('the key back', async () => (await pets()) === 200, 2000);
  await redis.stop();
  await until('disconnected on the metric', async () => (await metric('connected')) === 0, 5000);
  await until('the copy ages', async () => ((await metric('confirmed_age_seconds')) ?? 0) > 1, 5000);
  const cut = await readyz();
  t.equal(cut.status, 200);
  t.match(cut.json, { detail: { keyRegistry: { connected: false, fresh: true } } });
  t.equal(await pets(), 200, 'the key still works from the local copy');

  const all = readFileSync(backup, 'utf8') + handle.output().stdout + handle.output().stderr;
  t.notOk(all.includes(key), 'no secret in the backup or the logs');
});
