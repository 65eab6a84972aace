/**
 * The route matcher and the route policy: which request lines name an operation, which get 405
 * with Allow, which get 404; and the order of the chain (auth denies before route).
 */
import t from 'tap';
import { parsePolicy } from '../../src/config/load.js';
import { Chain } from '../helpers/chain.js';
import { operationPath, paramOf, splitTarget, type RouteMatch } from '../../src/core/operations.js';
import { matchRoute, OPERATIONS } from '../helpers/pet-store.js';
import type { IncomingHeaders } from '../../src/core/policy.js';
import { compileGateway } from '../../src/gateway.js';
import { hashKey } from '../../src/policies/auth/index.js';
import { route } from '../../src/policies/route/index.js';

const LIST: RouteMatch = { kind: 'operation', operation: OPERATIONS.listPets };
const CREATE: RouteMatch = { kind: 'operation', operation: OPERATIONS.createPet };
const get = (petId: string): RouteMatch => ({ kind: 'operation', operation: OPERATIONS.getPet, param: petId });
const COLLECTION_405: RouteMatch = { kind: 'method_not_allowed', allow: 'GET, POST', label: '/v1/pets' };
const ITEM_405: RouteMatch = { kind: 'method_not_allowed', allow: 'GET', label: '/v1/pets/{petId}' };
const NOT_FOUND: RouteMatch = { kind: 'not_found' };

t.test('matchRoute: the operations', async (t) => {
  const cases: [string, string, RouteMatch][] = [
    ['GET', '/v1/pets', LIST],
    ['POST', '/v1/pets', CREATE],
    ['GET', '/v1/pets/1', get('1')],
    ['GET', '/v1/pets/9223372036854775807', get('9223372036854775807')],
    ['GET', '/v1/pets/-1', get('-1')],
    // Any pchar segment is a getPet for the route; whether the animal exists is the backend's call (404).
    ['GET', '/v1/pets/abc', get('abc')],
    ['GET', '/v1/pets/...', get('...')],
    ['GET', "/v1/pets/a-._~!$&'()*+,=:@", get("a-._~!$&'()*+,=:@")],
  ];
  for (const [method, path, expected] of cases) t.strictSame(matchRoute(method, path), expected, `${method} ${path}`);
});

t.test('matchRoute: 405 with Allow on the known paths', async (t) => {
  for (const method of ['PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH', 'TRACE', 'CONNECT', 'get', 'post', 'Get']) {
    t.strictSame(matchRoute(method, '/v1/pets'), COLLECTION_405, `${method} /v1/pets`);
  }
  for (const method of ['PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'get']) {
    t.strictSame(matchRoute(method, '/v1/pets/1'), ITEM_405, `${method} /v1/pets/1`);
  }
});

t.test('matchRoute: 404 for every other path, whatever the method', async (t) => {
  const paths = [
    '/',
    '',
    '*',
    '/v1',
    '/v1/',
    '/v1/pets/',
    '//v1/pets',
    '/v1//pets',
    '/v1/pets//1',
    '/V1/pets',
    '/v1/Pets',
    '/v1/PETS',
    '/v2/pets',
    '/api/v1/pets',
    '/v1/pet',
    '/v1/petsx',
    '/v1/pets/1/x',
    '/v1/pets/1/',
    '/v1/./pets',
    '/v1/../v1/pets',
    '/v1/pets/.',
    '/v1/pets/..',
    '/v1/pets/./1',
    '/v1/pets;x',
    '/v1/pets/1;x',
    '/v1/pets/;',
    '/v1/pets%2F1',
    '/v1%2Fpets',
    '/v1/pets%3Fx',
    '/v1/pets/ 1',
    '/v1/pets/1 ',
    '/v1/pets/1#x',
    '/v1/pets#x',
    '/v1/pets/"1"',
    '/v1/pets/<1>',
    '/v1/pets/\u00e9',
    'http://pets.example/v1/pets',
    'v1/pets',
  ];
  for (const path of paths) {
    for (const method of ['GET', 'POST', 'DELETE']) t.strictSame(matchRoute(method, path), NOT_FOUND, `${method} ${JSON.stringify(path)}`);
  }
});

t.test('matchRoute: percent-encoded segments are matched raw, undecoded (the route policy then 404s them)', async (t) => {
  t.strictSame(matchRoute('GET', '/v1/pets/%2e%2e'), get('%2e%2e'));
  t.strictSame(matchRoute('GET', '/v1/pets/%2F'), get('%2F'));
  t.strictSame(matchRoute('GET', '/v1/pets/..%2Fstore%2Forders'), get('..%2Fstore%2Forders'));
  t.strictSame(matchRoute('GET', '/v1/pets/%31'), get('%31'));
  t.strictSame(matchRoute('GET', '/v1/pets/%'), get('%'));
});

t.test('route policy: a petId that is not an int64 is 404 pet_not_found, encoded tricks included', async (t) => {
  const chain = new Chain([route.create({}, { env: {} })]);
  const code = (target: string) => chain.begin({ method: 'GET', target, headers: {} }).error?.code;
  for (const petId of ['abc', '...', '%2e', '%2E', '%2e%2e', '%2E%2E', '.%2e', '%2F', '..%2Fstore%2Forders', '%31', '%', '01', '1.0', '1e3', '-0x1', '9223372036854775808', '-9223372036854775809']) {
    t.equal(code(`/v1/pets/${petId}`), 'pet_not_found', petId);
  }
  for (const petId of ['0', '-0', '1', '-1', '9223372036854775807', '-9223372036854775808']) {
    t.equal(code(`/v1/pets/${petId}`), undefined, petId);
  }
  // The 405 wins over the petId check: the path is known, the method is not.
  t.equal(chain.begin({ method: 'DELETE', target: '/v1/pets/abc', headers: {} }).error?.code, 'method_not_allowed');
});

t.test('splitTarget and operationPath', async (t) => {
  t.strictSame(splitTarget('/v1/pets'), { path: '/v1/pets', query: '' });
  t.strictSame(splitTarget('/v1/pets?'), { path: '/v1/pets', query: '' });
  t.strictSame(splitTarget('/v1/pets?limit=5&status=sold'), { path: '/v1/pets', query: 'limit=5&status=sold' });
  t.strictSame(splitTarget('/v1/pets?a=?b'), { path: '/v1/pets', query: 'a=?b' });
  t.strictSame(splitTarget('?x'), { path: '', query: 'x' });
  t.equal(operationPath(OPERATIONS.listPets, undefined), '/pets');
  t.equal(operationPath(OPERATIONS.createPet, undefined), '/pets');
  t.equal(operationPath(OPERATIONS.getPet, '42'), '/pets/42');
});

t.test('route policy: decisions, codes, statuses and exact headers', async (t) => {
  const chain = new Chain([route.create({}, { env: {} })]);
  const decide = (method: string, target: string) => {
    const { ex, error } = chain.begin({ method, target, headers: {} });
    return { error: error === undefined ? undefined : { code: error.code, status: error.status, headers: { ...error.headers } }, ex };
  };
  const cases: [string, string, unknown][] = [
    ['GET', '/v1/pets', undefined],
    ['GET', '/v1/pets?limit=5', undefined],
    ['POST', '/v1/pets', undefined],
    ['GET', '/v1/pets/7?x=1', undefined],
    ['PUT', '/v1/pets', { code: 'method_not_allowed', status: 405, headers: { allow: 'GET, POST' } }],
    ['DELETE', '/v1/pets', { code: 'method_not_allowed', status: 405, headers: { allow: 'GET, POST' } }],
    ['HEAD', '/v1/pets', { code: 'method_not_allowed', status: 405, headers: { allow: 'GET, POST' } }],
    ['OPTIONS', '/v1/pets', { code: 'method_not_allowed', status: 405, headers: { allow: 'GET, POST' } }],
    ['PUT', '/v1/pets/1', { code: 'method_not_allowed', status: 405, headers: { allow: 'GET' } }],
    ['DELETE', '/v1/pets/1', { code: 'method_not_allowed', status: 405, headers: { allow: 'GET' } }],
    ['HEAD', '/v1/pets/1', { code: 'method_not_allowed', status: 405, headers: { allow: 'GET' } }],
    ['OPTIONS', '/v1/pets/1', { code: 'method_not_allowed', status: 405, headers: { allow: 'GET' } }],
    ['POST', '/v1/pets/1', { code: 'method_not_allowed', status: 405, headers: { allow: 'GET' } }],
    ['GET', '/', { code: 'not_found', status: 404, headers: {} }],
    ['GET', '/v1', { code: 'not_found', status: 404, headers: {} }],
    ['GET', '/v1/pets/', { code: 'not_found', status: 404, headers: {} }],
    ['GET', '/v1/pets/?limit=1', { code: 'not_found', status: 404, headers: {} }],
    ['PUT', '/nowhere', { code: 'not_found', status: 404, headers: {} }],
    ['GET', '/v1/pets/1/x?y', { code: 'not_found', status: 404, headers: {} }],
    ['GET', '/v1/pets/abc', { code: 'pet_not_found', status: 404, headers: {} }],
    ['GET', '/v1/pets/%2e%2e', { code: 'pet_not_found', status: 404, headers: {} }],
  ];
  for (const [method, target, expected] of cases) t.strictSame(decide(method, target).error, expected, `${method} ${target}`);

  const { ex } = decide('GET', '/v1/pets/7?x=1');
  t.equal(ex.operation, OPERATIONS.getPet);
  t.equal(paramOf(ex.route), '7');
  t.equal(ex.rawQuery, 'x=1');
  t.equal(ex.upstreamQuery, '', 'the client query of getPet is not forwarded');
  const list = decide('GET', '/v1/pets?limit=5').ex;
  t.equal(list.operation?.id, 'listPets');
  t.equal(paramOf(list.route), undefined);
  t.equal(list.rawQuery, 'limit=5');
});

t.test('chain order: auth denies before route, route before new-pet', async (t) => {
  const KEY = 'psg_route-test-key';
  const loaded = parsePolicy(`policies: { auth: { keys: [ { id: ops, hash: "${hashKey(KEY)}" } ] } }`, { env: {} });
  if (!loaded.ok) return void t.fail('policy rejected', { problems: loaded.problems });
  // A clock before the sunset of getPet, so the deprecation policy lets it through.
  const gw = compileGateway(loaded.config, { env: {}, now: () => Date.parse('2027-01-01T00:00:00Z') });
  const names = gw.chain.policies.map((p) => p.name);
  // cors comes before auth (a preflight carries no credentials) and decides nothing without origins.
  t.equal(names[0], 'cors', 'cors first');
  t.equal(names[1], 'auth', 'auth before every other decision');
  t.equal(names[2], 'rate-limit', 'rate-limit next: a limited consumer is refused on any path');
  t.equal(names[3], 'route', 'then route');
  t.ok(names.indexOf('new-pet') > names.indexOf('route'), 'new-pet after route');

  const decide = (method: string, target: string, headers: IncomingHeaders) => {
    const { error } = gw.chain.begin({ method, target, headers });
    return error === undefined ? 'pass' : { code: error.code, status: error.status, headers: { ...error.headers } };
  };
  const missing = { code: 'missing_api_key', status: 401, headers: { 'www-authenticate': 'Bearer realm="petstore"' } };
  const invalid = { code: 'invalid_api_key', status: 401, headers: { 'www-authenticate': 'Bearer realm="petstore", error="invalid_token"' } };
  const good = { authorization: `Bearer ${KEY}` };
  const cases: [string, string, IncomingHeaders, unknown][] = [
    // Unauthenticated: 401 whatever the path, method or media type.
    ['GET', '/nowhere', {}, missing],
    ['GET', '/', {}, missing],
    ['GET', '/v1/pets/', {}, missing],
    ['PUT', '/v1/pets', {}, missing],
    ['DELETE', '/v1/pets/1', {}, missing],
    ['POST', '/v1/pets', { 'content-type': 'text/plain' }, missing],
    ['GET', '/nowhere', { authorization: 'Bearer wrong' }, invalid],
    ['PUT', '/v1/pets', { authorization: 'Bearer wrong' }, invalid],
    // Authenticated: the route decides.
    ['GET', '/nowhere', good, { code: 'not_found', status: 404, headers: {} }],
    ['PUT', '/v1/pets', good, { code: 'method_not_allowed', status: 405, headers: { allow: 'GET, POST' } }],
    ['DELETE', '/v1/pets/1', good, { code: 'method_not_allowed', status: 405, headers: { allow: 'GET' } }],
    // An unknown path is a 404 even when the body would be refused.
    ['POST', '/nowhere', { ...good, 'content-type': 'text/plain' }, { code: 'not_found', status: 404, headers: {} }],
    ['POST', '/v1/pets/1', { ...good, 'content-type': 'text/plain' }, { code: 'method_not_allowed', status: 405, headers: { allow: 'GET' } }],
    // Then new-pet.
    ['POST', '/v1/pets', { ...good, 'content-type': 'text/plain' }, { code: 'unsupported_media_type', status: 415, headers: {} }],
    ['POST', '/v1/pets', { ...good, 'content-type': 'application/json' }, 'pass'],
    ['GET', '/v1/pets', good, 'pass'],
    ['GET', '/v1/pets/1', good, 'pass'],
    ['GET', '/v1/pets/abc', {}, missing],
    ['GET', '/v1/pets/abc', good, { code: 'pet_not_found', status: 404, headers: {} }],
  ];
  for (const [method, target, headers, expected] of cases) {
    t.strictSame(decide(method, target, headers), expected, `${method} ${target} ${JSON.stringify(headers)}`);
  }
});
