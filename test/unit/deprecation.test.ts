/**
 * getPet's lifecycle (docs/interface.md, "Versioning": deprecated, removed on 5 December 2030):
 * the `deprecation` policy's headers on every getPet exchange (denials included), 410 after the
 * sunset and inside brownouts, the cross-field rules of its config; and the `route` policy's 404
 * for a petId that is not an int64.
 */
import t from 'tap';
import { parsePolicy } from '../../src/config/load.js';
import type { PolicyConfig } from '../../src/config/types.js';
import type { GatewayError } from '../../src/core/errors.js';
import { Chain } from '../helpers/chain.js';
import { paramOf } from '../../src/core/operations.js';
import type { IncomingHeaders, Policy, PolicyEnv } from '../../src/core/policy.js';
import { compileGateway } from '../../src/gateway.js';
import { auth } from '../../src/policies/auth/index.js';
import { deprecation, deprecationHeaders, lifecycleOf, type DeprecationConfig } from '../../src/policies/deprecation/index.js';
import { OPERATIONS } from '../helpers/pet-store.js';
import { route } from '../../src/policies/route/index.js';

type TapTest = Parameters<Parameters<typeof t.test>[0]>[0];

function load(text: string, env: PolicyEnv = { env: {} }): PolicyConfig {
  const r = parsePolicy(text, env);
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.config;
}
const DEFAULT: DeprecationConfig = load('').policies.deprecation;
/** getPet's headers under a config: its lifecycle from the document, the config's options over it. */
const headersOf = (c: DeprecationConfig) => deprecationHeaders(c, lifecycleOf(OPERATIONS.getPet, c)!);

const DEPRECATION = '@1767225600'; // 2026-01-01T00:00:00Z
const SUNSET = 'Thu, 05 Dec 2030 00:00:00 GMT';
const SUNSET_MS = Date.parse('2030-12-05T00:00:00Z');
const SUCCESSOR = '</v1/pets>; rel="successor-version"';
const BEFORE = Date.parse('2027-06-01T12:00:00Z');
const HEADERS = { deprecation: DEPRECATION, sunset: SUNSET, link: SUCCESSOR };

const at = (ms: number): PolicyEnv => ({ env: {}, now: () => ms });

function dep(config: Partial<DeprecationConfig> = {}, env: PolicyEnv = at(BEFORE)): Policy {
  return deprecation.create({ ...DEFAULT, ...config }, env);
}

function getPet(policies: Policy[], target = '/v1/pets/1', headers: IncomingHeaders = {}, method = 'GET') {
  return new Chain(policies).begin({ method, target, headers });
}

function assertRemoved(t: TapTest, error: GatewayError | undefined, name: string): void {
  t.equal(error?.code, 'operation_removed', `${name}: code`);
  t.equal(error?.status, 410, `${name}: 410`);
}

t.test('defaults: deprecated 2026-01-01, sunset 5 December 2030 (the document), removed after it, no brownouts', async (t) => {
  t.strictSame(DEFAULT, {
    deprecatedAt: '2026-01-01T00:00:00Z',
    links: [],
    removeAfterSunset: true,
    brownouts: [],
  });
  t.strictSame(lifecycleOf(OPERATIONS.getPet, DEFAULT), { sunset: '2030-12-05T00:00:00Z', successor: '/v1/pets', advice: 'GET /v1/pets with the status filter' }, 'the sunset and successor the document gives');
  t.strictSame(headersOf(DEFAULT), HEADERS);
});

t.test('every getPet exchange carries Deprecation, Sunset and Link', async (t) => {
  for (const target of ['/v1/pets/1', '/v1/pets/9223372036854775807', '/v1/pets/abc', '/v1/pets/1?x=y']) {
    const { ex, error } = getPet([dep()], target);
    t.equal(error, undefined, target);
    t.strictSame(ex.responseHeaders, HEADERS, `${target}: headers`);
  }
});

t.test('documentation links follow the successor in Link', async (t) => {
  const config = {
    ...DEFAULT,
    successor: 'https://api.example.com/v1/pets?status=available',
    links: [
      { href: 'https://example.com/deprecation', rel: 'deprecation', type: 'text/html' },
      { href: 'https://example.com/sunset', rel: 'sunset' },
    ],
  } as const;
  const link =
    '<https://api.example.com/v1/pets?status=available>; rel="successor-version", ' +
    '<https://example.com/deprecation>; rel="deprecation"; type="text/html", <https://example.com/sunset>; rel="sunset"';
  t.strictSame(headersOf(config), { deprecation: DEPRECATION, sunset: SUNSET, link });
  const { ex } = getPet([deprecation.create(config, at(BEFORE))]);
  t.equal(ex.responseHeaders.link, link);
  // Through the policy file too.
  const loaded = load(
    'policies:\n  deprecation:\n    links:\n      - href: https://example.com/deprecation\n        rel: deprecation\n        type: text/html\n',
  ).policies.deprecation;
  t.equal(headersOf(loaded).link, '</v1/pets>; rel="successor-version", <https://example.com/deprecation>; rel="deprecation"; type="text/html"');
});

t.test('header values from other dates: unix seconds and IMF-fixdate', async (t) => {
  t.strictSame(headersOf({ ...DEFAULT, deprecatedAt: '2025-03-04T05:06:07.890Z', sunset: '2030-12-05T01:00:00+01:00' }), {
    deprecation: `@${Date.UTC(2025, 2, 4, 5, 6, 7) / 1000}`,
    sunset: SUNSET,
    link: SUCCESSOR,
  });
  t.equal(headersOf({ ...DEFAULT, deprecatedAt: '2026-01-01T02:00:00+02:00' }).deprecation, DEPRECATION);
});

t.test('other operations and paths get no deprecation headers', async (t) => {
  const p = dep();
  for (const [method, target] of [
    ['GET', '/v1/pets'],
    ['POST', '/v1/pets'],
    ['PUT', '/v1/pets/1'],
    ['DELETE', '/v1/pets/1'],
    ['GET', '/v1/pets/'],
    ['GET', '/v1/pet/1'],
    ['GET', '/v2/pets/1'],
  ]) {
    const { ex, error } = getPet([p], target, {}, method);
    t.strictSame(ex.responseHeaders, {}, `${method} ${target}`);
    t.equal(error, undefined, `${method} ${target}: not removed`);
  }
  // Not even after the sunset.
  t.equal(getPet([dep({}, at(SUNSET_MS + 1))], '/v1/pets').error, undefined, 'listPets after the sunset');
});

t.test('annotate runs before any decision: a denied getPet carries the headers', async (t) => {
  const env: PolicyEnv = { env: { PETSTORE_API_KEYS: 'good-key' }, now: () => BEFORE };
  const config = load('', env).policies;
  const chain = new Chain([auth.create(config.auth, env), route.create({}, env), deprecation.create(config.deprecation, env)]);
  const cases: [string, IncomingHeaders, string | undefined, number | undefined][] = [
    ['/v1/pets/1', {}, 'missing_api_key', 401],
    ['/v1/pets/1', { authorization: 'Bearer wrong-key' }, 'invalid_api_key', 401],
    ['/v1/pets/1', { authorization: 'Basic Zm9vOmJhcg==' }, 'malformed_authorization', 401],
    ['/v1/pets/abc', { authorization: 'Bearer good-key' }, 'pet_not_found', 404],
    ['/v1/pets/1', { authorization: 'Bearer good-key' }, undefined, undefined],
  ];
  for (const [target, headers, code, status] of cases) {
    const { ex, error } = chain.begin({ method: 'GET', target, headers });
    t.equal(error?.code, code, `${target} ${JSON.stringify(headers)}: code`);
    t.equal(error?.status, status, `${target} ${JSON.stringify(headers)}: status`);
    t.strictSame(ex.responseHeaders, HEADERS, `${target} ${JSON.stringify(headers)}: deprecation headers`);
  }
  // After the sunset, auth still answers first, with the headers.
  const late: PolicyEnv = { ...env, now: () => SUNSET_MS };
  const lateChain = new Chain([auth.create(config.auth, late), route.create({}, late), deprecation.create(config.deprecation, late)]);
  const denied = lateChain.begin({ method: 'GET', target: '/v1/pets/1', headers: {} });
  t.equal(denied.error?.code, 'missing_api_key');
  t.strictSame(denied.ex.responseHeaders, HEADERS);
  const removed = lateChain.begin({ method: 'GET', target: '/v1/pets/1', headers: { authorization: 'Bearer good-key' } });
  assertRemoved(t, removed.error, 'authenticated after the sunset');
  t.strictSame(removed.ex.responseHeaders, HEADERS);
});

t.test('the full gateway chain: a 401 getPet has the headers', async (t) => {
  const env: PolicyEnv = { env: { PETSTORE_API_KEYS: 'good-key' }, now: () => BEFORE };
  const gw = compileGateway(load('', env), env);
  const { ex, error } = gw.chain.begin({ method: 'GET', target: '/v1/pets/1', headers: {} });
  t.equal(error?.status, 401);
  t.strictSame(ex.responseHeaders, HEADERS);
});

t.test('after the sunset: 410 operation_removed (removeAfterSunset, default true)', async (t) => {
  assertRemoved(t, getPet([dep({}, at(SUNSET_MS))]).error, 'at the sunset moment');
  assertRemoved(t, getPet([dep({}, at(SUNSET_MS + 1))]).error, 'one ms after');
  assertRemoved(t, getPet([dep({}, at(Date.parse('2040-01-01T00:00:00Z')))]).error, 'years after');
  t.equal(getPet([dep({}, at(SUNSET_MS - 1))]).error, undefined, 'one ms before: passes');
  const { ex, error } = getPet([dep({}, at(SUNSET_MS))]);
  t.strictSame(ex.responseHeaders, HEADERS, 'the 410 carries the headers too');
  t.match(error?.message, /\/v1\/pets/, 'names the successor');
  t.strictSame(error?.headers, {}, 'no extra headers on the error itself');
  // removeAfterSunset false: getPet keeps working.
  t.equal(getPet([dep({ removeAfterSunset: false }, at(SUNSET_MS + 1))]).error, undefined, 'removeAfterSunset false');
  // A custom sunset.
  const custom = { sunset: '2027-01-01T00:00:00Z' };
  assertRemoved(t, getPet([dep(custom, at(Date.parse('2027-01-01T00:00:00Z')))]).error, 'custom sunset');
  t.equal(getPet([dep(custom, at(Date.parse('2026-12-31T23:59:59Z')))]).error, undefined, 'before the custom sunset');
});

t.test('the clock is read per request', async (t) => {
  let now = SUNSET_MS - 1000;
  const p = dep({}, { env: {}, now: () => now });
  t.equal(getPet([p]).error, undefined, 'before');
  now = SUNSET_MS;
  assertRemoved(t, getPet([p]).error, 'after, same policy instance');
});

t.test('brownouts: 410 inside [start, end), pass outside', async (t) => {
  const brownouts = [
    { start: '2028-03-01T10:00:00Z', end: '2028-03-01T11:00:00Z' },
    { start: '2029-06-01T00:00:00+02:00', end: '2029-06-02T00:00:00+02:00' },
  ];
  const ms = (s: string) => Date.parse(s);
  const inside = [ms('2028-03-01T10:00:00Z'), ms('2028-03-01T10:30:00Z'), ms('2028-03-01T11:00:00Z') - 1, ms('2029-05-31T22:00:00Z'), ms('2029-06-01T21:59:59Z')];
  const outside = [ms('2028-03-01T10:00:00Z') - 1, ms('2028-03-01T11:00:00Z'), ms('2028-06-01T00:00:00Z'), ms('2029-05-31T21:59:59Z'), ms('2029-06-01T22:00:00Z'), BEFORE];
  for (const now of inside) {
    const { ex, error } = getPet([dep({ brownouts }, at(now))]);
    assertRemoved(t, error, `inside at ${new Date(now).toISOString()}`);
    t.strictSame(ex.responseHeaders, HEADERS, `inside at ${new Date(now).toISOString()}: headers`);
  }
  for (const now of outside) t.equal(getPet([dep({ brownouts }, at(now))]).error, undefined, `outside at ${new Date(now).toISOString()}`);
  // Brownouts concern getPet only.
  t.equal(getPet([dep({ brownouts }, at(inside[0]!))], '/v1/pets').error, undefined, 'listPets during a brownout');
  t.equal(getPet([dep({ brownouts }, at(inside[0]!))], '/v1/pets', {}, 'POST').error, undefined, 'createPet during a brownout');
  // The message says until when.
  t.match(getPet([dep({ brownouts }, at(inside[0]!))]).error?.message, /2028-03-01T11:00:00Z/);
  // Brownouts apply even with removeAfterSunset false.
  assertRemoved(t, getPet([dep({ brownouts, removeAfterSunset: false }, at(inside[1]!))]).error, 'removeAfterSunset false');
});

t.test('policy file: cross-field rules with exact path and message', async (t) => {
  const problems = (yaml: string) => {
    const r = parsePolicy(`policies:\n  deprecation:\n${yaml}`, { env: {} });
    return r.ok ? [] : r.problems;
  };
  t.strictSame(problems('    deprecatedAt: "2031-01-01T00:00:00Z"\n'), [
    { path: '$.policies.deprecation.deprecatedAt', message: 'must not be after the sunset (2030-12-05T00:00:00Z)' },
  ]);
  t.strictSame(problems('    deprecatedAt: "2027-01-01T00:00:00Z"\n    sunset: "2026-12-31T23:59:59Z"\n'), [
    { path: '$.policies.deprecation.deprecatedAt', message: 'must not be after the sunset (2026-12-31T23:59:59Z)' },
  ]);
  t.strictSame(problems('    brownouts:\n      - start: "2028-01-02T00:00:00Z"\n        end: "2028-01-01T00:00:00Z"\n'), [
    { path: '$.policies.deprecation.brownouts[0]', message: 'must end after it starts' },
  ]);
  t.strictSame(problems('    brownouts:\n      - start: "2028-01-01T00:00:00Z"\n        end: "2028-01-01T00:00:00Z"\n'), [
    { path: '$.policies.deprecation.brownouts[0]', message: 'must end after it starts' },
  ]);
  t.strictSame(
    problems(
      '    brownouts:\n      - start: "2028-01-01T00:00:00Z"\n        end: "2028-01-02T00:00:00Z"\n' +
        '      - start: "2030-12-04T00:00:00Z"\n        end: "2030-12-06T00:00:00Z"\n' +
        '      - start: "2031-01-01T00:00:00Z"\n        end: "2031-01-02T00:00:00Z"\n',
    ),
    [
      { path: '$.policies.deprecation.brownouts[1].end', message: 'must not be after the sunset: after it, getPet is removed' },
      { path: '$.policies.deprecation.brownouts[2].end', message: 'must not be after the sunset: after it, getPet is removed' },
    ],
  );
  // Every problem at once.
  t.strictSame(
    problems('    deprecatedAt: "2031-01-01T00:00:00Z"\n    brownouts:\n      - start: "2029-01-02T00:00:00Z"\n        end: "2029-01-01T00:00:00Z"\n'),
    [
      { path: '$.policies.deprecation.deprecatedAt', message: 'must not be after the sunset (2030-12-05T00:00:00Z)' },
      { path: '$.policies.deprecation.brownouts[0]', message: 'must end after it starts' },
    ],
  );
  // Accepted: deprecatedAt equal to the sunset, a brownout ending exactly at the sunset.
  t.strictSame(problems('    deprecatedAt: "2030-12-05T00:00:00Z"\n'), []);
  t.strictSame(problems('    brownouts:\n      - start: "2030-12-04T00:00:00Z"\n        end: "2030-12-05T00:00:00Z"\n'), []);
  t.strictSame(problems('    brownouts:\n      - start: "2030-12-04T01:00:00+01:00"\n        end: "2030-12-05T01:00:00+01:00"\n'), []);
  // A date the pattern accepts but that is no date.
  t.strictSame(problems('    sunset: "2030-13-05T00:00:00Z"\n'), [{ path: '$.policies.deprecation.sunset', message: 'is not a valid date' }]);
});

t.test('route: a getPet petId that is not an int64 is 404 pet_not_found', async (t) => {
  const chain = new Chain([route.create({}, { env: {} })]);
  const notFound = ['abc', '1.5', '1.0', '1e3', '9223372036854775808', '-9223372036854775809', '99999999999999999999999', '%31', '01', '+1', '0x1', '1-', '%2D1', 'NaN'];
  for (const petId of notFound) {
    const { ex, error } = chain.begin({ method: 'GET', target: `/v1/pets/${petId}`, headers: {} });
    t.equal(ex.operation?.id, 'getPet', `${petId}: still getPet`);
    t.equal(error?.code, 'pet_not_found', `${petId}: code`);
    t.equal(error?.status, 404, `${petId}: 404`);
  }
  for (const petId of ['0', '1', '42', '9223372036854775807', '-1', '-9223372036854775808']) {
    const { ex, error } = chain.begin({ method: 'GET', target: `/v1/pets/${petId}?x=1`, headers: {} });
    t.equal(error, undefined, `${petId}: passes`);
    t.equal(paramOf(ex.route), petId, `${petId}: raw petId kept`);
  }
});

t.test('a day that does not exist is not a valid date (no roll-over to March)', async (t) => {
  const { parseDateTime } = await import('../../src/policies/deprecation/index.js');
  t.ok(Number.isNaN(parseDateTime('2030-02-30T00:00:00Z')));
  t.ok(Number.isNaN(parseDateTime('2030-04-31T00:00:00Z')));
  t.ok(Number.isNaN(parseDateTime('2030-01-01T24:00:00Z')));
  t.equal(parseDateTime('2028-02-29T00:00:00Z'), Date.UTC(2028, 1, 29));
  t.equal(parseDateTime('2030-12-05T01:00:00+01:00'), Date.UTC(2030, 11, 5));
});
