/**
 * The rate-limit policy: decisions and headers through the chain after auth (memory store, fake
 * clock), the schema's option names, and what a failing store does (open: this process's own
 * counters decide, with a throttled warning; closed: 503).
 */
import t from 'tap';
import { Chain } from '../helpers/chain.js';
import type { GatewayError } from '../../src/core/errors.js';
import type { Exchange, PolicyEnv } from '../../src/core/policy.js';
import { parsePolicy } from '../../src/config/load.js';
import { auth, hashKey, type AuthConfig } from '../../src/policies/auth/index.js';
import { perKeyNotes, perWorkerNotice, rateLimit, type RateLimitConfig } from '../../src/policies/rate-limit/index.js';
import { MemoryRateLimitStore } from '../../src/stores/memory.js';
import type { RateDecision, RateLimitStore, StoreConfig } from '../../src/stores/types.js';
import { keyed } from '../helpers/exchange.js';
import { fakeLog } from '../helpers/log.js';

const T0 = Date.parse('2027-03-01T12:00:00Z');
const KEYS = { ops: 'psg_ops-key-0123456789', app: 'psg_app-key-0123456789', free: 'psg_free-key-012345678' };

const AUTH: AuthConfig = {
  keys: Object.entries(KEYS).map(([id, key]) => ({ id, hash: hashKey(key) })),
  keysFromEnv: null,
  realm: 'petstore',
  upstreamAuthorization: 'drop',
  bruteForce: null,
  registry: null,
};

function config(patch: Partial<RateLimitConfig> = {}): RateLimitConfig {
  return { limit: 3, windowSeconds: 60, perKey: {}, store: 'memory', onStoreError: 'open', ...patch };
}

function setup(cfg: RateLimitConfig, store?: RateLimitStore) {
  let now = T0;
  const log = fakeLog();
  const memory = new MemoryRateLimitStore({ now: () => now, max: 1000 });
  const opened: StoreConfig[] = [];
  const env: PolicyEnv = {
    env: {},
    now: () => now,
    log,
    openStore: (c) => {
      opened.push(c);
      return store ?? memory;
    },
  };
  const chain = new Chain([auth.create(AUTH, env), rateLimit.create(cfg, env)]);
  // The exchange's way: open, then decide (a promise only when a policy must wait).
  const call = (key: string | undefined, target = '/v1/pets') => {
    const ex = chain.open({ method: 'GET', target, headers: key === undefined ? {} : { authorization: `Bearer ${key}` }, remoteAddress: '192.0.2.1' });
    return { ex, error: chain.decide(ex) as GatewayError | undefined };
  };
  return { call, log, opened, advance: (ms: number) => void (now += ms), memory };
}

const summary = (r: { ex: Exchange; error: { code: string; status: number; headers: Readonly<Record<string, string>> } | undefined }) => ({
  status: r.error?.status ?? 200,
  code: r.error?.code,
  retryAfter: r.error?.headers['retry-after'],
  policy: r.ex.responseHeaders['ratelimit-policy'],
  ratelimit: r.ex.responseHeaders.ratelimit,
});

t.test('limit 3 per 60 s: three pass with falling remaining, the fourth is 429 rate_limited with Retry-After', async (t) => {
  const { call, advance } = setup(config());
  const rows = [call(KEYS.app), call(KEYS.app), call(KEYS.app), call(KEYS.app)].map(summary);
  const policy = '"default";q=3;w=60';
  t.strictSame(rows, [
    { status: 200, code: undefined, retryAfter: undefined, policy, ratelimit: '"default";r=2;t=20' },
    { status: 200, code: undefined, retryAfter: undefined, policy, ratelimit: '"default";r=1;t=40' },
    { status: 200, code: undefined, retryAfter: undefined, policy, ratelimit: '"default";r=0;t=60' },
    { status: 429, code: 'rate_limited', retryAfter: '20', policy, ratelimit: '"default";r=0;t=20' },
  ]);
  // Rounded up: 0.5 s later the wait is 19.5 s, announced as 20.
  advance(500);
  t.equal(summary(call(KEYS.app)).retryAfter, '20');
  advance(19_500);
  t.equal(summary(call(KEYS.app)).status, 200, 'allowed again once Retry-After has passed');
});

t.test('counted per key id, across operations and paths; other keys keep their own allowance', async (t) => {
  const { call } = setup(config());
  call(KEYS.app, '/v1/pets');
  call(KEYS.app, '/v1/pets/1');
  call(KEYS.app, '/nowhere');
  t.equal(summary(call(KEYS.app, '/v1/pets/2')).status, 429);
  t.equal(summary(call(KEYS.ops)).status, 200);
});

t.test('a bad or missing key is 401 from auth and never counted against anyone', async (t) => {
  const { call, memory } = setup(config());
  for (let i = 0; i < 10; i++) {
    const r = summary(call('psg_wrong-key'));
    t.equal(r.code, 'invalid_api_key');
    t.equal(r.policy, undefined, 'no RateLimit headers for an unauthenticated client');
    t.equal(summary(call(undefined)).code, 'missing_api_key');
  }
  t.equal(memory.size, 0, 'nothing stored');
  t.equal(summary(call(KEYS.app)).ratelimit, '"default";r=2;t=20');
});

t.test('perKey replaces the limit of one key; without `limit` only perKey keys are limited', async (t) => {
  const { call } = setup(config({ perKey: { ops: { limit: 10, windowSeconds: 10 } } }));
  t.equal(summary(call(KEYS.ops)).policy, '"default";q=10;w=10');
  t.equal(summary(call(KEYS.app)).policy, '"default";q=3;w=60');
  const only = setup(config({ limit: undefined, perKey: { ops: { limit: 1 } } }));
  t.strictSame(summary(only.call(KEYS.ops)).policy, '"default";q=1;w=60', 'perKey without windowSeconds takes the top-level one');
  t.equal(summary(only.call(KEYS.ops)).status, 429);
  for (let i = 0; i < 10; i++) t.equal(summary(only.call(KEYS.app)).policy, undefined, 'app is not limited');
});

t.test('no limit and no perKey: the policy does nothing and opens no store (today\'s behaviour)', async (t) => {
  const s = setup(config({ limit: undefined }));
  t.equal(s.opened.length, 0);
  for (let i = 0; i < 10; i++) t.equal(summary(s.call(KEYS.app)).status, 200);
  t.equal(rateLimit.create(config({ limit: undefined }), { env: {} }).onRequest, undefined);
});

t.test('the memory store path is synchronous: onRequest returns the decision, not a promise', async (t) => {
  let now = T0;
  const store = new MemoryRateLimitStore({ now: () => now, max: 10 });
  const policy = rateLimit.create(config({ limit: 1 }), { env: {}, openStore: () => store });
  const ex = keyed('app');
  t.equal(policy.onRequest!(ex), undefined);
  const denied = policy.onRequest!(ex);
  t.notOk(denied instanceof Promise);
  t.equal((denied as { code: string }).code, 'rate_limited');
  now += 60_000;
});

/** A store that fails the way Redis does while it is away: a rejected promise (or a throw). */
function failingStore(how: 'reject' | 'throw'): RateLimitStore {
  return {
    kind: 'redis',
    healthy: false,
    take(): Promise<RateDecision> {
      if (how === 'throw') throw new Error('store exploded');
      return Promise.reject(new Error('The client is offline'));
    },
    close: () => Promise.resolve(),
  };
}

t.test('onStoreError: open keeps limiting with local counters, warns once per 10 s with a count', async (t) => {
  for (const how of ['reject', 'throw'] as const) {
    const { call, log, advance } = setup(config({ onStoreError: 'open' }), failingStore(how));
    const policy = rateLimit.create(config(), { env: {}, log, now: () => T0, openStore: () => failingStore(how) });
    const ex = keyed('app');
    const d = policy.onRequest!(ex);
    t.equal(how === 'reject' ? d instanceof Promise : d === undefined, true, `${how}: a promise only for the async store`);
    t.equal(await d, undefined, `${how}: served`);
    t.equal(ex.responseHeaders['ratelimit-policy'], '"default";q=3;w=60');
    t.equal(ex.responseHeaders.ratelimit, '"default";r=2;t=20', "the local counters' remaining count");
    log.lines.length = 0;
    const codes: Array<string | undefined> = [];
    for (let i = 0; i < 100; i++) {
      const r = call(KEYS.app);
      // A promise while the store fails asynchronously: await it.
      codes.push(((await (r.error as unknown as Promise<GatewayError | undefined> | undefined)) ?? undefined)?.code);
    }
    t.equal(codes.filter((c) => c === undefined).length, 3, `${how}: the limit (3) still holds while the store fails`);
    t.equal(codes.filter((c) => c === 'rate_limited').length, 97, `${how}: the rest are 429 rate_limited, never unlimited`);
    t.equal(log.lines.length, 1, `${how}: one warning for 100 failures`);
    t.match(log.lines[0]!.fields, { policy: 'rate-limit', store: 'redis' });
    advance(10_000);
    // A promise while the store fails asynchronously: await it before reading the log.
    await (call(KEYS.app).error as unknown as Promise<GatewayError | undefined> | undefined);
    t.equal(log.lines.length, 2, 'the next one after 10 s');
    t.match(log.lines[1]!.fields, { suppressed: 99, decidedLocally: 101 });
  }
});

t.test('onStoreError: closed answers 503 service_unavailable, at once', async (t) => {
  for (const how of ['reject', 'throw'] as const) {
    const policy = rateLimit.create(config({ onStoreError: 'closed' }), { env: {}, openStore: () => failingStore(how) });
    const ex = keyed('app');
    const d = await policy.onRequest!(ex);
    t.match(d, { code: 'service_unavailable', status: 503 }, how);
    t.equal(d?.headers['retry-after'], '1');
  }
});

t.test('schema: the option names, defaults, and rejections with paths', async (t) => {
  // perKey names a key of auth.keys: an id that names none is refused (the test below).
  const ops = `  auth:\n    keys:\n      - { id: ops, hash: "sha256:${'0'.repeat(64)}" }\n`;
  const ok = parsePolicy(
    'policies:\n' + ops + '  rate-limit:\n    limit: 100\n    windowSeconds: 60\n    perKey:\n      ops: { limit: 1000, windowSeconds: 60 }\n    store: { redis: { url: "redis://127.0.0.1:6379" } }\n    onStoreError: closed\n',
    { env: {} },
  );
  t.ok(ok.ok);
  if (ok.ok) {
    t.strictSame(ok.config.policies['rate-limit'], {
      limit: 100,
      windowSeconds: 60,
      perKey: { ops: { limit: 1000, windowSeconds: 60 } },
      store: { redis: { url: 'redis://127.0.0.1:6379' } },
      onStoreError: 'closed',
    });
  }
  const bad = parsePolicy('policies:\n  rate-limit:\n    limit: 0\n    store: { redis: { url: "http://x" } }\n    onStoreError: maybe\n    burst: 5\n', { env: {} });
  t.notOk(bad.ok);
  if (!bad.ok) {
    t.strictSame(
      bad.problems.map((p) => p.path).sort(),
      ['$.policies["rate-limit"].burst', '$.policies["rate-limit"].limit', '$.policies["rate-limit"].onStoreError', '$.policies["rate-limit"].store'],
    );
  }
});

t.test('perKey: an id that names no API key is refused, with the ids there are; keysFromEnv ids are NAME#n', async (t) => {
  const hash = `sha256:${'0'.repeat(64)}`;
  const policy = (perKey: string, keysFromEnv = 'null') =>
    `policies:\n  auth:\n    keys:\n      - { id: ops, hash: "${hash}" }\n    keysFromEnv: ${keysFromEnv}\n  rate-limit:\n    perKey:\n${perKey}`;
  const typo = parsePolicy(policy('      opz: { limit: 5 }\n'), { env: {} });
  t.notOk(typo.ok, 'a typo is refused');
  if (!typo.ok) t.match(typo.problems, [{ path: '$.policies["rate-limit"].perKey.opz', message: /names no API key.*"ops"/ }]);
  t.ok(parsePolicy(policy('      ops: { limit: 5 }\n'), { env: {} }).ok, 'an id of auth.keys');
  // Keys from the environment are PETSTORE_API_KEYS#1, #2, ... in the order the variable lists them.
  const env = { PETSTORE_API_KEYS: 'psg_aaaaaaaaaaaaaaaa, psg_bbbbbbbbbbbbbbbb' };
  t.ok(parsePolicy(policy('      "PETSTORE_API_KEYS#2": { limit: 5 }\n', 'PETSTORE_API_KEYS'), { env }).ok, 'the second key of the variable');
  const third = parsePolicy(policy('      "PETSTORE_API_KEYS#3": { limit: 5 }\n', 'PETSTORE_API_KEYS'), { env });
  t.notOk(third.ok, 'the variable holds two keys: #3 names none');
  // Where the variable holds no key (a check without the secret), its count is not known: accepted.
  t.ok(parsePolicy(policy('      "PETSTORE_API_KEYS#3": { limit: 5 }\n', 'PETSTORE_API_KEYS'), { env: {} }).ok, '#n without the variable');
  t.notOk(parsePolicy(policy('      "OTHER#1": { limit: 5 }\n', 'PETSTORE_API_KEYS'), { env: {} }).ok, 'another variable name is a typo');
});

t.test('perKey with a key registry: an id of the registry\'s form is accepted and noted (D4, L8); a typo outside it is not', async (t) => {
  const hash = `sha256:${'0'.repeat(64)}`;
  const policy = (perKey: string, registry = '    registry: { redis: { url: "redis://127.0.0.1:6379" } }\n') =>
    `policies:\n  auth:\n    keys:\n      - { id: ops, hash: "${hash}" }\n    keysFromEnv: null\n${registry}  rate-limit:\n    perKey:\n${perKey}`;
  const reg = parsePolicy(policy('      partner-beta: { limit: 50, windowSeconds: 60 }\n'), { env: {} });
  t.ok(reg.ok, 'a registry id is accepted');
  if (reg.ok) {
    t.strictSame(perKeyNotes(reg.config.policies['rate-limit'], reg.config.policies.auth, { env: {} }), [
      'rate-limit perKey "partner-beta": no key of the file or the environment has this id; it limits the key registry\'s consumer "partner-beta" (registry ids are known at run time: see keys list)',
    ]);
  }
  const ops = parsePolicy(policy('      ops: { limit: 5 }\n'), { env: {} });
  t.ok(ops.ok);
  if (ops.ok) t.strictSame(perKeyNotes(ops.config.policies['rate-limit'], ops.config.policies.auth, { env: {} }), [], 'a file key id: nothing to note');
  const bad = parsePolicy(policy('      "not a registry id": { limit: 5 }\n'), { env: {} });
  t.notOk(bad.ok, 'an id no registry can issue is still refused');
  if (!bad.ok) t.match(bad.problems, [{ message: /names no API key.*registry key id is 1 to 64/ }]);
  const none = parsePolicy(policy('      partner-beta: { limit: 5 }\n', ''), { env: {} });
  t.notOk(none.ok, 'without a registry, the same id names no one');
  if (!none.ok) t.notMatch(none.problems[0]?.message, /registry/);
});

t.test('rate-limit.check reads auth\'s section from the loader\'s context for the perKey ids', async (t) => {
  const path = '$.policies["rate-limit"]';
  const cfg = config({ perKey: { opz: { limit: 5 }, 'a b': { limit: 5 } } });
  const ctx = (authSection: unknown) => ({ policies: { auth: authSection }, accepted: true, run: 'not-checked' as const });
  t.strictSame(rateLimit.check!(cfg, path, { env: {} }), [], 'no context: the section alone');
  t.match(rateLimit.check!(cfg, path, { env: {} }, ctx(AUTH)), [
    { path: '$.policies["rate-limit"].perKey.opz', message: /^names no API key, so this limit would apply to no one: the ids are "ops", "app", "free"$/ },
    { path: '$.policies["rate-limit"].perKey["a b"]', message: /names no API key/ },
  ]);
  t.strictSame(rateLimit.check!(cfg, path, { env: {} }, ctx('not a mapping')), [], 'an auth section of the wrong type is the schema\'s to report');
});

t.test('--workers N with the memory store: a notice that limits are per worker; none with Redis or one worker', async (t) => {
  t.match(perWorkerNotice(config(), 4), /counts per worker: with --workers 4 a consumer may make up to 4x its limit/);
  t.equal(perWorkerNotice(config(), 1), undefined);
  t.equal(perWorkerNotice(config({ store: { redis: { url: 'redis://127.0.0.1:6379' } } }), 4), undefined);
  t.equal(perWorkerNotice(config({ limit: undefined }), 4), undefined, 'nothing limited, nothing to say');
});
