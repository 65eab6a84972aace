/**
 * Keys carry who to tell (docs/keys.md, "Owner and contact"), through a real gateway process, its
 * admin API and the CLI, on a real redis-server: created with an owner and contact, changed and
 * cleared with PATCH and `keys set`, bad input refused with nothing changed, shown by GET /keys and
 * `keys list`, kept by export and import; a revocation lands in the registry's last revocations
 * with who made it. `check` shows the file's and the environment's owners.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { hashKey } from '../../src/policies/auth/keys.js';
import { KeyRegistry } from '../../src/registry/registry.js';
import { newRegistryKey } from '../../src/registry/format.js';
import { startRedis } from '../helpers/redis.js';
import { adminUrl, bearer, ensureBuilt, request, runCli, spawnCliUntil, tempDir, testKey, type Response } from '../helpers/servers.js';

ensureBuilt();

const dir = tempDir(t, 'key-owner');
const ADMIN_TOKEN = randomBytes(32).toString('base64url');
const READY = /^(?=[\s\S]*petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) )(?=[\s\S]*"msg":"admin listening)/;
const admin = () => bearer(ADMIN_TOKEN, { 'content-type': 'application/json' });

function errorOf(r: Response): { code: string; status: number } {
  const body = r.json as { code: string; status: number };
  return { code: body.code, status: r.status === body.status ? body.status : -1 };
}

// parity: owner and contact live in the auth policy and the registry, the same in every engine; the
// admin API is the serving process's listener and the CLI talks to Redis only.
t.test('owner and contact through the admin API and the CLI; revocations remembered', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const file = join(dir, 'policy.json');
  writeFileSync(
    file,
    JSON.stringify({
      version: 1,
      upstream: { url: 'builtin' },
      policies: {
        auth: {
          keys: [{ id: 'file-ops', hash: hashKey(testKey()), owner: 'Operations', contact: 'ops@example.com' }],
          keysFromEnv: 'KO_KEYS',
          registry: { redis: { url: redis.url }, prefix: 'ko:' },
        },
      },
    }),
  );
  const envKeys = { KO_KEYS: `${testKey()},${testKey()}`, KO_KEYS_OWNERS: '[null,{"owner":"Partner B","contact":"#partner-b"}]' };
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--port', '0', '--engine', 'undici'], READY, {
    env: { LOG_LEVEL: 'info', PETSTORE_ADMIN_TOKENS: ADMIN_TOKEN, ...envKeys },
    timeoutMs: 30_000,
  });
  t.ok(match[1]);
  const base = adminUrl(handle);
  const call = (method: string, path: string, body?: unknown) =>
    request(`${base}${path}`, { method, headers: admin(), ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }) });
  const list = async () => ((await call('GET', '/keys')).json as { keys: Array<Record<string, unknown>> }).keys;
  // The test's own view of the registry (the revocations have no HTTP route of their own).
  const registry = new KeyRegistry({ redis: { url: redis.url }, prefix: 'ko:', syncIntervalMs: 5000, maxStaleSeconds: 60, commandTimeoutMs: 1000 }, { env: {}, follow: false });
  t.teardown(() => registry.close());
  await registry.ready;

  t.test('check shows the owners of the file and the environment keys', async (t) => {
    const r = await runCli(t, ['check', file], { env: envKeys });
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /file-ops: never expires, all operations, owner: Operations, contact: ops@example\.com/);
    t.match(r.stdout, /KO_KEYS#1: never expires, all operations \(from the environment\)\n/);
    t.match(r.stdout, /KO_KEYS#2: never expires, all operations \(from the environment\), owner: Partner B, contact: #partner-b/);
    const bad = await runCli(t, ['check', file], { env: { ...envKeys, KO_KEYS_OWNERS: `[{"owner":"${newRegistryKey()}"}]` } });
    t.equal(bad.code, 78, 'a policy problem');
    t.match(bad.stdout + bad.stderr, /\$\.policies\.auth\.keysFromEnv: KO_KEYS_OWNERS\[0\]\.owner looks like a secret/);
  });

  t.test('POST /keys with owner and contact; GET /keys shows them', async (t) => {
    const created = await call('POST', '/keys', { id: 'partner-acme', owner: 'Acme integrations', contact: 'https://wiki.example.com/acme' });
    t.equal(created.status, 201);
    t.match(created.json, { id: 'partner-acme', owner: 'Acme integrations', contact: 'https://wiki.example.com/acme', key: /^psgk_/ });
    const plain = await call('POST', '/keys', { id: 'plain' });
    t.match(plain.json, { id: 'plain', owner: null, contact: null });
    t.match(await list(), [
      { id: 'partner-acme', owner: 'Acme integrations', contact: 'https://wiki.example.com/acme' },
      { id: 'plain', owner: null, contact: null },
    ]);
  });

  t.test('PATCH /keys/{id}: sets, leaves the absent field, clears with null', async (t) => {
    const owner = await call('PATCH', '/keys/partner-acme', { owner: 'Acme partner team' });
    t.equal(owner.status, 200);
    t.match(owner.json, { id: 'partner-acme', owner: 'Acme partner team', contact: 'https://wiki.example.com/acme' });
    t.notMatch(owner.body, /psgk_|sha256/, 'no secret or hash in the answer');
    const both = await call('PATCH', '/keys/plain', { owner: 'Plain team', contact: '@plain' });
    t.match(both.json, { id: 'plain', owner: 'Plain team', contact: '@plain' });
    const cleared = await call('PATCH', '/keys/plain', { contact: null });
    t.match(cleared.json, { id: 'plain', owner: 'Plain team', contact: null });
    t.match(await list(), [
      { id: 'partner-acme', owner: 'Acme partner team', contact: 'https://wiki.example.com/acme' },
      { id: 'plain', owner: 'Plain team', contact: null },
    ]);
    const exported = await registry.exportAll();
    t.notOk('contact' in (exported.records.find((r) => r.id === 'plain') ?? {}), 'a cleared field leaves the record');
  });

  t.test('bad input: 400 (or 404, 405) in the Error shape, and nothing changed', async (t) => {
    const before = JSON.stringify(await list());
    const cases: Array<[string, string, unknown, string, number, RegExp?]> = [
      ['PATCH', '/keys/plain', { owner: '' }, 'invalid_request', 400, /owner must be 1 to 100 printable characters/],
      ['PATCH', '/keys/plain', { owner: 'x'.repeat(101) }, 'invalid_request', 400],
      ['PATCH', '/keys/plain', { owner: 'tab\there' }, 'invalid_request', 400],
      ['PATCH', '/keys/plain', { owner: newRegistryKey() }, 'invalid_request', 400, /^The request is not valid: owner looks like a secret/],
      ['PATCH', '/keys/plain', { contact: 'call Bob' }, 'invalid_request', 400, /contact must be an e-mail address, an https:\/\/ or mailto: URL, or a chat handle/],
      ['PATCH', '/keys/plain', { contact: 'https://hooks.slack.com/services/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' }, 'invalid_request', 400, /contact looks like a secret/],
      ['PATCH', '/keys/plain', { owner: 'Fine', contact: 'not a contact' }, 'invalid_request', 400],
      ['PATCH', '/keys/plain', { owner: 7 }, 'invalid_request', 400],
      ['PATCH', '/keys/plain', { team: 'x' }, 'invalid_request', 400],
      ['PATCH', '/keys/plain', {}, 'invalid_request', 400],
      ['PATCH', '/keys/plain', undefined, 'invalid_request', 400],
      ['PATCH', '/keys/plain', '{"owner":', 'malformed_json', 400],
      ['PATCH', '/keys/nobody', { owner: 'X' }, 'not_found', 404],
      ['PATCH', '/keys', { owner: 'X' }, 'method_not_allowed', 405],
      ['PATCH', '/keys/plain/rotate', { owner: 'X' }, 'method_not_allowed', 405],
      ['POST', '/keys', { id: 'leaky', owner: newRegistryKey() }, 'invalid_request', 400, /owner looks like a secret/],
      ['POST', '/keys', { id: 'leaky', contact: 'nope' }, 'invalid_request', 400, /contact must be/],
      ['POST', '/keys', { id: 'leaky', owner: null }, 'invalid_request', 400],
    ];
    for (const [method, path, body, code, status, message] of cases) {
      const r = await call(method, path, body);
      t.strictSame(errorOf(r), { code, status }, `${method} ${path} ${JSON.stringify(body)?.slice(0, 50) ?? ''}`);
      if (message !== undefined) t.match((r.json as { message: string }).message, message);
      if (status === 405) t.equal(r.headers.allow, path === '/keys' ? 'GET, POST' : 'POST');
    }
    t.equal((await call('GET', '/keys/plain')).headers.allow, 'DELETE, PATCH', 'a key path allows DELETE and PATCH');
    t.equal(JSON.stringify(await list()), before, 'the registry is as it was');
  });

  t.test('DELETE: the revocation is remembered, with who revoked it and whom to tell', async (t) => {
    t.equal((await call('DELETE', '/keys/partner-acme')).status, 204);
    const [last] = await registry.revoked();
    t.match(last, { id: 'partner-acme', by: 'PETSTORE_ADMIN_TOKENS#1', owner: 'Acme partner team', contact: 'https://wiki.example.com/acme' });
    t.ok(Math.abs(Date.parse(last?.at ?? '') - Date.now()) < 10_000, 'when');
    const audit = handle.output().stdout.split('\n').filter((l) => l.includes('"audit":"keys"'));
    t.match(audit.join('\n'), /"action":"updated","id":"partner-acme","by":"PETSTORE_ADMIN_TOKENS#1","remoteAddress":"[^"]+","fields":\["owner"\]/, 'PATCH is audited with the fields it changed');
    t.match(audit.join('\n'), /"action":"updated","id":"plain","by":"PETSTORE_ADMIN_TOKENS#1","remoteAddress":"[^"]+","fields":\["contact"\]/);
    t.match(audit.join('\n'), /"action":"revoked","id":"partner-acme"/);
    t.notMatch(audit.join('\n'), /"action":"updated","id":"(leaky|nobody)"/, 'no audit line for a refused change');
  });

  t.test('the CLI: create, set, clear, list, revoke, usage errors', async (t) => {
    const cli = (...args: string[]) => runCli(t, ['keys', ...args, '--policy', file]);
    const made = await cli('create', '--id', 'cli-key', '--owner', 'CLI team', '--contact', 'mailto:cli@example.com');
    t.equal(made.code, 0, made.stderr);
    t.match(made.stdout, /^psgk_[0-9A-Za-z]{46}\n$/);
    const set = await cli('set', 'cli-key', '--owner', 'CLI platform team', '--clear-contact');
    t.equal(set.code, 0, set.stderr);
    t.match(set.stderr, /^\{"audit":"keys","action":"updated","id":"cli-key","by":"cli:[^"]+@[^"]+","fields":\["contact","owner"\]\}\n/);
    t.match(set.stderr, /key 'cli-key': owner "CLI platform team", contact \(none\)/);
    t.equal((await cli('set', 'cli-key', '--contact', '#cli')).code, 0);
    const json = JSON.parse((await cli('list', '--json')).stdout) as { keys: Array<Record<string, unknown>> };
    t.match(json.keys.find((k) => k.id === 'cli-key'), { owner: 'CLI platform team', contact: '#cli' });
    const table = (await cli('list')).stdout.split('\n');
    t.match(table[0], /^ID +CREATED +EXPIRES +OPERATIONS +SCOPES +LAST USED +OLD SECRETS UNTIL +OWNER +CONTACT$/);
    t.match(table.find((l) => l.startsWith('cli-key ')), /CLI platform team +#cli$/);
    t.match(table.find((l) => l.startsWith('plain ')), /Plain team +-$/);
    const usage: Array<[string[], RegExp]> = [
      [['set', 'cli-key'], /keys set needs --owner, --contact, --clear-owner or --clear-contact/],
      [['set'], /keys set needs the key's ID/],
      [['set', 'cli-key', '--owner', newRegistryKey()], /--owner looks like a secret/],
      [['set', 'cli-key', '--contact', 'Bob'], /--contact must be an e-mail address/],
      [['set', 'cli-key', '--owner', 'A', '--clear-owner'], /--owner and --clear-owner together/],
      [['create', '--id', 'x', '--clear-owner'], /--clear-owner is for keys set/],
      [['rotate', 'cli-key', '--owner', 'A'], /--owner is for keys create and keys set/],
      [['create', '--id', 'x', '--owner', ''], /--owner must be 1 to 100/],
    ];
    for (const [args, message] of usage) {
      const r = await cli(...args);
      t.equal(r.code, 2, args.join(' '));
      t.match(r.stderr, message);
      t.equal(r.stdout, '');
    }
    const unknown = await cli('set', 'nobody', '--owner', 'A');
    t.equal(unknown.code, 1);
    t.match(unknown.stderr, /no key with id 'nobody'/);
    t.match(JSON.parse((await cli('list', '--json')).stdout), { keys: [{ id: 'cli-key', owner: 'CLI platform team', contact: '#cli' }, { id: 'plain' }] }, 'nothing changed');
    const revoked = await cli('revoke', 'cli-key');
    t.equal(revoked.code, 0, revoked.stderr);
    t.match((await registry.revoked())[0], { id: 'cli-key', by: /^cli:[^@]+@.+$/, owner: 'CLI platform team', contact: '#cli' });
    const help = await runCli(t, ['keys', '--help']);
    t.match(help.stdout, /keys set ID \[--owner TEXT \| --clear-owner\] \[--contact C \| --clear-contact\]/);
    t.match(help.stdout, /--contact C +where to reach the owner/);
  });

  t.test('export and import keep owner and contact', async (t) => {
    const exported = await runCli(t, ['keys', 'export', '--policy', file]);
    t.equal(exported.code, 0, exported.stderr);
    const backup = join(dir, 'backup.json');
    writeFileSync(backup, exported.stdout);
    t.match(JSON.parse(exported.stdout), { records: [{ id: 'plain', owner: 'Plain team' }] });
    t.equal((await call('PATCH', '/keys/plain', { owner: null })).status, 200);
    t.match(await list(), [{ id: 'plain', owner: null }]);
    const imported = await runCli(t, ['keys', 'import', backup, '--policy', file]);
    t.equal(imported.code, 0, imported.stderr);
    t.match(await list(), [{ id: 'plain', owner: 'Plain team', contact: null }]);
  });

  t.test('the registry keeps the last 100 revocations, newest first', async (t) => {
    // Bounded: 102 keys made and revoked directly in the registry.
    for (let i = 0; i < 102; i++) {
      await registry.create({ id: `burst-${i}`, owner: `Owner ${i}` });
      await registry.revoke(`burst-${i}`, 'test');
    }
    const revoked = await registry.revoked();
    t.equal(revoked.length, 100);
    t.match(revoked[0], { id: 'burst-101', by: 'test', owner: 'Owner 101' });
    t.match(revoked[99], { id: 'burst-2' });
    t.notOk(revoked.some((r) => r.id === 'partner-acme'), 'older ones dropped');
  });
});
