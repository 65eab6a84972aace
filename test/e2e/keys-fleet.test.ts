/**
 * The key registry across a fleet: two gateway processes (one of them with `--workers 2`) and one
 * real redis-server. A key created on one authenticates on the other; a revocation on one is
 * refused by the other within 1 s; a rotation keeps both secrets until the overlap ends; the CLI
 * prints a new secret alone on one stdout line; no secret reaches a log line.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { hashKey } from '../../src/policies/auth/keys.js';
import { startRedis } from '../helpers/redis.js';
import { bearer, ensureBuilt, request, runCli, spawnCliUntil, tempDir, testKey, waitFor, type ProcessHandle, adminUrl } from '../helpers/servers.js';

ensureBuilt();

const dir = tempDir(t, 'keys-fleet');
// Admin tokens must be strong (32 characters at least, random): 32 random bytes, base64url.
const ADMIN_TOKEN = randomBytes(32).toString('base64url');
const FILE_KEY = testKey();
const READY = /^(?=[\s\S]*petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) )(?=[\s\S]*"msg":"admin listening)/;

interface Gw {
  readonly url: string;
  readonly admin: string;
  readonly handle: ProcessHandle;
}

async function serve(file: string, args: string[]): Promise<Gw> {
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--port', '0', ...args], READY, {
    env: { LOG_LEVEL: 'info', PETSTORE_ADMIN_TOKENS: ADMIN_TOKEN },
    timeoutMs: 30_000,
  });
  return { url: match[1]!, admin: adminUrl(handle), handle };
}

const admin = (token = ADMIN_TOKEN) => bearer(token, { 'content-type': 'application/json' });
const pets = (gw: Gw, key: string) => request(`${gw.url}/v1/pets`, { headers: bearer(key) }).then((r) => r.status);

async function within(what: string, ms: number, pred: () => Promise<boolean>): Promise<number> {
  const start = performance.now();
  // Bounded: at most ms / 10 polls and the deadline.
  for (let i = 0; i < ms / 10; i++) {
    if (await pred()) return performance.now() - start;
    if (performance.now() - start > ms) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`${what}: not within ${ms} ms`);
}

// parity: the registry lives in the auth policy, the same in every engine; the two processes run
// two different engines (undici, and fastify with --workers 2), and the admin API is the CLI's listener.
t.test('two gateways, one registry: create, revoke, rotate across processes; the CLI', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const file = join(dir, 'fleet.json');
  writeFileSync(
    file,
    JSON.stringify({
      version: 1,
      upstream: { url: 'builtin' },
      policies: { auth: { keys: [{ id: 'file-ops', hash: hashKey(FILE_KEY) }], keysFromEnv: null, registry: { redis: { url: redis.url }, syncIntervalMs: 5000 } } },
    }),
  );
  const [a, b] = await Promise.all([serve(file, ['--engine', 'undici']), serve(file, ['--engine', 'fastify', '--workers', '2'])]);

  // Created on A (admin API): authenticates on B, in every worker (several requests, new connections).
  const created = await request(`${a.admin}/keys`, { method: 'POST', headers: admin(), body: JSON.stringify({ id: 'partner-1', operations: ['listPets'] }) });
  t.equal(created.status, 201);
  const made = created.json as { id: string; key: string; operations: string[]; created: string; expires: null };
  t.match(made, { id: 'partner-1', operations: ['listPets'], expires: null });
  t.match(made.key, /^psgk_[0-9A-Za-z]{46}$/);
  t.equal(created.headers['cache-control'], 'no-store');
  await within('the new key works on B', 1000, async () => (await pets(b, made.key)) === 200);
  for (let i = 0; i < 6; i++) t.equal(await pets(b, made.key), 200, `B request ${i + 1}`);
  t.equal(await pets(a, made.key), 200, 'and on A');
  // B runs --workers 2: its primary's /readyz shows the group's registry state in its detail.
  const ready = await request(`${b.admin}/readyz`);
  t.equal(ready.status, 200);
  t.match(ready.json, { status: 'ready', detail: { keyRegistry: { connected: true, fresh: true, dataLoss: false, keys: 1 } } });
  t.equal(await pets(b, FILE_KEY), 200, 'file keys work beside the registry');
  const scoped = await request(`${b.url}/v1/pets/1`, { headers: bearer(made.key) });
  t.equal(scoped.status, 403, 'the key keeps its operations on the other instance');

  // The CLI: the secret alone on one stdout line.
  const cli = await runCli(t, ['keys', 'create', '--id', 'from-cli', '--policy', file]);
  t.equal(cli.code, 0, cli.stderr);
  t.match(cli.stdout, /^psgk_[0-9A-Za-z]{46}\n$/);
  const cliKey = cli.stdout.trim();
  t.notMatch(cli.stderr, cliKey, 'stderr does not repeat it');
  await within('the CLI key works on A and B', 1000, async () => (await pets(a, cliKey)) === 200 && (await pets(b, cliKey)) === 200);

  // Revoked on B (its primary's admin listener): refused by A within 1 s.
  t.equal((await request(`${b.admin}/keys/partner-1`, { method: 'DELETE', headers: admin() })).status, 204);
  const took = await within('the revocation reaches A', 1000, async () => (await pets(a, made.key)) === 401);
  t.ok(took < 1000, `refused by A ${Math.round(took)} ms after the revocation`);
  await within('and every worker of B', 1000, async () => (await pets(b, made.key)) === 401);

  // Rotated on A with a 3 s overlap: both secrets on B until it ends, then only the new one.
  const rotated = await request(`${a.admin}/keys/from-cli/rotate`, { method: 'POST', headers: admin(), body: JSON.stringify({ overlapSeconds: 3 }) });
  t.equal(rotated.status, 200);
  const next = (rotated.json as { key: string; previousKeyValidUntil: string }).key;
  await within('the new secret works on B', 1000, async () => (await pets(b, next)) === 200);
  t.equal(await pets(b, cliKey), 200, 'the old secret too, during the overlap');
  const end = Date.parse((rotated.json as { previousKeyValidUntil: string }).previousKeyValidUntil);
  await waitFor('the overlap to end', () => Date.now() >= end + 50, 6000);
  t.equal(await pets(b, cliKey), 401, 'the old secret is refused once the overlap ended');
  t.equal(await pets(a, cliKey), 401, 'on A too');
  t.equal(await pets(b, next), 200, 'the new one works');

  // list (CLI): ids and last use, never a secret or a hash.
  // Last use is written once per second per process, not per request: wait one flush interval.
  await new Promise((r) => setTimeout(r, 1200));
  const list = await runCli(t, ['keys', 'list', '--json', '--policy', file]);
  t.equal(list.code, 0, list.stderr);
  const keys = (JSON.parse(list.stdout) as { keys: Array<{ id: string; lastUsed: string | null }> }).keys;
  t.strictSame(keys.map((k) => k.id), ['from-cli']);
  t.match(keys[0]?.lastUsed, /^\d{4}-\d{2}-\d{2}T/, 'last used is recorded');
  t.notMatch(list.stdout, /psgk_|sha256/);

  // D2/M2: a rotation with overlap 0 after a routine rotation ends EVERY older secret (the leaked
  // first one too), on both instances within 1 s; the CLI and the API report what is enforced.
  const k1 = (await runCli(t, ['keys', 'create', '--id', 'leaky', '--policy', file])).stdout.trim();
  const r1 = await runCli(t, ['keys', 'rotate', 'leaky', '--overlap', '1h', '--policy', file]);
  t.equal(r1.code, 0, r1.stderr);
  const k2 = r1.stdout.trim();
  const reported = Date.parse(/valid until (\S+)/.exec(r1.stderr)?.[1] ?? '');
  t.ok(Math.abs(reported - (Date.now() + 3600_000)) < 60_000, `a routine rotation reports the old secret's end: ${r1.stderr}`);
  await within('both secrets work on A and B', 1000, async () => (await pets(a, k1)) === 200 && (await pets(b, k2)) === 200);
  const listed = async (id: string) => ((await request(`${a.admin}/keys`, { headers: admin() })).json as { keys: Array<{ id: string; previousValidUntil: string | null }> }).keys.find((k) => k.id === id);
  t.equal(Date.parse((await listed('leaky'))?.previousValidUntil ?? ''), reported, 'GET /keys reports the older secret\'s end');
  const r2 = await runCli(t, ['keys', 'rotate', 'leaky', '--overlap', '0', '--policy', file]);
  t.equal(r2.code, 0, r2.stderr);
  t.match(r2.stderr, /every previous secret ended now/, 'the CLI says every older secret ended');
  const k3 = r2.stdout.trim();
  const ended = await within('k1 and k2 refused on A and B', 1000, async () => {
    const codes = await Promise.all([pets(a, k1), pets(a, k2), pets(b, k1), pets(b, k2)]);
    return codes.every((c) => c === 401);
  });
  t.ok(ended < 1000, `every older secret refused everywhere ${Math.round(ended)} ms after --overlap 0`);
  t.equal(await pets(b, k3), 200, 'the new secret works');
  t.equal((await listed('leaky'))?.previousValidUntil, null, 'GET /keys: no older secret works');
  // The same through the admin API (on B): a routine rotation, then overlapSeconds 0.
  const s1 = ((await request(`${b.admin}/keys`, { method: 'POST', headers: admin(), body: JSON.stringify({ id: 'leaky-api' }) })).json as { key: string }).key;
  const s2 = ((await request(`${b.admin}/keys/leaky-api/rotate`, { method: 'POST', headers: admin(), body: '{}' })).json as { key: string }).key;
  await within('s1 and s2 work on A', 1000, async () => (await pets(a, s1)) === 200 && (await pets(a, s2)) === 200);
  // An overlap shorter than an earlier one caps it: both older secrets end within 2 s.
  const capped = await request(`${b.admin}/keys/leaky-api/rotate`, { method: 'POST', headers: admin(), body: JSON.stringify({ overlapSeconds: 2 }) });
  const capEnd = Date.parse((capped.json as { previousKeyValidUntil: string }).previousKeyValidUntil);
  t.ok(capEnd <= Date.now() + 2000, 'the answer reports the capped end of every older secret');
  const s3 = (capped.json as { key: string }).key;
  const zero = await request(`${b.admin}/keys/leaky-api/rotate`, { method: 'POST', headers: admin(), body: JSON.stringify({ overlapSeconds: 0 }) });
  t.equal(zero.status, 200);
  t.ok(Date.parse((zero.json as { previousKeyValidUntil: string }).previousKeyValidUntil) <= Date.now(), 'overlapSeconds 0: every older secret ends now');
  const s4 = (zero.json as { key: string }).key;
  await within('s1, s2 and s3 refused on A and B', 1000, async () => {
    const codes = await Promise.all([s1, s2, s3].flatMap((k) => [pets(a, k), pets(b, k)]));
    return codes.every((c) => c === 401);
  });
  t.equal(await pets(a, s4), 200, 'the newest works on A');

  // One audit line per change, with who and which id; no secret in any output of either process.
  const auditA = a.handle.output().stdout.split('\n').filter((l) => l.includes('"audit":"keys"'));
  t.equal(auditA.length, 2, 'A: created, rotated');
  t.match(auditA[0], /"action":"created","id":"partner-1","by":"PETSTORE_ADMIN_TOKENS#1"/);
  t.match(auditA[1], /"action":"rotated","id":"from-cli"/);
  t.match(b.handle.output().stdout, /"audit":"keys","action":"revoked","id":"partner-1"/);
  for (const gw of [a, b]) {
    const all = gw.handle.output().stdout + gw.handle.output().stderr;
    for (const secret of [made.key, cliKey, next, ADMIN_TOKEN, FILE_KEY, k1, k2, k3, s1, s2, s3, s4]) t.notOk(all.includes(secret), 'no secret in the logs');
  }
});
