/**
 * The auth policy: decision tables for the Authorization header (codes, 401, exact
 * WWW-Authenticate), what the upstream receives as Authorization, and the key helpers.
 */
import t from 'tap';
import { Chain } from '../helpers/chain.js';
import { Facts } from '../../src/core/facts.js';
import type { Exchange, IncomingHeaders } from '../../src/core/policy.js';
import { auth, buildKeyRing, hashKey, KeyRing, newKey, type AuthConfig } from '../../src/policies/auth/index.js';
import { KEY_ID } from '../../src/policies/auth/facts.js';
import { HASH_PATTERN, sameDigest } from '../../src/policies/auth/keys.js';

const KEY = 'psg_right-key_0123456789';
const OTHER_KEY = 'psg_other.key~+/==';

function config(patch: Partial<AuthConfig> = {}): AuthConfig {
  return {
    keys: [{ id: 'ops', hash: hashKey(KEY) }],
    keysFromEnv: 'PETSTORE_API_KEYS',
    realm: 'petstore',
    upstreamAuthorization: 'drop',
    bruteForce: null,
    registry: null,
    ...patch,
  };
}

type Env = Record<string, string | undefined>;

function run(cfg: AuthConfig, headers: IncomingHeaders, env: Env = {}, target = '/v1/pets') {
  const chain = new Chain([auth.create(cfg, { env })]);
  return chain.begin({ method: 'GET', target, headers });
}

const CHALLENGE = 'Bearer realm="petstore"';
const MISSING = { code: 'missing_api_key', status: 401, headers: { 'www-authenticate': CHALLENGE } };
const MALFORMED = { code: 'malformed_authorization', status: 401, headers: { 'www-authenticate': `${CHALLENGE}, error="invalid_request"` } };
const INVALID = { code: 'invalid_api_key', status: 401, headers: { 'www-authenticate': `${CHALLENGE}, error="invalid_token"` } };

function outcome(error: { code: string; status: number; headers: Readonly<Record<string, string>> } | undefined) {
  return error === undefined ? 'pass' : { code: error.code, status: error.status, headers: { ...error.headers } };
}

t.test('decision table: the Authorization header', async (t) => {
  const cases: [name: string, authorization: string | string[] | undefined, expected: 'pass' | typeof MISSING][] = [
    ['no header', undefined, MISSING],
    ['empty header', '', MISSING],
    ['Basic scheme', 'Basic dXNlcjpwYXNz', MALFORMED],
    ['Bearer alone', 'Bearer', MALFORMED],
    ['Bearer and a space (empty token)', 'Bearer ', MALFORMED],
    ['Bearer and spaces only', 'Bearer    ', MALFORMED],
    ['token with a space inside', `Bearer ${KEY} extra`, MALFORMED],
    ['token with a comma', 'Bearer a,b', MALFORMED],
    ['token with a quote', 'Bearer "abc"', MALFORMED],
    ['token with a non-ASCII letter', 'Bearer clé', MALFORMED],
    ['token with = inside', 'Bearer ab=cd', MALFORMED],
    ['token of = only', 'Bearer ==', MALFORMED],
    ['token with a trailing space', `Bearer ${KEY} `, MALFORMED],
    ['tab after the scheme', `Bearer\t${KEY}`, MALFORMED],
    ['no space after the scheme', `Bearer${KEY}`, MALFORMED],
    ['key without a scheme', KEY, MALFORMED],
    ['scheme with a colon', `Bearer: ${KEY}`, MALFORMED],
    ['leading space', ` Bearer ${KEY}`, MALFORMED],
    ['an array of values', [`Bearer ${KEY}`], MALFORMED],
    ['lowercase bearer, right key', `bearer ${KEY}`, 'pass'],
    ['BEARER, right key', `BEARER ${KEY}`, 'pass'],
    ['bEaReR, right key', `bEaReR ${KEY}`, 'pass'],
    ['several spaces, right key', `Bearer    ${KEY}`, 'pass'],
    ['right key', `Bearer ${KEY}`, 'pass'],
    ['wrong key', 'Bearer psg_wrong', INVALID],
    ['wrong key, valid b64token with padding', `Bearer ${OTHER_KEY}`, INVALID],
    ['right key with a suffix', `Bearer ${KEY}x`, INVALID],
    ['right key, truncated', `Bearer ${KEY.slice(0, -1)}`, INVALID],
    ['right key in another case', `Bearer ${KEY.toUpperCase()}`, INVALID],
    ['the hash as the key', `Bearer ${hashKey(KEY).slice('sha256:'.length)}`, INVALID],
  ];
  for (const [name, authorization, expected] of cases) {
    const headers: IncomingHeaders = authorization === undefined ? {} : { authorization };
    const { ex, error } = run(config(), headers);
    t.strictSame(outcome(error), expected, name);
    t.equal(ex.get(KEY_ID), expected === 'pass' ? 'ops' : undefined, `${name}: keyId`);
  }
});

t.test('an error carries the catalogue message and is rendered with status 401', async (t) => {
  const { error } = run(config(), {});
  t.equal(error?.message, 'An API key is required: send Authorization: Bearer <key>.');
  t.equal(error?.name, 'GatewayError');
});

t.test('the realm of the challenge comes from the config', async (t) => {
  const cfg = config({ realm: 'pets & more' });
  t.strictSame(outcome(run(cfg, {}).error), { code: 'missing_api_key', status: 401, headers: { 'www-authenticate': 'Bearer realm="pets & more"' } });
  t.strictSame(outcome(run(cfg, { authorization: 'Basic x' }).error), {
    code: 'malformed_authorization',
    status: 401,
    headers: { 'www-authenticate': 'Bearer realm="pets & more", error="invalid_request"' },
  });
  t.strictSame(outcome(run(cfg, { authorization: 'Bearer nope' }).error), {
    code: 'invalid_api_key',
    status: 401,
    headers: { 'www-authenticate': 'Bearer realm="pets & more", error="invalid_token"' },
  });
});

t.test('auth runs on every path and method, before any route is known', async (t) => {
  for (const [method, target] of [
    ['GET', '/'],
    ['DELETE', '/v1/pets'],
    ['POST', '/v1/pets'],
    ['GET', '/v1/pets/1'],
    ['OPTIONS', '*'],
  ] as const) {
    const chain = new Chain([auth.create(config(), { env: {} })]);
    t.equal(chain.begin({ method, target, headers: {} }).error?.code, 'missing_api_key', `${method} ${target}`);
    t.equal(chain.begin({ method, target, headers: { authorization: `Bearer ${KEY}` } }).error, undefined, `${method} ${target} with a key`);
  }
});

t.test('keys from the environment variable (comma separated, spaces trimmed)', async (t) => {
  const env = { PETSTORE_API_KEYS: '  env-one ,env-two,, ,  env-three  ' };
  const cfg = config({ keys: [] });
  const cases: [string, string | undefined][] = [
    ['env-one', 'PETSTORE_API_KEYS#1'],
    ['env-two', 'PETSTORE_API_KEYS#2'],
    ['env-three', 'PETSTORE_API_KEYS#3'],
    ['env-one ', undefined],
    ['ENV-ONE', undefined],
    ['env', undefined],
    ['env-one,env-two', undefined],
  ];
  for (const [key, id] of cases) {
    const { ex, error } = run(cfg, { authorization: `Bearer ${key}` }, env);
    t.equal(ex.get(KEY_ID), id, JSON.stringify(key));
    if (id === undefined) t.ok(error?.code === 'invalid_api_key' || error?.code === 'malformed_authorization', `${JSON.stringify(key)} denied`);
    else t.equal(error, undefined, `${key} passes`);
  }
});

t.test('keys from the file and from the environment together', async (t) => {
  const env = { PETSTORE_API_KEYS: 'env-key' };
  t.equal(run(config(), { authorization: `Bearer ${KEY}` }, env).ex.get(KEY_ID), 'ops');
  t.equal(run(config(), { authorization: 'Bearer env-key' }, env).ex.get(KEY_ID), 'PETSTORE_API_KEYS#1');
});

t.test('keysFromEnv names the variable; null ignores the environment', async (t) => {
  const env = { PETSTORE_API_KEYS: 'default-var-key', MY_KEYS: 'my-key' };
  const renamed = config({ keys: [], keysFromEnv: 'MY_KEYS' });
  t.equal(run(renamed, { authorization: 'Bearer my-key' }, env).ex.get(KEY_ID), 'MY_KEYS#1');
  t.equal(run(renamed, { authorization: 'Bearer default-var-key' }, env).error?.code, 'invalid_api_key');

  const none = config({ keys: [], keysFromEnv: null });
  t.equal(run(none, { authorization: 'Bearer default-var-key' }, env).error?.code, 'invalid_api_key');
  t.equal(run(none, { authorization: 'Bearer my-key' }, env).error?.code, 'invalid_api_key');
  t.equal(buildKeyRing(none, { env }).size, 0);
  // Unset variable: no keys, no crash.
  t.equal(buildKeyRing(config({ keys: [] }), { env: {} }).size, 0);
});

t.test('auth.create reads only the env it is given, not process.env', async (t) => {
  const saved = process.env.PETSTORE_API_KEYS;
  process.env.PETSTORE_API_KEYS = 'process-env-key';
  t.teardown(() => {
    if (saved === undefined) delete process.env.PETSTORE_API_KEYS;
    else process.env.PETSTORE_API_KEYS = saved;
  });
  t.equal(run(config(), { authorization: 'Bearer process-env-key' }, {}).error?.code, 'invalid_api_key');
});

t.test('upstreamAuthorization: what the upstream receives', async (t) => {
  const ok = { authorization: `Bearer ${KEY}` };
  const env = { UPSTREAM_AUTHORIZATION: 'Basic dXBzdHJlYW06c2VjcmV0' };

  const drop = run(config({ upstreamAuthorization: 'drop' }), ok, env).ex;
  t.strictSame(drop.upstreamHeaders, { authorization: null }, 'drop removes the header');
  t.equal(drop.upstreamHeaders.authorization, null);

  const forward = run(config({ upstreamAuthorization: 'forward' }), ok, env).ex;
  // src/core/headers.ts never forwards the client's Authorization itself: the policy sets it.
  t.strictSame(forward.upstreamHeaders, { authorization: `Bearer ${KEY}` }, "forward sets the client's header, as sent");

  const fromEnv = run(config({ upstreamAuthorization: { fromEnv: 'UPSTREAM_AUTHORIZATION' } }), ok, env).ex;
  t.strictSame(fromEnv.upstreamHeaders, { authorization: 'Basic dXBzdHJlYW06c2VjcmV0' }, 'fromEnv sets the whole value');

  // A denied request changes nothing for the upstream.
  for (const up of ['drop', 'forward', { fromEnv: 'UPSTREAM_AUTHORIZATION' }] as const) {
    const { ex, error } = run(config({ upstreamAuthorization: up }), { authorization: 'Bearer wrong' }, env);
    t.equal(error?.code, 'invalid_api_key');
    t.strictSame(ex.upstreamHeaders, {}, `${JSON.stringify(up)}: untouched on denial`);
  }
});

t.test('an Exchange built by hand works the same', async (t) => {
  const policy = auth.create(config(), { env: {} });
  const ex: Exchange = Object.assign(new Facts(), {
    head: { method: 'GET', target: '/v1/pets', headers: { authorization: `Bearer ${KEY}` } },
    route: { kind: 'not_found' } as const,
    operation: undefined,
    rawQuery: '',
    upstreamQuery: '',
    upstreamHeaders: {},
    responseHeaders: {},
    upstreamBody: undefined,
  });
  t.equal(policy.onRequest?.(ex), undefined);
  t.equal(ex.get(KEY_ID), 'ops');
  t.equal(ex.upstreamHeaders.authorization, null);
  t.equal(policy.name, 'auth');
  t.equal(policy.onBody, undefined);
});

t.test('auth.check: duplicate ids and hashes, bad env keys, unset fromEnv', async (t) => {
  const h1 = hashKey('k1');
  const h2 = hashKey('k2');
  const path = '$.policies.auth';
  t.strictSame(auth.check!(config({ keys: [] }), path, { env: {} }), []);
  t.strictSame(
    auth.check!(
      config({
        keys: [
          { id: 'a', hash: h1 },
          { id: 'b', hash: h2 },
          { id: 'a', hash: h2 },
          { id: 'c', hash: h1 },
          { id: 'c', hash: hashKey('k3') },
        ],
      }),
      path,
      { env: {} },
    ),
    [
      { path: '$.policies.auth.keys[2].id', message: "duplicate key id 'a'" },
      { path: '$.policies.auth.keys[2].hash', message: 'duplicate key hash' },
      { path: '$.policies.auth.keys[3].hash', message: 'duplicate key hash' },
      { path: '$.policies.auth.keys[4].id', message: "duplicate key id 'c'" },
    ],
  );
  t.strictSame(auth.check!(config({ keys: [] }), path, { env: { PETSTORE_API_KEYS: 'ok,not ok' } }), [
    { path: '$.policies.auth.keysFromEnv', message: 'key #2 of PETSTORE_API_KEYS is not a valid bearer token (RFC 6750 b64token)' },
  ]);
  t.strictSame(auth.check!(config({ keys: [], keysFromEnv: null }), path, { env: { PETSTORE_API_KEYS: 'not ok' } }), []);
  t.strictSame(auth.check!(config({ upstreamAuthorization: { fromEnv: 'UP' } }), path, { env: {} }), [
    { path: '$.policies.auth.upstreamAuthorization.fromEnv', message: 'environment variable UP is not set or empty' },
  ]);
  t.strictSame(auth.check!(config({ upstreamAuthorization: { fromEnv: 'UP' } }), path, { env: { UP: 'Bearer x' } }), []);
});

t.test('auth.check with the loader\'s context: a config that accepts no key is refused when the run requires one', async (t) => {
  const path = '$.policies.auth';
  const none = config({ keys: [], keysFromEnv: 'PETSTORE_API_KEYS' });
  const ctx = (run: 'not-checked' | 'required' | 'ephemeral-allowed', accepted = true) => ({ policies: {}, accepted, run });
  t.strictSame(auth.check!(none, path, { env: {} }), [], 'no context: the section alone, no run requirement');
  t.strictSame(auth.check!(none, path, { env: {} }, ctx('not-checked')), []);
  t.match(auth.check!(none, path, { env: {} }, ctx('required')), [{ path, message: /^no API key is configured, so every request would be refused: .*set PETSTORE_API_KEYS.*--ephemeral-key/ }]);
  t.strictSame(auth.check!(none, path, { env: {} }, ctx('required', false)), [], 'a section the schema refused builds no key ring');
  t.strictSame(auth.check!(none, path, { env: {} }, ctx('ephemeral-allowed')), [], '--ephemeral-key puts a key in the variable');
  t.strictSame(auth.check!(none, path, { env: { PETSTORE_API_KEYS: 'psg_abc' } }, ctx('required')), [], 'a key from the variable');
  t.match(auth.check!(config({ keys: [], keysFromEnv: null }), path, { env: {} }, ctx('ephemeral-allowed')), [{ path, message: /or set auth.keysFromEnv/ }]);
});

t.test('hashKey: sha256: and 64 lower-case hex digits', async (t) => {
  // SHA-256 of "" and of "abc" (FIPS 180-2 test vectors).
  t.equal(hashKey(''), 'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  t.equal(hashKey('abc'), 'sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  t.match(hashKey(KEY), new RegExp(HASH_PATTERN));
  t.match(hashKey('clé'), new RegExp(HASH_PATTERN), 'UTF-8 input');
  t.equal(hashKey(KEY), hashKey(KEY), 'deterministic');
  t.not(hashKey('a'), hashKey('b'));
});

t.test('newKey: psg_ and 43 base64url characters (256 bits), distinct across 100 calls', async (t) => {
  const seen = new Set<string>();
  for (let i = 0; i < 100; i++) {
    const key = newKey();
    t.match(key, /^psg_[A-Za-z0-9_-]{43}$/);
    t.equal(Buffer.from(key.slice(4), 'base64url').length, 32, '32 random bytes');
    seen.add(key);
  }
  t.equal(seen.size, 100, 'no repeats');
  // A new key is a valid bearer token that auth accepts once its hash is configured.
  const key = newKey();
  t.equal(run(config({ keys: [{ id: 'new', hash: hashKey(key) }] }), { authorization: `Bearer ${key}` }).ex.get(KEY_ID), 'new');
});

t.test('KeyRing: lookup among 100000 keys', async (t) => {
  const ring = new KeyRing();
  const N = 100_000;
  for (let i = 0; i < N; i++) ring.add(`k${i}`, hashKey(`key-${i}`));
  t.equal(ring.size, N);
  for (const i of [0, 1, 4242, 50_000, N - 1]) t.equal(ring.identify(`key-${i}`), `k${i}`, `key-${i}`);
  t.equal(ring.identify(`key-${N}`), undefined);
  t.equal(ring.identify(''), undefined);
  t.equal(ring.identify('key-'), undefined);
});

t.test('KeyRing: addPlain hashes the key; a re-added hash takes the last id', async (t) => {
  const ring = new KeyRing();
  ring.addPlain('plain', 'secret');
  t.equal(ring.identify('secret'), 'plain');
  t.equal(ring.identify(hashKey('secret')), undefined, 'the hash is not a key');
  ring.add('again', hashKey('secret'));
  t.equal(ring.size, 1);
  t.equal(ring.identify('secret'), 'again');
});

t.test('KeyRing: digests are compared whole, a near miss is refused', async (t) => {
  const a = 'n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=';
  t.ok(sameDigest(a, a.slice()), 'equal');
  t.notOk(sameDigest(a, 'N' + a.slice(1)), 'differs in the first character');
  t.notOk(sameDigest(a, a.slice(0, -2) + 'h='), 'differs in the last digit');
  t.notOk(sameDigest(a, a.slice(0, -1)), 'shorter');
  t.notOk(sameDigest('', a), 'empty');
  t.ok(sameDigest('', ''), 'two empty strings are equal');
  // Through the ring: a key one character off the real one has an unrelated digest: refused.
  const ring = new KeyRing();
  const key = newKey();
  ring.add('k', hashKey(key));
  t.equal(ring.identify(key), 'k');
  t.equal(ring.identify(key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A')), undefined);
  t.equal(ring.identify(key + ' '), undefined);
});
