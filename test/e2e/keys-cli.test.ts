/**
 * `petstore-gateway keys`: usage errors (exit 2, nothing contacted), a policy without a registry
 * (78), Redis unreachable (1, a clear message, bounded), a file key's id refused, and the help.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { hashKey } from '../../src/policies/auth/keys.js';
import { startRedis } from '../helpers/redis.js';
import { closedPort, ensureBuilt, runCli, tempDir, testKey } from '../helpers/servers.js';

ensureBuilt();
const dir = tempDir(t, 'keys-cli');

function policy(name: string, auth: Record<string, unknown>): string {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ version: 1, policies: { auth: { keysFromEnv: null, ...auth } } }));
  return file;
}

// parity: the keys command talks to Redis only; no engine serves anything
t.test('usage errors exit 2 with one line and a pointer to the help', async (t) => {
  const file = policy('unreachable', { registry: { redis: { url: `redis://127.0.0.1:${await closedPort()}` } } });
  const cases: string[][] = [
    ['keys'],
    ['keys', 'delete', 'a'],
    ['keys', 'create'],
    ['keys', 'create', '--id', 'has space'],
    ['keys', 'create', '--id', 'env#1'],
    ['keys', 'create', '--id', 'a', '--operations', 'listPets,deletePet'],
    ['keys', 'create', '--id', 'a', '--scope', 'migration:tester', '--scope', 'has space'],
    ['keys', 'create', '--id', 'a', '--scope', 's'.repeat(65)],
    ['keys', 'create', '--id', 'a', '--scope='],
    ['keys', 'create', '--id', 'a', '--expires', '2030-02-30T00:00:00Z'],
    ['keys', 'create', '--id', 'a', '--nope'],
    ['keys', 'rotate'],
    ['keys', 'revoke', 'a', 'b'],
  ];
  for (const args of cases) {
    const r = await runCli(t, [...args, '--policy', file]);
    t.equal(r.code, 2, args.join(' '));
    t.match(r.stderr, /^petstore-gateway: .+\nsee 'petstore-gateway keys --help'\n$/);
    t.equal(r.stdout, '');
  }
  const help = await runCli(t, ['keys', '--help']);
  t.equal(help.code, 0);
  t.match(help.stdout, /keys create --id ID/);
  t.match(help.stdout, /--overlap/);
  t.match(help.stdout, /--scope S/);
});

// parity: the keys command talks to Redis only; no engine serves anything
t.test('no registry in the policy: 78; Redis unreachable: 1, clearly, within seconds', async (t) => {
  const none = await runCli(t, ['keys', 'list', '--policy', policy('none', {})]);
  t.equal(none.code, 78);
  t.match(none.stderr, /configures no key registry \(policies\.auth\.registry\)/);
  const file = policy('down', { registry: { redis: { url: `redis://127.0.0.1:${await closedPort()}` } } });
  for (const args of [['keys', 'create', '--id', 'a'], ['keys', 'list'], ['keys', 'revoke', 'a']]) {
    const start = Date.now();
    const r = await runCli(t, [...args, '--policy', file], { timeoutMs: 10_000 });
    t.equal(r.code, 1, args.join(' '));
    t.match(r.stderr, /the key registry \(redis:\/\/127\.0\.0\.1:\d+\/?\) is not reachable; nothing was changed/);
    t.equal(r.stdout, '', 'no secret printed');
    t.ok(Date.now() - start < 8000, 'bounded');
  }
});

// parity: the keys command talks to Redis only; no engine serves anything
t.test('an id of the policy file is refused; scopes kept through list and rotate; rotate --overlap is checked', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const file = policy('file-id', { keys: [{ id: 'ops', hash: hashKey(testKey()) }], registry: { redis: { url: redis.url } } });
  const r = await runCli(t, ['keys', 'create', '--id', 'ops', '--policy', file]);
  t.equal(r.code, 1);
  t.match(r.stderr, /'ops' is a key id of the policy file/);
  t.equal(r.stdout, '');
  const made = await runCli(t, ['keys', 'create', '--id', 'svc', '--operations', 'getPet', '--scope', 'migration:tester', '--scope', 'b', '--scope', 'migration:tester', '--policy', file]);
  t.equal(made.code, 0);
  t.match(made.stderr, /^\{"audit":"keys","action":"created","id":"svc","by":"cli:[^"]+@[^"]+"\}\n/, 'one audit line: who, what, which id');
  t.notOk(made.stderr.includes(made.stdout.trim()), 'without the secret');
  await runCli(t, ['keys', 'create', '--id', 'plain', '--policy', file]);
  const listed = await runCli(t, ['keys', 'list', '--json', '--policy', file]);
  t.match(JSON.parse(listed.stdout), { keys: [{ id: 'plain', operations: null, scopes: null }, { id: 'svc', operations: ['getPet'], scopes: ['migration:tester', 'b'] }] }, 'repeated --scope, once each');
  const rotated = await runCli(t, ['keys', 'rotate', 'svc', '--overlap', '0', '--policy', file]);
  t.equal(rotated.code, 0);
  const table = (await runCli(t, ['keys', 'list', '--policy', file])).stdout.split('\n');
  t.match(table[0], /^ID +CREATED +EXPIRES +OPERATIONS +SCOPES +LAST USED/);
  t.match(table[1], /^plain +\S+ +- +all +- +- /);
  t.match(table[2], /^svc +\S+ +- +getPet +migration:tester,b +- /, 'rotated: the same scopes');
  const bad = await runCli(t, ['keys', 'rotate', 'svc', '--overlap', '5x', '--policy', file]);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--overlap must be a duration/);
  const unknown = await runCli(t, ['keys', 'revoke', 'nobody', '--policy', file]);
  t.equal(unknown.code, 1);
  t.match(unknown.stderr, /no key with id 'nobody'/);
});
