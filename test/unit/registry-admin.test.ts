/**
 * The key admin API (src/ops/admin-keys.ts) on a real admin listener and a real redis-server:
 * bearer admin tokens (none configured: 404 as any unknown path), validation before any change,
 * the Error shape, one audit line per change without the secret, 503 while Redis is away.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import type { TapTest as Tap } from '../helpers/assert.js';
import { startAdmin, READY } from '../../src/ops/admin.js';
import { keyAdminRoutes } from '../../src/ops/admin-keys.js';
import { AdminAuthGuard } from '../../src/ops/admin-guard.js';
import { AdminTokens, adminTokens } from '../../src/ops/admin-tokens.js';
import { KeyRegistry } from '../../src/registry/registry.js';
import { startRedis } from '../helpers/redis.js';
import { request, type Response } from '../helpers/servers.js';
import { waitFor } from '../helpers/wait.js';

/** Admin tokens must be strong (src/ops/admin-tokens.ts): 32 random bytes, 43 characters. */
const strongToken = (): string => randomBytes(32).toString('base64url');
const TOKEN = strongToken();
const OTHER_TOKEN = strongToken();
/** A lock the scenarios below never reach: the lock has its own tests (ops-admin-auth.test.ts). */
const noLock = () => new AdminAuthGuard({ maxFailures: 1000, windowSeconds: 60 });

async function listener(t: Tap, routes: ReturnType<typeof keyAdminRoutes>) {
  const admin = await startAdmin({
    host: '127.0.0.1',
    port: 0,
    readiness: () => READY,
    metrics: async () => ({ body: '', contentType: 'text/plain' }),
    deprecations: async () => ({ generatedAt: '', operations: [] }) as never,
    ...(routes === undefined ? {} : { routes }),
  });
  t.teardown(() => admin.close());
  return `http://127.0.0.1:${admin.address().port}`;
}


function errorOf(r: Response): { code: string; status: number } {
  const body = r.json as { code: string; message: string; status: number };
  return { code: body.code, status: r.status === body.status ? body.status : -1 };
}

t.test('adminTokens: comma-separated, blanks ignored, null reads none', async (t) => {
  t.strictSame(adminTokens({ T: ' a, ,b ' }, 'T'), ['a', 'b']);
  t.strictSame(adminTokens({}, 'T'), []);
  t.strictSame(adminTokens({ T: 'a' }, null), []);
});

t.test('no admin token in force: /keys is a 404, as any unknown admin path', async (t) => {
  const routes = keyAdminRoutes({ tokens: new AdminTokens(), guard: noLock(), registry: () => undefined, fileIds: () => new Set(), log: undefined });
  const url = await listener(t, routes);
  for (const [method, path] of [['GET', '/keys'], ['POST', '/keys'], ['DELETE', '/keys/a']] as const) {
    const r = await request(`${url}${path}`, { method, headers: { authorization: `Bearer ${TOKEN}` } });
    t.strictSame(errorOf(r), { code: 'not_found', status: 404 }, `${method} ${path}`);
  }
});

t.test('the key API: tokens, validation, changes, audit, Redis away', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const registry = new KeyRegistry({ redis: { url: redis.url }, prefix: 'adm:', syncIntervalMs: 1000, maxStaleSeconds: 60, commandTimeoutMs: 300 }, { env: {} });
  t.teardown(() => registry.close());
  await registry.ready;
  const audit: Array<Record<string, unknown>> = [];
  const routes = keyAdminRoutes({
    tokens: new AdminTokens([
      { name: 'ADMIN#1', token: OTHER_TOKEN },
      { name: 'ADMIN#2', token: TOKEN },
    ]),
    guard: noLock(),
    registry: () => registry,
    fileIds: () => new Set(['file-key']),
    log: { info: (fields) => audit.push(fields) },
  });
  const url = await listener(t, routes);
  const call = (method: string, path: string, body?: string, headers: Record<string, string> = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }) =>
    request(`${url}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });

  t.test('refused without a token, with an API key, with a wrong token', async (t) => {
    const apiKey = (await registry.create({ id: 'an-api-key' })).key;
    const cases: Array<[string, Record<string, string>, string]> = [
      ['no Authorization', {}, 'missing_api_key'],
      ['an API key of the registry', { authorization: `Bearer ${apiKey}` }, 'invalid_api_key'],
      ['a wrong token', { authorization: `Bearer ${TOKEN}x` }, 'invalid_api_key'],
      ['Basic', { authorization: `Basic ${Buffer.from(`a:${TOKEN}`).toString('base64')}` }, 'invalid_api_key'],
    ];
    for (const [name, headers, code] of cases) {
      for (const [method, path] of [['GET', '/keys'], ['POST', '/keys'], ['POST', '/keys/an-api-key/rotate'], ['DELETE', '/keys/an-api-key']]) {
        const r = await call(method!, path!, method === 'POST' ? '{"id":"sneaky"}' : undefined, { ...headers, 'content-type': 'application/json' });
        t.strictSame(errorOf(r), { code, status: 401 }, `${name}: ${method} ${path}`);
        t.match(r.headers['www-authenticate'], /^Bearer realm="petstore-gateway-admin"/);
      }
    }
    t.strictSame((await registry.list()).map((k) => k.id), ['an-api-key'], 'nothing changed');
    await registry.revoke('an-api-key');
  });

  t.test('bad input changes nothing, in the Error shape', async (t) => {
    await call('POST', '/keys', '{"id":"keep"}');
    const before = JSON.stringify(await registry.list());
    const cases: Array<[string, string, string | undefined, string, number, Record<string, string>?]> = [
      ['POST', '/keys', '{"id":', 'malformed_json', 400],
      ['POST', '/keys', '{"id":"x","extra":1}', 'invalid_request', 400],
      ['POST', '/keys', '{"id":"has space"}', 'invalid_request', 400],
      ['POST', '/keys', '{"id":"env#1"}', 'invalid_request', 400],
      ['POST', '/keys', '{"operations":["listPets"]}', 'invalid_request', 400],
      ['POST', '/keys', '{"id":"x","operations":["deletePet"]}', 'invalid_request', 400],
      ['POST', '/keys', '{"id":"x","scopes":["has space"]}', 'invalid_request', 400],
      ['POST', '/keys', '{"id":"x","scopes":["a","a"]}', 'invalid_request', 400],
      ['POST', '/keys', JSON.stringify({ id: 'x', scopes: ['s'.repeat(65)] }), 'invalid_request', 400],
      ['POST', '/keys', JSON.stringify({ id: 'x', scopes: Array.from({ length: 33 }, (_, i) => `s${i}`) }), 'invalid_request', 400],
      ['POST', '/keys', '{"id":"x","scopes":"migration:tester"}', 'invalid_request', 400],
      ['POST', '/keys', '{"id":"x","expires":"tomorrow"}', 'invalid_request', 400],
      ['POST', '/keys', '{"id":"x","expires":"2030-02-30T00:00:00Z"}', 'invalid_request', 400],
      ['POST', '/keys', '[]', 'invalid_request', 400],
      ['POST', '/keys', undefined, 'invalid_request', 400],
      ['POST', '/keys', '{"id":"x"}', 'unsupported_media_type', 415, { authorization: `Bearer ${TOKEN}`, 'content-type': 'text/plain' }],
      ['POST', '/keys', JSON.stringify({ id: 'x', pad: 'p'.repeat(20000) }), 'payload_too_large', 413],
      ['POST', '/keys', '{"id":"keep"}', 'conflict', 409],
      ['POST', '/keys', '{"id":"file-key"}', 'conflict', 409],
      ['POST', '/keys/keep/rotate', '{"overlapSeconds":-1}', 'invalid_request', 400],
      ['POST', '/keys/keep/rotate', '{"overlapSeconds":"1h"}', 'invalid_request', 400],
      ['POST', '/keys/nobody/rotate', '{}', 'not_found', 404],
      ['DELETE', '/keys/nobody', undefined, 'not_found', 404],
      ['DELETE', '/keys/bad%20id', undefined, 'not_found', 404],
      ['PUT', '/keys', '{"id":"x"}', 'method_not_allowed', 405],
      ['GET', '/keys/keep', undefined, 'method_not_allowed', 405],
      ['DELETE', '/keys/keep/rotate', undefined, 'method_not_allowed', 405],
    ];
    for (const [method, path, body, code, status, headers] of cases) {
      const r = await call(method, path, body, headers);
      t.strictSame(errorOf(r), { code, status }, `${method} ${path} ${body?.slice(0, 40) ?? ''}`);
      t.equal(r.headers['content-type'], 'application/json; charset=utf-8');
    }
    t.equal(JSON.stringify(await registry.list()), before, 'the registry is as it was');
  });

  t.test('create, rotate, list, revoke; one audit line each, never the secret', async (t) => {
    audit.length = 0;
    const c = await call('POST', '/keys', JSON.stringify({ id: 'svc', operations: ['getPet'], scopes: ['migration:tester'], expires: '2030-01-01T00:00:00Z' }));
    t.equal(c.status, 201);
    const made = c.json as { key: string };
    t.match(c.json, { id: 'svc', operations: ['getPet'], scopes: ['migration:tester'], expires: '2030-01-01T00:00:00Z', lastUsed: null });
    const r = await call('POST', '/keys/svc/rotate', '');
    t.equal(r.status, 200, 'an empty body: the default overlap');
    const rotated = r.json as { key: string; previousKeyValidUntil: string };
    t.ok(Date.parse(rotated.previousKeyValidUntil) - Date.now() > 86_000_000, 'default overlap: 24 h');
    t.match(r.json, { id: 'svc', operations: ['getPet'], scopes: ['migration:tester'] }, 'rotated: the same operations and scopes');
    const l = await call('GET', '/keys');
    t.equal(l.status, 200);
    t.match((l.json as { keys: Array<{ id: string }> }).keys.map((k) => k.id), ['keep', 'svc']);
    t.match(l.json, { keys: [{ id: 'keep', scopes: null }, { id: 'svc', operations: ['getPet'], scopes: ['migration:tester'] }] });
    t.notMatch(l.body, /psgk_|sha256/, 'no secret or hash in the list');
    const d = await call('DELETE', '/keys/svc');
    t.equal(d.status, 204);
    t.equal(d.body, '');
    t.strictSame(
      audit.map((a) => [a.action, a.id, a.by]),
      [
        ['created', 'svc', 'ADMIN#2'],
        ['rotated', 'svc', 'ADMIN#2'],
        ['revoked', 'svc', 'ADMIN#2'],
      ],
    );
    const text = JSON.stringify(audit);
    for (const secret of [made.key, rotated.key, TOKEN]) t.notOk(text.includes(secret), 'no secret in the audit');
  });

  t.test('Redis lost its data: revoking a key the gateway keeps says it still works, and the way out', async (t) => {
    const kept = await registry.create({ id: 'kept-after-loss' });
    await waitFor('the key in the copy', () => registry.knows(kept.key), 3000);
    spawnSync('redis-cli', ['-p', String(redis.port), 'FLUSHALL'], { timeout: 5000 });
    await waitFor('the loss detected', () => registry.status().dataLoss, 5000);
    const r = await call('DELETE', '/keys/kept-after-loss');
    t.strictSame(errorOf(r), { code: 'not_found', status: 404 });
    t.match((r.json as { message: string }).message, /^No key with this id in Redis, but the gateways still accept it.*`keys import` a backup, then revoke it.*`keys reset-epoch`.*docs\/keys\.md\)\.$/);
    t.ok(registry.knows(kept.key), 'still kept: the message is true');
    t.match((await call('DELETE', '/keys/never-made')).json, { message: 'No key with this id.' }, 'an id nobody keeps: the plain 404');
  });

  t.test('Redis away: create refused with 503, nothing half-done', async (t) => {
    await redis.kill();
    const r = await call('POST', '/keys', '{"id":"while-away"}');
    t.strictSame(errorOf(r), { code: 'service_unavailable', status: 503 });
    t.match((r.json as { message: string }).message, /not reachable; nothing was changed/);
    t.equal(r.headers['retry-after'], '1');
  });
});
