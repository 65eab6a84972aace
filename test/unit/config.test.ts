/**
 * The policy file loader: what it accepts (with every default filled in, deep-frozen) and what it
 * rejects, each problem as an exact `{path, message}`.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { formatProblems, loadPolicyFile, parsePolicy, toJsonPath, type Overrides } from '../../src/config/load.js';
import { policyFileSchema } from '../../src/config/schema.js';
import type { Problem } from '../../src/core/policy.js';
import { POLICY_MODULES } from '../../src/policies/index.js';
import { PROJECT_ROOT } from '../helpers/root.js';

const ROOT = PROJECT_ROOT;
const H1 = 'sha256:' + 'a'.repeat(64);
const H2 = 'sha256:' + 'b'.repeat(64);
const H3 = 'sha256:' + 'c'.repeat(64);

type Env = Record<string, string | undefined>;

/** Every default of a policy file, as `{}` yields them. */
const DEFAULTS = {
  version: 1,
  upstream: {
    url: 'builtin',
    timeouts: { connectMs: 2000, headersMs: 10000, bodyMs: 10000, totalMs: 60000 },
    connections: 128,
    retryIdempotent: false,
    circuitBreaker: null,
    maxBufferedBytes: 8388608,
    tls: { caFile: null, certFile: null, keyFile: null, servername: null },
  },
  server: {
    host: '127.0.0.1',
    port: 8080,
    headersTimeoutMs: 10000,
    requestTimeoutMs: 30000,
    keepAliveTimeoutMs: 5000,
    maxConnections: 10000,
    maxConnectionsPerAddress: null,
    maxInFlightPerConnection: 8,
    maxPipelinedPerConnection: 64,
    pipelineOverflowRefuseMs: 10000,
    maxInFlightPerConsumer: 128,
    consumerQueueMs: 1000,
    maxHeaderBytes: 16384,
    shutdownGraceMs: 10000,
    drainDelayMs: 0,
    admin: { host: '127.0.0.1', port: 9464, tokensFromEnv: 'PETSTORE_ADMIN_TOKENS', readiness: { upstream: false }, console: true },
    trustedProxies: [],
    tls: null as Record<string, unknown> | null,
    http2: true,
    streamStallTimeoutMs: 20000,
    hsts: null,
  },
  headers: { request: { allow: [] }, response: { allow: [] } },
  log: { access: true, level: 'info' },
  migration: null,
  policies: {
    auth: {
      keys: [],
      keysFromEnv: 'PETSTORE_API_KEYS',
      realm: 'petstore',
      upstreamAuthorization: 'drop',
      bruteForce: { maxFailures: 100, windowSeconds: 60 },
      registry: null,
    },
    'rate-limit': { windowSeconds: 60, perKey: {}, store: 'memory', onStoreError: 'open' },
    route: {},
    deprecation: {
      // The sunset and successor are the document's (x-sunset, x-successor): deprecation.test.ts.
      deprecatedAt: '2026-01-01T00:00:00Z',
      links: [],
      removeAfterSunset: true,
      brownouts: [],
    },
    'list-pets': { outOfRange: 'reject', unknownParams: 'drop', enforceResponse: true },
    'new-pet': { maxBytes: 16384, unknownFields: 'reject' },
    'upstream-errors': {
      statusMap: { listPets: {}, createPet: { '409': 400, '422': 400 }, getPet: { '400': 404, '410': 404, '422': 404 } },
      maxBodyBytes: 4096,
    },
    'response-contract': { mode: 'enforce', unknownFields: 'drop' },
    cors: {
      origins: [],
      credentials: false,
      maxAgeSeconds: 600,
      exposeHeaders: ['X-Request-Id', 'RateLimit', 'RateLimit-Policy', 'Deprecation', 'Sunset', 'Link', 'Retry-After', 'Cache-Status', 'Age'],
      allowHeaders: ['Authorization', 'Content-Type', 'X-Request-Id', 'traceparent', 'tracestate'],
    },
    cache: { ttlSeconds: { listPets: 0, getPet: 0 }, maxBytes: 67108864, staleIfErrorSeconds: 0, store: 'memory', ignoreRequestFields: [] },
  },
};

/** DEFAULTS with some sections replaced (one level deep per section). */
function withDefaults(patch: {
  upstream?: Partial<typeof DEFAULTS.upstream>;
  server?: Partial<typeof DEFAULTS.server>;
  auth?: Record<string, unknown>;
  newPet?: Record<string, unknown>;
}) {
  return {
    ...DEFAULTS,
    upstream: { ...DEFAULTS.upstream, ...patch.upstream },
    server: { ...DEFAULTS.server, ...patch.server },
    policies: {
      ...DEFAULTS.policies,
      auth: { ...DEFAULTS.policies.auth, ...patch.auth },
      'new-pet': { ...DEFAULTS.policies['new-pet'], ...patch.newPet },
    },
  };
}

// Each format message says what was expected.
const URL_FORMAT =
  'must be "builtin" or an http(s) base URL without user:password@, query or fragment, ending with the /v1 prefix, such as http://127.0.0.1:8081/v1 (an upstream credential goes in policies.auth.upstreamAuthorization)';
const HASH_FORMAT = 'must be "sha256:" and 64 lower-case hex digits, as `petstore-gateway hash-key` prints it';
const KEYS_FROM_ENV_FORMAT = 'must be an environment variable name such as PETSTORE_API_KEYS (letters, digits and _, not starting with a digit)';
const REALM_FORMAT = 'must be 1 to 64 printable ASCII characters without " or \\';
const UPSTREAM_AUTHORIZATION_FORMS =
  'is not any of the accepted forms: What the upstream receives as Authorization: "drop" (default: nothing), "forward" (the client\'s header), or {fromEnv: NAME} (a credential of the gateway\'s own, the whole header value, from that variable).';

function accept(t: Test, text: string, env: Env = {}, overrides: Overrides = {}) {
  const r = parsePolicy(text, { env }, overrides);
  if (!r.ok) {
    t.fail('expected the file to be accepted', { problems: r.problems });
    return undefined;
  }
  return r.config;
}

function problemsOf(text: string, env: Env = {}, overrides: Overrides = {}): readonly Problem[] | 'accepted' {
  const r = parsePolicy(text, { env }, overrides);
  return r.ok ? 'accepted' : r.problems;
}

/** Every object reachable from value is frozen. Bounded: the walk stops after 10000 nodes. */
function assertDeepFrozen(t: Test, value: unknown, path = '$', budget = { n: 10000 }): void {
  if (value === null || typeof value !== 'object') return;
  if (--budget.n < 0) return void t.fail('config is unexpectedly large');
  t.ok(Object.isFrozen(value), `${path} is frozen`);
  for (const [k, v] of Object.entries(value)) assertDeepFrozen(t, v, `${path}.${k}`, budget);
}

// ---------------------------------------------------------------------------------------------
// Accepted files
// ---------------------------------------------------------------------------------------------

t.test('accepted: a minimal file gets every default', async (t) => {
  for (const text of ['{}', '', '# only a comment\n', 'version: 1', '---\n{}\n']) {
    t.strictSame(accept(t, text), DEFAULTS, JSON.stringify(text));
  }
});

t.test('accepted: the result is deep-frozen', async (t) => {
  const config = accept(t, `policies: { auth: { keys: [ { id: a, hash: "${H1}" } ], upstreamAuthorization: { fromEnv: UP } } }`, { UP: 'Bearer x' });
  if (config === undefined) return;
  assertDeepFrozen(t, config);
  t.throws(() => {
    (config.server as { port: number }).port = 1;
  }, TypeError);
  t.throws(() => {
    (config.policies.auth.keys as unknown[]).push({});
  }, TypeError);
  t.throws(() => {
    (config.policies.auth.keys[0] as { hash: string }).hash = H2;
  }, TypeError);
  t.equal(config.server.port, 8080);
  t.equal(config.policies.auth.keys.length, 1);
});

t.test('accepted: policies/default.yaml from disk', async (t) => {
  const file = join(ROOT, 'policies', 'default.yaml');
  t.strictSame(parsePolicy(readFileSync(file, 'utf8'), { env: {} }), { ok: true, config: DEFAULTS });
  t.strictSame(loadPolicyFile(file, { env: {} }), { ok: true, config: DEFAULTS });
  // With keys in the environment it stays valid.
  t.equal(loadPolicyFile(file, { env: { PETSTORE_API_KEYS: 'k1, k2' } }).ok, true);
});

t.test('accepted: policies/upstream.example.yaml from disk', async (t) => {
  const file = join(ROOT, 'policies', 'upstream.example.yaml');
  t.strictSame(loadPolicyFile(file, { env: {} }), {
    ok: true,
    config: withDefaults({
      upstream: { url: 'http://127.0.0.1:8081/v1' },
      auth: { keys: [] },
    }),
  });
  // It ships no usable key: serve's rule refuses it until keys are given.
  const refused = loadPolicyFile(file, { env: {} }, {}, { keys: 'required' });
  t.equal(refused.ok, false);
  if (!refused.ok) t.match(refused.problems, [{ path: '$.policies.auth', message: /^no API key is configured/ }]);
  t.equal(loadPolicyFile(file, { env: { PETSTORE_API_KEYS: 'psg_abc' } }, {}, { keys: 'required' }).ok, true, 'a key from PETSTORE_API_KEYS is enough');
});

t.test('accepted: JSON form', async (t) => {
  const text = JSON.stringify({
    version: 1,
    upstream: { url: 'https://pets.example/v1', timeouts: { connectMs: 1 }, connections: 65536 },
    server: { host: '0.0.0.0', port: 0 },
    policies: { auth: { keys: [{ id: 'ops', hash: H1 }], keysFromEnv: null, realm: 'pets' }, route: {}, 'new-pet': { maxBytes: 64, unknownFields: 'strip' } },
  });
  t.strictSame(
    accept(t, text),
    withDefaults({
      upstream: { url: 'https://pets.example/v1', timeouts: { connectMs: 1, headersMs: 10000, bodyMs: 10000, totalMs: 60000 }, connections: 65536 },
      server: { host: '0.0.0.0', port: 0 },
      auth: { keys: [{ id: 'ops', hash: H1 }], keysFromEnv: null, realm: 'pets' },
      newPet: { maxBytes: 64, unknownFields: 'strip' },
    }),
  );
});

t.test('accepted: boundary values', async (t) => {
  const cases: [string, ReturnType<typeof withDefaults>][] = [
    ['server: { port: 65535 }', withDefaults({ server: { port: 65535 } })],
    ['server: { tls: { certFile: a, keyFile: b } }', withDefaults({ server: { tls: { certFile: 'a', keyFile: 'b', minVersion: 'TLSv1.2', clientCaFile: null } } })],
    ['upstream: { timeouts: { connectMs: 600000, headersMs: 1, bodyMs: 600000 }, connections: 1 }', withDefaults({ upstream: { timeouts: { connectMs: 600000, headersMs: 1, bodyMs: 600000, totalMs: 60000 }, connections: 1 } })],
    ['upstream: { timeouts: { totalMs: 1 } }', withDefaults({ upstream: { timeouts: { connectMs: 2000, headersMs: 10000, bodyMs: 10000, totalMs: 1 } } })],
    ['upstream: { timeouts: { totalMs: 3600000 } }', withDefaults({ upstream: { timeouts: { connectMs: 2000, headersMs: 10000, bodyMs: 10000, totalMs: 3600000 } } })],
    ['policies: { new-pet: { maxBytes: 1048576, unknownFields: allow } }', withDefaults({ newPet: { maxBytes: 1048576, unknownFields: 'allow' } })],
    ['upstream: { url: "http://[::1]:8081/v1" }', withDefaults({ upstream: { url: 'http://[::1]:8081/v1' } })],
    [`policies: { auth: { keys: [ { id: "${'x'.repeat(64)}", hash: "${H1}" } ] } }`, withDefaults({ auth: { keys: [{ id: 'x'.repeat(64), hash: H1 }] } })],
    [`policies: { auth: { realm: "${'r'.repeat(64)}" } }`, withDefaults({ auth: { realm: 'r'.repeat(64) } })],
  ];
  for (const [text, expected] of cases) t.strictSame(accept(t, text), expected, text);
});

t.test('accepted: every upstreamAuthorization form', async (t) => {
  t.strictSame(accept(t, 'policies: { auth: { upstreamAuthorization: drop } }'), withDefaults({ auth: { upstreamAuthorization: 'drop' } }));
  t.strictSame(accept(t, 'policies: { auth: { upstreamAuthorization: forward } }'), withDefaults({ auth: { upstreamAuthorization: 'forward' } }));
  t.strictSame(
    accept(t, 'policies: { auth: { upstreamAuthorization: { fromEnv: UPSTREAM_AUTHORIZATION } } }', { UPSTREAM_AUTHORIZATION: 'Bearer upstream-secret' }),
    withDefaults({ auth: { upstreamAuthorization: { fromEnv: 'UPSTREAM_AUTHORIZATION' } } }),
  );
  // The default is drop.
  t.equal(accept(t, 'policies: { auth: {} }')?.policies.auth.upstreamAuthorization, 'drop');
});

t.test('accepted: keys in the environment that are b64tokens, or ignored when keysFromEnv is null', async (t) => {
  t.equal(problemsOf('{}', { PETSTORE_API_KEYS: ' psg_abc-DEF_123 , a.b~c+d/e==,,  ' }), 'accepted');
  t.equal(problemsOf('policies: { auth: { keysFromEnv: MY_KEYS } }', { MY_KEYS: 'k1,k2', PETSTORE_API_KEYS: 'not a token!' }), 'accepted');
  t.equal(problemsOf('policies: { auth: { keysFromEnv: null } }', { PETSTORE_API_KEYS: 'not a token!' }), 'accepted');
});

t.test('parsePolicy is pure: it reads the env it is given, not process.env', async (t) => {
  const saved = process.env.PETSTORE_API_KEYS;
  process.env.PETSTORE_API_KEYS = 'not a token!';
  t.teardown(() => {
    if (saved === undefined) delete process.env.PETSTORE_API_KEYS;
    else process.env.PETSTORE_API_KEYS = saved;
  });
  t.equal(problemsOf('{}', {}), 'accepted');
  t.equal(problemsOf('policies: { auth: { upstreamAuthorization: { fromEnv: PETSTORE_API_KEYS } } }', {}) === 'accepted', false);
});

// ---------------------------------------------------------------------------------------------
// Rejected files: every problem as an exact {path, message}
// ---------------------------------------------------------------------------------------------

const REJECTED: [name: string, text: string, problems: Problem[], env?: Env][] = [
  // not a mapping
  ['top level is a sequence', '- 1\n- 2', [{ path: '$', message: 'a policy file must be a mapping (an object)' }]],
  ['top level is an empty JSON array', '[]', [{ path: '$', message: 'a policy file must be a mapping (an object)' }]],
  ['top level is a number', '42', [{ path: '$', message: 'a policy file must be a mapping (an object)' }]],
  ['top level is a string', '"policies"', [{ path: '$', message: 'a policy file must be a mapping (an object)' }]],
  ['top level is a boolean', 'true', [{ path: '$', message: 'a policy file must be a mapping (an object)' }]],

  // unknown names
  ['unknown top-level key', 'version: 1\nfoo: 1', [{ path: '$.foo', message: "unknown property 'foo'" }]],
  ['unknown top-level key needing brackets', '"rate-limit": {}', [{ path: '$["rate-limit"]', message: "unknown property 'rate-limit'" }]],
  ['unknown policy name', 'policies: { ip-filter: {} }', [{ path: '$.policies["ip-filter"]', message: "unknown property 'ip-filter'" }]],
  ['unknown policy name (typo)', 'policies: { newPet: {} }', [{ path: '$.policies.newPet', message: "unknown property 'newPet'" }]],
  ['unknown option of route', 'policies: { route: { strict: true } }', [{ path: '$.policies.route.strict', message: "unknown property 'strict'" }]],
  ['unknown option of auth', 'policies: { auth: { key: [] } }', [{ path: '$.policies.auth.key', message: "unknown property 'key'" }]],
  ['unknown option of new-pet', 'policies: { new-pet: { maxbytes: 100 } }', [{ path: '$.policies["new-pet"].maxbytes', message: "unknown property 'maxbytes'" }]],
  ['unknown option of upstream', 'upstream: { uri: builtin }', [{ path: '$.upstream.uri', message: "unknown property 'uri'" }]],
  ['unknown timeout', 'upstream: { timeouts: { readMs: 5 } }', [{ path: '$.upstream.timeouts.readMs', message: "unknown property 'readMs'" }]],
  ['unknown option of server', 'server: { address: x }', [{ path: '$.server.address', message: "unknown property 'address'" }]],
  ['server.tls without keyFile', 'server: { tls: { certFile: /a.pem } }', [{ path: '$.server.tls', message: "missing required property 'keyFile'" }]],
  ['server.tls.minVersion below TLS 1.2', 'server: { tls: { certFile: a, keyFile: b, minVersion: TLSv1.1 } }', [{ path: '$.server.tls.minVersion', message: 'must be one of: TLSv1.2, TLSv1.3' }]],
  ['server.hsts with a negative max-age', 'server: { hsts: { maxAgeSeconds: -1 } }', [{ path: '$.server.hsts.maxAgeSeconds', message: 'must be >= 0' }]],
  ['upstream.tls cannot turn verification off', 'upstream: { tls: { verify: false } }', [{ path: '$.upstream.tls.verify', message: "unknown property 'verify'" }]],
  ['server.http2 is a boolean', 'server: { http2: yes }', [{ path: '$.server.http2', message: 'must be boolean' }]],

  // wrong types
  [
    'wrong types everywhere in upstream and server',
    'upstream: { url: 5, timeouts: { connectMs: "x" }, connections: 1.5 }\nserver: { host: 3, port: "8080" }',
    [
      { path: '$.upstream.url', message: 'must be string' },
      { path: '$.upstream.timeouts.connectMs', message: 'must be integer' },
      { path: '$.upstream.connections', message: 'must be integer' },
      { path: '$.server.host', message: 'must be string' },
      { path: '$.server.port', message: 'must be integer' },
    ],
  ],
  ['upstream is null', 'upstream: null', [{ path: '$.upstream', message: 'must be object' }]],
  ['server is a list', 'server: []', [{ path: '$.server', message: 'must be object' }]],
  ['timeouts is a number', 'upstream: { timeouts: 5 }', [{ path: '$.upstream.timeouts', message: 'must be object' }]],
  ['policies is null', 'policies: null', [{ path: '$.policies', message: 'must be object' }]],
  ['a policy is a string', 'policies: { auth: "on" }', [{ path: '$.policies.auth', message: 'must be object' }]],
  ['route is null', 'policies: { route: null }', [{ path: '$.policies.route', message: 'must be object' }]],
  ['keys is a mapping', 'policies: { auth: { keys: {} } }', [{ path: '$.policies.auth.keys', message: 'must be array' }]],
  ['a key is a string', `policies: { auth: { keys: [ "${H1}" ] } }`, [{ path: '$.policies.auth.keys[0]', message: 'must be object' }]],
  ['keysFromEnv is a number', 'policies: { auth: { keysFromEnv: 5 } }', [{ path: '$.policies.auth.keysFromEnv', message: 'must be string or null' }]],
  ['realm is a number', 'policies: { auth: { realm: 5 } }', [{ path: '$.policies.auth.realm', message: 'must be string' }]],
  ['maxBytes is a string', 'policies: { new-pet: { maxBytes: "16k" } }', [{ path: '$.policies["new-pet"].maxBytes', message: 'must be integer' }]],
  ['maxBytes is fractional', 'policies: { new-pet: { maxBytes: 100.5 } }', [{ path: '$.policies["new-pet"].maxBytes', message: 'must be integer' }]],
  ['key id is a number', `policies: { auth: { keys: [ { id: 7, hash: "${H1}" } ] } }`, [{ path: '$.policies.auth.keys[0].id', message: 'must be string' }]],

  // bad hash format
  ['hash in upper case', `policies: { auth: { keys: [ { id: a, hash: "sha256:${'A'.repeat(64)}" } ] } }`, [{ path: '$.policies.auth.keys[0].hash', message: HASH_FORMAT }]],
  ['hash too short', 'policies: { auth: { keys: [ { id: a, hash: "sha256:abc" } ] } }', [{ path: '$.policies.auth.keys[0].hash', message: HASH_FORMAT }]],
  ['hash too long', `policies: { auth: { keys: [ { id: a, hash: "${H1}0" } ] } }`, [{ path: '$.policies.auth.keys[0].hash', message: HASH_FORMAT }]],
  ['hash without prefix', `policies: { auth: { keys: [ { id: a, hash: "${'a'.repeat(64)}" } ] } }`, [{ path: '$.policies.auth.keys[0].hash', message: HASH_FORMAT }]],
  ['hash of another algorithm', `policies: { auth: { keys: [ { id: a, hash: "sha512:${'a'.repeat(64)}" } ] } }`, [{ path: '$.policies.auth.keys[0].hash', message: HASH_FORMAT }]],
  ['a plaintext key instead of a hash', 'policies: { auth: { keys: [ { id: a, hash: "psg_secret" } ] } }', [{ path: '$.policies.auth.keys[0].hash', message: HASH_FORMAT }]],

  // keys: required fields and lengths
  ['missing id', `policies: { auth: { keys: [ { hash: "${H1}" } ] } }`, [{ path: '$.policies.auth.keys[0]', message: "missing required property 'id'" }]],
  ['missing hash', 'policies: { auth: { keys: [ { id: a } ] } }', [{ path: '$.policies.auth.keys[0]', message: "missing required property 'hash'" }]],
  ['empty id', `policies: { auth: { keys: [ { id: "", hash: "${H1}" } ] } }`, [{ path: '$.policies.auth.keys[0].id', message: 'must not be empty' }]],
  ['id too long', `policies: { auth: { keys: [ { id: "${'x'.repeat(65)}", hash: "${H1}" } ] } }`, [{ path: '$.policies.auth.keys[0].id', message: 'must be at most 64 characters' }]],
  ['unknown field in a key', `policies: { auth: { keys: [ { id: a, hash: "${H1}", key: plain } ] } }`, [{ path: '$.policies.auth.keys[0].key', message: "unknown property 'key'" }]],
  ['problem in the second key', `policies: { auth: { keys: [ { id: a, hash: "${H1}" }, { id: b } ] } }`, [{ path: '$.policies.auth.keys[1]', message: "missing required property 'hash'" }]],

  // bad url
  ['url of another scheme', 'upstream: { url: "ftp://pets.example/v1" }', [{ path: '$.upstream.url', message: URL_FORMAT }]],
  ['url without scheme', 'upstream: { url: "127.0.0.1:8081/v1" }', [{ path: '$.upstream.url', message: URL_FORMAT }]],
  ['url with a query', 'upstream: { url: "http://pets.example/v1?x=1" }', [{ path: '$.upstream.url', message: URL_FORMAT }]],
  ['url with a fragment', 'upstream: { url: "http://pets.example/v1#x" }', [{ path: '$.upstream.url', message: URL_FORMAT }]],
  ['url with a space', 'upstream: { url: "http://pets example/v1" }', [{ path: '$.upstream.url', message: URL_FORMAT }]],
  ['url with nothing after the scheme', 'upstream: { url: "http://" }', [{ path: '$.upstream.url', message: URL_FORMAT }]],
  ['url empty', 'upstream: { url: "" }', [{ path: '$.upstream.url', message: URL_FORMAT }]],
  ['url Builtin (case)', 'upstream: { url: Builtin }', [{ path: '$.upstream.url', message: URL_FORMAT }]],

  // out of range
  [
    'out of range: lower bounds',
    'upstream: { timeouts: { connectMs: 0, headersMs: 0, bodyMs: -1, totalMs: 0 }, connections: 0 }\nserver: { port: -1 }\npolicies: { new-pet: { maxBytes: 63 } }',
    [
      { path: '$.upstream.timeouts.connectMs', message: 'must be >= 1' },
      { path: '$.upstream.timeouts.headersMs', message: 'must be >= 1' },
      { path: '$.upstream.timeouts.bodyMs', message: 'must be >= 1' },
      { path: '$.upstream.timeouts.totalMs', message: 'must be >= 1' },
      { path: '$.upstream.connections', message: 'must be >= 1' },
      { path: '$.server.port', message: 'must be >= 0' },
      { path: '$.policies["new-pet"].maxBytes', message: 'must be >= 64' },
    ],
  ],
  [
    'out of range: upper bounds',
    'upstream: { timeouts: { connectMs: 600001, headersMs: 600001, bodyMs: 600001, totalMs: 3600001 }, connections: 65537 }\nserver: { port: 65536 }\npolicies: { new-pet: { maxBytes: 1048577 } }',
    [
      { path: '$.upstream.timeouts.connectMs', message: 'must be <= 600000' },
      { path: '$.upstream.timeouts.headersMs', message: 'must be <= 600000' },
      { path: '$.upstream.timeouts.bodyMs', message: 'must be <= 600000' },
      { path: '$.upstream.timeouts.totalMs', message: 'must be <= 3600000' },
      { path: '$.upstream.connections', message: 'must be <= 65536' },
      { path: '$.server.port', message: 'must be <= 65535' },
      { path: '$.policies["new-pet"].maxBytes', message: 'must be <= 1048576' },
    ],
  ],
  ['empty host', 'server: { host: "" }', [{ path: '$.server.host', message: 'must not be empty' }]],

  // enums and formats of names
  ['bad unknownFields', 'policies: { new-pet: { unknownFields: drop } }', [{ path: '$.policies["new-pet"].unknownFields', message: 'must be one of: reject, strip, allow' }]],
  ['unknownFields in upper case', 'policies: { new-pet: { unknownFields: REJECT } }', [{ path: '$.policies["new-pet"].unknownFields', message: 'must be one of: reject, strip, allow' }]],
  ['keysFromEnv not a variable name', 'policies: { auth: { keysFromEnv: "1KEYS" } }', [{ path: '$.policies.auth.keysFromEnv', message: KEYS_FROM_ENV_FORMAT }]],
  ['keysFromEnv with a dash', 'policies: { auth: { keysFromEnv: "API-KEYS" } }', [{ path: '$.policies.auth.keysFromEnv', message: KEYS_FROM_ENV_FORMAT }]],
  ['realm with a double quote', 'policies: { auth: { realm: "a\\"b" } }', [{ path: '$.policies.auth.realm', message: REALM_FORMAT }]],
  ['realm with a backslash', 'policies: { auth: { realm: "a\\\\b" } }', [{ path: '$.policies.auth.realm', message: REALM_FORMAT }]],
  ['realm empty', 'policies: { auth: { realm: "" } }', [{ path: '$.policies.auth.realm', message: REALM_FORMAT }]],
  ['realm too long', `policies: { auth: { realm: "${'r'.repeat(65)}" } }`, [{ path: '$.policies.auth.realm', message: REALM_FORMAT }]],

  // oneOf upstreamAuthorization
  ['upstreamAuthorization unknown word', 'policies: { auth: { upstreamAuthorization: keep } }', [{ path: '$.policies.auth.upstreamAuthorization', message: UPSTREAM_AUTHORIZATION_FORMS }]],
  ['upstreamAuthorization a number', 'policies: { auth: { upstreamAuthorization: 1 } }', [{ path: '$.policies.auth.upstreamAuthorization', message: UPSTREAM_AUTHORIZATION_FORMS }]],
  ['upstreamAuthorization null', 'policies: { auth: { upstreamAuthorization: null } }', [{ path: '$.policies.auth.upstreamAuthorization', message: UPSTREAM_AUTHORIZATION_FORMS }]],
  ['upstreamAuthorization fromEnv not a name', 'policies: { auth: { upstreamAuthorization: { fromEnv: "1X" } } }', [{ path: '$.policies.auth.upstreamAuthorization', message: UPSTREAM_AUTHORIZATION_FORMS }]],
  ['upstreamAuthorization wrong field', 'policies: { auth: { upstreamAuthorization: { env: X } } }', [{ path: '$.policies.auth.upstreamAuthorization', message: UPSTREAM_AUTHORIZATION_FORMS }]],
  ['upstreamAuthorization extra field', 'policies: { auth: { upstreamAuthorization: { fromEnv: X, value: y } } }', [{ path: '$.policies.auth.upstreamAuthorization', message: UPSTREAM_AUTHORIZATION_FORMS }]],
  ['upstreamAuthorization empty mapping', 'policies: { auth: { upstreamAuthorization: {} } }', [{ path: '$.policies.auth.upstreamAuthorization', message: UPSTREAM_AUTHORIZATION_FORMS }]],

  // version
  ['version 2', 'version: 2', [{ path: '$.version', message: 'must be 1' }]],
  ['version "1" (a string)', 'version: "1"', [{ path: '$.version', message: 'must be 1' }]],
  ['version null', 'version: null', [{ path: '$.version', message: 'must be 1' }]],

  // cross-field checks (auth.check)
  ['duplicate key ids', `policies: { auth: { keys: [ { id: a, hash: "${H1}" }, { id: a, hash: "${H2}" } ] } }`, [{ path: '$.policies.auth.keys[1].id', message: "duplicate key id 'a'" }]],
  ['duplicate key hashes', `policies: { auth: { keys: [ { id: a, hash: "${H1}" }, { id: b, hash: "${H1}" } ] } }`, [{ path: '$.policies.auth.keys[1].hash', message: 'duplicate key hash' }]],
  [
    'duplicate id and hash',
    `policies: { auth: { keys: [ { id: a, hash: "${H1}" }, { id: a, hash: "${H1}" } ] } }`,
    [
      { path: '$.policies.auth.keys[1].id', message: "duplicate key id 'a'" },
      { path: '$.policies.auth.keys[1].hash', message: 'duplicate key hash' },
    ],
  ],
  [
    'duplicates further down the list',
    `policies: { auth: { keys: [ { id: a, hash: "${H1}" }, { id: b, hash: "${H2}" }, { id: c, hash: "${H3}" }, { id: b, hash: "${H1}" } ] } }`,
    [
      { path: '$.policies.auth.keys[3].id', message: "duplicate key id 'b'" },
      { path: '$.policies.auth.keys[3].hash', message: 'duplicate key hash' },
    ],
  ],
  [
    'a key in the environment that is not a b64token',
    '{}',
    [{ path: '$.policies.auth.keysFromEnv', message: 'key #2 of PETSTORE_API_KEYS is not a valid bearer token (RFC 6750 b64token)' }],
    { PETSTORE_API_KEYS: 'good, bad key!, ok' },
  ],
  [
    'several bad keys in a renamed variable',
    'policies: { auth: { keysFromEnv: MY_KEYS } }',
    [
      { path: '$.policies.auth.keysFromEnv', message: 'key #1 of MY_KEYS is not a valid bearer token (RFC 6750 b64token)' },
      { path: '$.policies.auth.keysFromEnv', message: 'key #3 of MY_KEYS is not a valid bearer token (RFC 6750 b64token)' },
    ],
    { MY_KEYS: 'a"b,ok,=x' },
  ],
  [
    'upstreamAuthorization fromEnv variable not set',
    'policies: { auth: { upstreamAuthorization: { fromEnv: UPSTREAM_AUTHORIZATION } } }',
    [{ path: '$.policies.auth.upstreamAuthorization.fromEnv', message: 'environment variable UPSTREAM_AUTHORIZATION is not set or empty' }],
    { OTHER: 'x' },
  ],
  [
    'requestTimeoutMs shorter than headersTimeoutMs (node:http refuses it at start)',
    'server: { requestTimeoutMs: 5000 }',
    [{ path: '$.server.requestTimeoutMs', message: 'must be at least server.headersTimeoutMs (10000): the whole request cannot have less time than its headers' }],
  ],
];

t.test('rejected files: exact problems', async (t) => {
  for (const [name, text, problems, env] of REJECTED) {
    t.strictSame(problemsOf(text, env ?? {}), problems, name);
  }
});

t.test('rejected files: the same problems in JSON form', async (t) => {
  t.strictSame(problemsOf('{"version":2,"policies":{"new-pet":{"maxBytes":"big"}}}'), [
    { path: '$.version', message: 'must be 1' },
    { path: '$.policies["new-pet"].maxBytes', message: 'must be integer' },
  ]);
  t.strictSame(problemsOf('[{"version":1}]'), [{ path: '$', message: 'a policy file must be a mapping (an object)' }]);
});

t.test('a key from the environment is never echoed in a problem', async (t) => {
  const secret = 'psg_s3cr3t value!';
  const r = problemsOf('{}', { PETSTORE_API_KEYS: `psg_ok,${secret}` });
  t.strictSame(r, [{ path: '$.policies.auth.keysFromEnv', message: 'key #2 of PETSTORE_API_KEYS is not a valid bearer token (RFC 6750 b64token)' }]);
  const text = JSON.stringify(r);
  t.notOk(text.includes('s3cr3t'), 'no part of the key in the problems');
  t.notOk(text.includes('psg_ok'), 'not even the valid key');
});

t.test('YAML syntax errors and duplicate keys: one problem at $, with the position', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['unclosed flow sequence', 'a: [1, 2', /^not valid YAML or JSON at line 1, column 9: /],
    ['duplicate keys (YAML)', 'version: 1\nversion: 1', /^not valid YAML or JSON at line 2, column 1: Map keys must be unique/],
    ['duplicate keys (JSON)', '{"version":1,"version":1}', /^not valid YAML or JSON at line 1, column 14: Map keys must be unique/],
    ['duplicate policy names', 'policies:\n  auth: {}\n  auth: {}', /^not valid YAML or JSON at line 3, column 3: Map keys must be unique/],
    ['tab indentation', 'server:\n\tport: 1', /^not valid YAML or JSON at line 2, column 1: /],
    ['several documents', 'version: 1\n---\nversion: 1', /^not valid YAML or JSON at line 2, column 1: /],
    ['broken JSON', '{"version": 1,', /^not valid YAML or JSON at line 1, column \d+: /],
  ];
  for (const [name, text, message] of cases) {
    const r = problemsOf(text);
    if (r === 'accepted') {
      t.fail(`${name}: accepted`);
      continue;
    }
    t.ok(r.length >= 1, `${name}: at least one problem`);
    for (const p of r) {
      t.equal(p.path, '$', `${name}: path`);
      t.match(p.message, message, `${name}: message`);
    }
  }
});

t.test(
  'YAML errors name the position once, without a trailing colon',
  async (t) => {
    t.strictSame(problemsOf('version: 1\nversion: 1'), [{ path: '$', message: 'not valid YAML or JSON at line 2, column 1: Map keys must be unique' }]);
    t.strictSame(problemsOf('{"version":1,"version":1}'), [{ path: '$', message: 'not valid YAML or JSON at line 1, column 14: Map keys must be unique' }]);
  },
);

t.test('a file with several problems reports all of them at once, in document order', async (t) => {
  const text = [
    'version: 2',
    'colour: blue',
    'upstream: { url: "ftp://x", connections: 0 }',
    'server: { port: "abc" }',
    'policies:',
    '  ip-filter: {}',
    `  auth: { keys: [ { id: "", hash: "sha256:XYZ" }, { hash: "${H1}" } ], upstreamAuthorization: keep }`,
    '  new-pet: { unknownFields: drop, maxBytes: 1 }',
  ].join('\n');
  t.strictSame(problemsOf(text), [
    { path: '$.colour', message: "unknown property 'colour'" },
    { path: '$.version', message: 'must be 1' },
    { path: '$.upstream.url', message: URL_FORMAT },
    { path: '$.upstream.connections', message: 'must be >= 1' },
    { path: '$.server.port', message: 'must be integer' },
    { path: '$.policies["ip-filter"]', message: "unknown property 'ip-filter'" },
    { path: '$.policies.auth.keys[0].id', message: 'must not be empty' },
    { path: '$.policies.auth.keys[0].hash', message: HASH_FORMAT },
    { path: '$.policies.auth.keys[1]', message: "missing required property 'id'" },
    { path: '$.policies.auth.upstreamAuthorization', message: UPSTREAM_AUTHORIZATION_FORMS },
    { path: '$.policies["new-pet"].maxBytes', message: 'must be >= 64' },
    { path: '$.policies["new-pet"].unknownFields', message: 'must be one of: reject, strip, allow' },
  ]);
});

t.test('cross-field problems are reported together with the schema problems', async (t) => {
  const text = `colour: blue\npolicies: { auth: { keys: [ { id: a, hash: "${H1}" }, { id: a, hash: "${H2}" } ] } }`;
  t.strictSame(problemsOf(text), [
    { path: '$.colour', message: "unknown property 'colour'" },
    { path: '$.policies.auth.keys[1].id', message: "duplicate key id 'a'" },
  ]);
});

// ---------------------------------------------------------------------------------------------
// Overrides (the command line's --upstream, --host, --port)
// ---------------------------------------------------------------------------------------------

t.test('overrides: validated with the file', async (t) => {
  const cases: [string, Overrides, Problem[]][] = [
    ['port abc', { port: 'abc' }, [{ path: '$.server.port', message: 'must be integer' }]],
    ['port 65536', { port: 65536 }, [{ path: '$.server.port', message: 'must be <= 65535' }]],
    ['port -1', { port: -1 }, [{ path: '$.server.port', message: 'must be >= 0' }]],
    ['port 1.5', { port: 1.5 }, [{ path: '$.server.port', message: 'must be integer' }]],
    ['empty host', { host: '' }, [{ path: '$.server.host', message: 'must not be empty' }]],
    ['bad upstream', { upstreamUrl: 'pets.example' }, [{ path: '$.upstream.url', message: URL_FORMAT }]],
    [
      'all three bad',
      { upstreamUrl: 'ftp://x', host: '', port: 'x' },
      [
        { path: '$.upstream.url', message: URL_FORMAT },
        { path: '$.server.host', message: 'must not be empty' },
        { path: '$.server.port', message: 'must be integer' },
      ],
    ],
  ];
  for (const [name, overrides, problems] of cases) t.strictSame(problemsOf('{}', {}, overrides), problems, name);
  // Problems of the file and of the overrides come together.
  t.strictSame(problemsOf('version: 2', {}, { port: 'abc' }), [
    { path: '$.version', message: 'must be 1' },
    { path: '$.server.port', message: 'must be integer' },
  ]);
});

t.test('overrides: set over the file, the rest of the file kept', async (t) => {
  const file = 'upstream: { url: "http://a.example/v1", connections: 7 }\nserver: { host: 0.0.0.0, port: 8080 }';
  t.strictSame(
    accept(t, file, {}, { upstreamUrl: 'builtin', host: '::1', port: 0 }),
    withDefaults({ upstream: { url: 'builtin', connections: 7 }, server: { host: '::1', port: 0 } }),
  );
  t.strictSame(accept(t, '{}', {}, { port: 9090 }), withDefaults({ server: { port: 9090 } }));
  t.strictSame(accept(t, '{}', {}, { upstreamUrl: 'http://127.0.0.1:8081/v1' }), withDefaults({ upstream: { url: 'http://127.0.0.1:8081/v1' } }));
  // undefined overrides change nothing
  t.strictSame(accept(t, 'server: { port: 1 }', {}, { port: undefined, host: undefined, upstreamUrl: undefined }), withDefaults({ server: { port: 1 } }));
});

t.test(
  'overrides do not hide a section of the file that is not a mapping',
  async (t) => {
    t.strictSame(problemsOf('server: 5', {}, { port: 1 }), [{ path: '$.server', message: 'must be object' }]);
    t.strictSame(problemsOf('upstream: [1]', {}, { upstreamUrl: 'builtin' }), [{ path: '$.upstream', message: 'must be object' }]);
  },
);

// ---------------------------------------------------------------------------------------------
// toJsonPath, formatProblems, loadPolicyFile
// ---------------------------------------------------------------------------------------------

t.test('toJsonPath', async (t) => {
  const cases: [string, string][] = [
    ['', '$'],
    ['/version', '$.version'],
    ['/policies/auth/keys/0/hash', '$.policies.auth.keys[0].hash'],
    ['/policies/new-pet/maxBytes', '$.policies["new-pet"].maxBytes'],
    ['/0', '$[0]'],
    ['/12/a', '$[12].a'],
    ['/a~1b', '$["a/b"]'],
    ['/c~0d', '$["c~d"]'],
    ['/~01', '$["~1"]'],
    ['/1a', '$["1a"]'],
    ['/_x$', '$._x$'],
    ['/a b', '$["a b"]'],
    ['/say "hi"', '$["say \\"hi\\""]'],
    ['/x/', '$.x[""]'],
  ];
  for (const [pointer, path] of cases) t.equal(toJsonPath(pointer), path, JSON.stringify(pointer));
});

t.test('formatProblems: one line per problem, FILE: PATH: MESSAGE', async (t) => {
  t.equal(
    formatProblems('policies/p.yaml', [
      { path: '$.server.port', message: 'must be integer' },
      { path: '$', message: 'a policy file must be a mapping (an object)' },
    ]),
    'policies/p.yaml: $.server.port: must be integer\npolicies/p.yaml: $: a policy file must be a mapping (an object)',
  );
  t.equal(formatProblems('x.json', []), '');
});

t.test('loadPolicyFile: a file that cannot be read', async (t) => {
  const missing = join(tmpdir(), `petstore-gateway-no-such-file-${process.pid}-${Date.now()}.yaml`);
  t.strictSame(loadPolicyFile(missing, { env: {} }), { ok: false, problems: [{ path: '$', message: 'cannot read the file (ENOENT)' }] });
  t.strictSame(loadPolicyFile(join(ROOT, 'policies'), { env: {} }), { ok: false, problems: [{ path: '$', message: 'cannot read the file (EISDIR)' }] });
});

t.test('loadPolicyFile applies overrides and env like parsePolicy', async (t) => {
  const file = join(ROOT, 'policies', 'default.yaml');
  t.strictSame(loadPolicyFile(file, { env: {} }, { port: 'abc' }), { ok: false, problems: [{ path: '$.server.port', message: 'must be integer' }] });
  t.strictSame(loadPolicyFile(file, { env: { PETSTORE_API_KEYS: 'a b' } }), {
    ok: false,
    problems: [{ path: '$.policies.auth.keysFromEnv', message: 'key #1 of PETSTORE_API_KEYS is not a valid bearer token (RFC 6750 b64token)' }],
  });
});

t.test('a .json policy file is strict JSON: trailing commas and comments refused; the same text as .yaml is YAML', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-gateway-json-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const lax = '{ "version": 1, "server": { "port": 8080, }, }\n';
  writeFileSync(join(dir, 'p.json'), lax);
  writeFileSync(join(dir, 'p.yaml'), lax);
  const json = loadPolicyFile(join(dir, 'p.json'), { env: {} });
  t.notOk(json.ok, 'refused as JSON');
  if (!json.ok) t.match(json.problems, [{ path: '$', message: /^not valid JSON \(a \.json file is read as strict JSON: no comments or trailing commas\): / }]);
  t.ok(loadPolicyFile(join(dir, 'p.yaml'), { env: {} }).ok, 'YAML (a superset of JSON) reads it');
  writeFileSync(join(dir, 'strict.JSON'), '{ "version": 1, "server": { "port": 8080 } }');
  t.ok(loadPolicyFile(join(dir, 'strict.JSON'), { env: {} }).ok, 'strict JSON passes, whatever the case of the extension');
});

// ---------------------------------------------------------------------------------------------
// The shipped JSON Schema never drifts from the code
// ---------------------------------------------------------------------------------------------

t.test('schema/policy.schema.json is the output of policyFileSchema()', async (t) => {
  const shipped = readFileSync(join(ROOT, 'schema', 'policy.schema.json'), 'utf8');
  t.equal(shipped, JSON.stringify(policyFileSchema(), null, 2) + '\n', 'schema/policy.schema.json is out of date: regenerate it with `npm run schema`');
});

t.test('policyFileSchema lists every policy module with a default', async (t) => {
  const s = policyFileSchema() as { properties: { policies: { properties: Record<string, { default?: unknown }> } } };
  t.strictSame(Object.keys(s.properties.policies.properties), ['cors', 'auth', 'rate-limit', 'route', 'deprecation', 'list-pets', 'new-pet', 'upstream-errors', 'response-contract', 'cache']);
  t.strictSame(Object.keys(s.properties.policies.properties), POLICY_MODULES.map((m) => m.name), 'in the order of the chain');
  for (const [name, p] of Object.entries(s.properties.policies.properties)) t.strictSame(p.default, {}, name);
  // Each call returns a fresh object: the loader's defaults cannot leak between files.
  t.not(policyFileSchema(), policyFileSchema());
});

t.test('server.admin: on by default at 127.0.0.1:9464, null turns it off, the flags override (and turn it on)', async (t) => {
  const env = { env: {} };
  const off = parsePolicy('version: 1\nserver: { admin: null }\n', env);
  t.ok(off.ok && off.config.server.admin === null, 'admin: null is no listener');
  const flags = parsePolicy('version: 1\nserver: { admin: null }\n', env, { adminHost: '0.0.0.0', adminPort: 0 });
  t.ok(flags.ok);
  if (flags.ok) t.strictSame(flags.config.server.admin, { host: '0.0.0.0', port: 0, tokensFromEnv: 'PETSTORE_ADMIN_TOKENS', readiness: { upstream: false }, console: true }, 'the flags win over the file');
  const portOnly = parsePolicy('version: 1\n', env, { adminPort: 19464 });
  if (portOnly.ok) t.strictSame(portOnly.config.server.admin, { host: '127.0.0.1', port: 19464, tokensFromEnv: 'PETSTORE_ADMIN_TOKENS', readiness: { upstream: false }, console: true }, 'the host keeps its default');
  const bad = parsePolicy('version: 1\nserver: { admin: { port: 70000 } }\n', env);
  t.notOk(bad.ok, 'a port out of range is refused');
  if (!bad.ok) t.match(bad.problems.map((p) => p.path).join(' '), /\$\.server\.admin\.port/);
  const log = parsePolicy('version: 1\nlog: { access: false }\n', env);
  t.ok(log.ok && log.config.log.access === false && log.config.log.level === 'info', 'log.access: false, level default info');
});

// A credential in upstream.url would be printed in logs and banners.
t.test('upstream.url with user:password@ is refused, and the message never echoes it', async (t) => {
  for (const url of ['http://user:s3cret-pw@127.0.0.1:8081/v1', 'https://s3cret-pw@up.example/v1', 'http://u:s3cret-pw@h']) {
    const r = parsePolicy(`upstream:\n  url: "${url}"\n`, { env: {} });
    t.notOk(r.ok, url);
    if (!r.ok) {
      t.strictSame(r.problems.map((p) => p.path), ['$.upstream.url'], url);
      t.notMatch(JSON.stringify(r.problems), /s3cret/, 'the password is not in the problem');
    }
  }
  for (const url of ['http://127.0.0.1:8081/v1', 'https://up.example/v1/@team', 'http://[::1]:8081/v1']) {
    t.ok(parsePolicy(`upstream:\n  url: "${url}"\n`, { env: {} }).ok, url);
  }
});
