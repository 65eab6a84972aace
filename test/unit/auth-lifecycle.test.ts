/**
 * The key lifecycle in the auth policy: key expiry (401 with RFC 6750's "The access token expired"),
 * operations (403 forbidden), the consumer on the exchange (with its scopes), brute-force protection per client
 * address (429 with Retry-After, bounded memory), and `describeKeys` for `check`.
 */
import t from 'tap';
import { Chain } from '../helpers/chain.js';
import type { Exchange } from '../../src/core/policy.js';
import { parsePolicy } from '../../src/config/load.js';
import { CONSUMER, KEY_ID } from '../../src/policies/auth/facts.js';
import { auth, describeKeys, hashKey, type AuthConfig } from '../../src/policies/auth/index.js';

const T0 = Date.parse('2027-03-01T12:00:00Z');
const KEYS = { ops: 'psg_ops-key-0123456789', reader: 'psg_reader-key-012345', old: 'psg_old-key-0123456789' };

function config(patch: Partial<AuthConfig> = {}): AuthConfig {
  return {
    keys: [
      { id: 'ops', hash: hashKey(KEYS.ops) },
      { id: 'reader', hash: hashKey(KEYS.reader), operations: ['listPets', 'getPet'], scopes: ['migration:tester', 'team.b_2-x'] },
      { id: 'old', hash: hashKey(KEYS.old), expires: '2027-03-01T12:00:10Z' },
    ],
    keysFromEnv: null,
    realm: 'petstore',
    upstreamAuthorization: 'drop',
    bruteForce: { maxFailures: 5, windowSeconds: 60 },
    registry: null,
    ...patch,
  };
}

function setup(cfg: AuthConfig = config()) {
  let now = T0;
  const policy = auth.create(cfg, { env: {}, now: () => now });
  const chain = new Chain([policy]);
  const call = (key: string | undefined, opts: { method?: string; target?: string; from?: string } = {}) =>
    chain.begin({
      method: opts.method ?? 'GET',
      target: opts.target ?? '/v1/pets',
      headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
      remoteAddress: opts.from ?? '192.0.2.1',
    });
  return { call, policy: policy as typeof policy & { trackedAddresses: number }, advance: (ms: number) => void (now += ms) };
}

t.test('expires: valid before, 401 expired_api_key with the RFC 6750 challenge from that instant', async (t) => {
  const { call, advance } = setup();
  const before = call(KEYS.old);
  t.equal(before.error, undefined);
  t.strictSame(before.ex.get(CONSUMER), { id: 'old', expires: '2027-03-01T12:00:10Z', operations: undefined, scopes: undefined });
  advance(10_000);
  const after = call(KEYS.old);
  t.match(after.error, { code: 'expired_api_key', status: 401 });
  t.equal(after.error?.headers['www-authenticate'], 'Bearer realm="petstore", error="invalid_token", error_description="The access token expired"');
  t.equal(after.ex.get(KEY_ID), undefined, 'an expired key is not a consumer');
  t.equal(call(KEYS.ops).error, undefined, 'other keys unaffected');
});

t.test('operations: the listed operationIds pass, others are 403 forbidden (insufficient_scope)', async (t) => {
  const { call } = setup();
  t.equal(call(KEYS.reader, { target: '/v1/pets' }).error, undefined, 'listPets');
  t.equal(call(KEYS.reader, { target: '/v1/pets/7' }).error, undefined, 'getPet');
  const create = call(KEYS.reader, { method: 'POST', target: '/v1/pets' });
  t.match(create.error, { code: 'forbidden', status: 403 });
  t.equal(create.error?.headers['www-authenticate'], 'Bearer realm="petstore", error="insufficient_scope"');
  t.equal(call(KEYS.ops, { method: 'POST', target: '/v1/pets' }).error, undefined, 'a key without operations may call all');
  t.strictSame(call(KEYS.reader).ex.get(CONSUMER), { id: 'reader', expires: undefined, operations: ['listPets', 'getPet'], scopes: ['migration:tester', 'team.b_2-x'] });
  t.equal(call(KEYS.ops).ex.get(CONSUMER)?.scopes, undefined, 'a key without scopes has none');
  // The same frozen object every time: no allocation per request.
  t.equal(call(KEYS.reader).ex.get(CONSUMER), call(KEYS.reader).ex.get(CONSUMER));
});

t.test('brute force: after maxFailures guesses from one address, every key from it is 429 until the window drains', async (t) => {
  const { call, advance } = setup();
  for (let i = 0; i < 5; i++) t.equal(call(`psg_guess-${i}`).error?.code, 'invalid_api_key', `guess ${i + 1}`);
  const locked = call('psg_guess-6');
  t.match(locked.error, { code: 'too_many_auth_failures', status: 429 });
  t.equal(locked.error?.headers['retry-after'], '12', '60 s / 5 failures, rounded up');
  // Safe choice: a valid key from a locked address is locked too (no oracle for the guesser).
  t.equal(call(KEYS.ops).error?.code, 'too_many_auth_failures');
  // Another address is not affected; a missing or malformed header guesses nothing.
  t.equal(call(KEYS.ops, { from: '198.51.100.7' }).error, undefined);
  t.equal(call(undefined).error?.code, 'missing_api_key');
  t.equal(call('not a token').error?.code, 'malformed_authorization');
  // Retry-After is not shorter than the real wait: 1 ms before it, still locked.
  advance(11_999);
  t.equal(call(KEYS.ops).error?.code, 'too_many_auth_failures');
  advance(1);
  t.equal(call(KEYS.ops).error, undefined, 'unlocked once Retry-After has passed');
  t.equal(call('psg_guess-7').error?.code, 'invalid_api_key', 'one more guess is allowed (earned at the sustained rate)');
  t.equal(call('psg_guess-8').error?.code, 'too_many_auth_failures');
});

t.test('brute force: expired keys and requests without an address are not counted; null turns it off', async (t) => {
  const { call, advance } = setup();
  advance(20_000);
  for (let i = 0; i < 10; i++) t.equal(call(KEYS.old).error?.code, 'expired_api_key');
  const none = setup(config({ bruteForce: null }));
  for (let i = 0; i < 20; i++) t.equal(none.call(`psg_guess-${i}`).error?.code, 'invalid_api_key');
  t.equal(none.policy.trackedAddresses, 0);
});

t.test('brute force: 1,000,000 distinct addresses keep memory bounded at the cache size', async (t) => {
  const { call, policy } = setup(config({ bruteForce: { maxFailures: 100, windowSeconds: 60 } }));
  // The policy directly (not the chain): one request head per address, nothing else per call.
  const headers = { authorization: 'Bearer psg_guess' };
  const N = 1_000_000 + 5_000;
  for (let i = 0; i < N; i++) {
    const head = { method: 'GET', target: '/v1/pets', headers, remoteAddress: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}:${i >> 24}` };
    // Without a store the brute-force count is kept in memory: the decision is synchronous.
    void policy.onRequest!({ head, operation: undefined } as unknown as Exchange);
  }
  t.equal(policy.trackedAddresses, 1_000_000, 'at most 1,000,000 addresses, whatever the flood');
  t.equal(call(KEYS.ops, { from: '192.0.2.200' }).error, undefined);
});

t.test('describeKeys: one line per key with id, expiry, operations and scopes, never a hash or a key', async (t) => {
  const env = { env: { EXTRA_KEYS: 'psg_env-one,psg_env-two' }, now: () => T0 + 60_000 };
  const lines = describeKeys(config({ keysFromEnv: 'EXTRA_KEYS' }), env);
  t.strictSame(lines, [
    'ops: never expires, all operations',
    'reader: never expires, operations: listPets, getPet, scopes: migration:tester, team.b_2-x',
    'old: EXPIRED 2027-03-01T12:00:10Z, all operations',
    'EXTRA_KEYS#1: never expires, all operations (from the environment)',
    'EXTRA_KEYS#2: never expires, all operations (from the environment)',
  ]);
  const text = lines.join('\n');
  for (const secret of [...Object.values(KEYS), 'psg_env-one', 'psg_env-two', 'sha256:', hashKey(KEYS.ops).slice(7, 20)]) {
    t.notOk(text.includes(secret), 'no key or hash in the output');
  }
  t.match(describeKeys(config(), { env: {}, now: () => T0 })[2], /^old: expires 2027-03-01T12:00:10Z/);
});

t.test('schema: expires, operations, scopes and bruteForce accepted and checked', async (t) => {
  const hash = hashKey(KEYS.ops);
  const ok = parsePolicy(
    `policies:\n  auth:\n    keys:\n      - { id: a, hash: "${hash}", expires: "2030-01-01T00:00:00Z", operations: [listPets], scopes: ["migration:tester"] }\n    bruteForce: null\n`,
    { env: {} },
  );
  t.ok(ok.ok);
  if (ok.ok) {
    t.strictSame(ok.config.policies.auth.keys, [{ id: 'a', hash, expires: '2030-01-01T00:00:00Z', operations: ['listPets'], scopes: ['migration:tester'] }]);
    t.equal(ok.config.policies.auth.bruteForce, null);
  }
  const bad = parsePolicy(
    `policies:\n  auth:\n    keys:\n      - { id: a, hash: "${hash}", expires: "2030-02-30T00:00:00Z", operations: [deletePet] }\n    bruteForce: { maxFailures: 0, windowSeconds: 60 }\n`,
    { env: {} },
  );
  t.notOk(bad.ok);
  if (!bad.ok) {
    // Every problem in one pass: the schema's two and the date check's (February 30 matches the
    // date-time pattern, so the schema does not blame it: reported once, by the auth rule).
    t.strictSame(bad.problems.map((p) => p.path).sort(), ['$.policies.auth.bruteForce.maxFailures', '$.policies.auth.keys[0].expires', '$.policies.auth.keys[0].operations[0]']);
    t.strictSame(bad.problems.find((p) => p.path === '$.policies.auth.keys[0].expires'), { path: '$.policies.auth.keys[0].expires', message: 'is not a valid date' });
  }
  const badDate = parsePolicy(`policies:\n  auth:\n    keys:\n      - { id: a, hash: "${hash}", expires: "2030-02-30T00:00:00Z" }\n`, { env: {} });
  t.strictSame(badDate.ok ? [] : badDate.problems, [{ path: '$.policies.auth.keys[0].expires', message: 'is not a valid date' }]);
  // A scope out of form, one too long, one twice, one too many: each refused at its path.
  const scopes = (list: string) => parsePolicy(`policies:\n  auth:\n    keys:\n      - { id: a, hash: "${hash}", scopes: ${list} }\n`, { env: {} });
  const many = JSON.stringify(Array.from({ length: 33 }, (_, i) => `s${i}`));
  for (const [list, path] of [
    ['["migration:tester", "has space"]', '$.policies.auth.keys[0].scopes[1]'],
    [`["${'x'.repeat(65)}"]`, '$.policies.auth.keys[0].scopes[0]'],
    ['[a, a]', '$.policies.auth.keys[0].scopes'],
    [many, '$.policies.auth.keys[0].scopes'],
    ['migration:tester', '$.policies.auth.keys[0].scopes'],
  ] as const) {
    const r = scopes(list);
    t.strictSame(r.ok ? [] : r.problems.map((p) => p.path), [path], list.slice(0, 40));
  }
  const spaced = scopes('["has space"]');
  t.strictSame(spaced.ok ? [] : spaced.problems, [{ path: '$.policies.auth.keys[0].scopes[0]', message: 'must be a scope: letters, digits, ":", ".", "_" and "-", such as migration:tester' }]);
});
