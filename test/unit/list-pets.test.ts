/**
 * The `list-pets` policy: listPets' query (`limit` integer 1..100, default 20, `status` a PetStatus,
 * unknown parameters dropped or rejected) and the enforcement of its response (never more than
 * `limit` animals, never another status than the filter, lossless, 502 for what is not a JSON array).
 */
import { declaresOf } from '../../src/policies/list-pets/facts.js';
import t from 'tap';
import { parsePolicy } from '../../src/config/load.js';
import type { PolicyConfig } from '../../src/config/types.js';
import { ERROR_CONTENT_TYPE, type GatewayError } from '../../src/core/errors.js';
import { Chain } from '../helpers/chain.js';
import type { Exchange, Policy, PolicyEnv, ResponseBody } from '../../src/core/policy.js';
import { LIMIT, STATUS } from '../helpers/pet-store.js';
import { listPets, type ListPetsConfig } from '../../src/policies/list-pets/index.js';
import { upstreamErrors } from '../../src/policies/upstream-errors/index.js';
import { fakeLog } from '../helpers/log.js';

type TapTest = Parameters<Parameters<typeof t.test>[0]>[0];

function defaults(): PolicyConfig['policies'] {
  const r = parsePolicy('', { env: {} });
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.config.policies;
}
const DEFAULT: ListPetsConfig = defaults()['list-pets'];

t.test('defaults of the policy file', async (t) => {
  t.strictSame(DEFAULT, { outOfRange: 'reject', unknownParams: 'drop', enforceResponse: true });
  const r = parsePolicy('policies:\n  list-pets:\n    outOfRange: clamp\n    unknownParams: reject\n', { env: {} });
  t.ok(r.ok);
  if (r.ok) t.strictSame(r.config.policies['list-pets'], { outOfRange: 'clamp', unknownParams: 'reject', enforceResponse: true });
});

function policy(config: Partial<ListPetsConfig> = {}, env: PolicyEnv = { env: {} }): Policy {
  return listPets.create({ ...DEFAULT, ...config }, env);
}

function begin(target: string, config: Partial<ListPetsConfig> = {}, method = 'GET'): { ex: Exchange; error: GatewayError | undefined } {
  return new Chain([policy(config)]).begin({ method, target, headers: {} });
}

/** The page list-pets recorded (its `LIMIT` and `STATUS` facts), as one value; undefined when none. */
function listOf(ex: Exchange): { limit: number; status: string | undefined } | undefined {
  const limit = ex.get(LIMIT);
  return limit === undefined ? undefined : { limit, status: ex.get(STATUS) };
}

function assertInvalidQuery(t: TapTest, error: GatewayError | undefined, name: string, message?: RegExp): void {
  t.ok(error !== undefined, `${name}: denied`);
  t.equal(error?.code, 'invalid_query', `${name}: code`);
  t.equal(error?.status, 400, `${name}: status`);
  if (message !== undefined) t.match(error?.message, message, `${name}: message`);
}

t.test('no limit: the upstream receives limit=20 explicitly', async (t) => {
  for (const target of ['/v1/pets', '/v1/pets?', '/v1/pets?page=2', '/v1/pets?&&']) {
    const { ex, error } = begin(target);
    t.equal(error, undefined, target);
    t.equal(ex.upstreamQuery, 'limit=20', `${target}: upstream query`);
    t.strictSame(listOf(ex), { limit: 20, status: undefined }, `${target}: list`);
  }
});

t.test('valid limits and statuses, normalised for the upstream', async (t) => {
  const cases: [string, string, { limit: number; status: string | undefined }][] = [
    ['limit=1', 'limit=1', { limit: 1, status: undefined }],
    ['limit=100', 'limit=100', { limit: 100, status: undefined }],
    ['limit=55', 'limit=55', { limit: 55, status: undefined }],
    ['limit=007', 'limit=7', { limit: 7, status: undefined }],
    ['status=available', 'limit=20&status=available', { limit: 20, status: 'available' }],
    ['status=pending', 'limit=20&status=pending', { limit: 20, status: 'pending' }],
    ['status=sold&limit=3', 'limit=3&status=sold', { limit: 3, status: 'sold' }],
    ['limit=3&status=s%6Fld', 'limit=3&status=sold', { limit: 3, status: 'sold' }],
    ['limit=%35', 'limit=5', { limit: 5, status: undefined }],
  ];
  for (const [query, upstream, list] of cases) {
    const { ex, error } = begin(`/v1/pets?${query}`);
    t.equal(error, undefined, query);
    t.equal(ex.upstreamQuery, upstream, `${query}: upstream query`);
    t.strictSame(listOf(ex), list, `${query}: list`);
  }
});

t.test('limit outside 1..100 or not an integer: 400 invalid_query naming the bound', async (t) => {
  const cases: [string, RegExp][] = [
    ['limit=0', /limit.*\b1\b/],
    ['limit=-1', /limit.*\b1\b/],
    ['limit=-0', /limit.*\b1\b/],
    ['limit=-99999999999999999999', /limit.*\b1\b/],
    ['limit=101', /limit.*\b100\b/],
    ['limit=1000', /limit.*\b100\b/],
    ['limit=99999999999999999999', /limit.*\b100\b/],
    ['limit=1.5', /limit.*integer/],
    ['limit=1.0', /limit.*integer/],
    ['limit=abc', /limit.*integer/],
    ['limit=', /limit.*integer/],
    ['limit', /limit.*integer/],
    ['limit=1e1', /limit.*integer/],
    ['limit=0x10', /limit.*integer/],
    ['limit=%205', /limit.*integer/],
    ['limit=5%20', /limit.*integer/],
    ['limit=+5', /limit.*integer/], // '+' is a space in a query string
    ['limit=%ZZ', /limit.*integer/],
    ['limit=%EF%BC%95', /limit.*integer/], // fullwidth digit five
    ['limit=1&limit=2', /limit/],
    ['limit=20&limit=20', /limit/],
    ['limit=20&status=sold&limit=', /limit/],
  ];
  for (const [query, message] of cases) {
    const { error } = begin(`/v1/pets?${query}`);
    assertInvalidQuery(t, error, query, message);
  }
  // Non-integers name both bounds.
  for (const query of ['limit=1.5', 'limit=abc', 'limit=']) {
    const { error } = begin(`/v1/pets?${query}`);
    t.match(error?.message, /\b1\b.*\b100\b/, `${query}: names 1 and 100`);
  }
});

t.test('outOfRange clamp: integers brought to the bounds, non-integers still 400', async (t) => {
  const clamp = { outOfRange: 'clamp' } as const;
  const cases: [string, number][] = [
    ['limit=0', 1],
    ['limit=-1', 1],
    ['limit=-99999999999999999999', 1],
    ['limit=1', 1],
    ['limit=50', 50],
    ['limit=100', 100],
    ['limit=101', 100],
    ['limit=99999999999999999999', 100],
  ];
  for (const [query, limit] of cases) {
    const { ex, error } = begin(`/v1/pets?${query}`, clamp);
    t.equal(error, undefined, query);
    t.equal(ex.upstreamQuery, `limit=${limit}`, `${query}: upstream query`);
    t.equal(listOf(ex)?.limit, limit, `${query}: list.limit`);
  }
  for (const query of ['limit=1.5', 'limit=abc', 'limit=', 'limit=1e3', 'limit=1&limit=2']) {
    assertInvalidQuery(t, begin(`/v1/pets?${query}`, clamp).error, `clamp ${query}`, /limit/);
  }
});

t.test('status must be available, pending or sold', async (t) => {
  for (const query of ['status=Available', 'status=SOLD', 'status=lost', 'status=', 'status', 'status=sold%20', 'status=available,sold', 'status=sold&status=sold', 'status=sold&status=pending']) {
    assertInvalidQuery(t, begin(`/v1/pets?${query}`).error, query, /status/);
  }
  // Clamp applies to limit only.
  assertInvalidQuery(t, begin('/v1/pets?status=lost', { outOfRange: 'clamp' }).error, 'clamp status=lost', /status/);
});

t.test('unknown parameters: dropped by default, 400 with unknownParams reject', async (t) => {
  const dropped: [string, string][] = [
    ['page=2', 'limit=20'],
    ['limit=5&page=2&x=%3Cscript%3E', 'limit=5'],
    ['offset=10&status=sold&cursor=abc', 'limit=20&status=sold'],
    ['Limit=500', 'limit=20'],
    ['limit=5&status=sold&status%3D=x', 'limit=5&status=sold'],
  ];
  for (const [query, upstream] of dropped) {
    const { ex, error } = begin(`/v1/pets?${query}`);
    t.equal(error, undefined, query);
    t.equal(ex.upstreamQuery, upstream, `${query}: upstream query`);
  }
  const reject = { unknownParams: 'reject' } as const;
  for (const [query, name] of [
    ['page=2', 'page'],
    ['limit=5&page=2', 'page'],
    ['Limit=5', 'Limit'],
    ['status=sold&cursor=abc', 'cursor'],
  ]) {
    assertInvalidQuery(t, begin(`/v1/pets?${query}`, reject).error, `reject ${query}`, new RegExp(`'${name}'`));
  }
  for (const query of ['', 'limit=5', 'status=sold', 'limit=5&status=sold']) {
    t.equal(begin(`/v1/pets?${query}`, reject).error, undefined, `reject passes ${query}`);
  }
});

t.test('other operations are not touched', async (t) => {
  for (const [method, target] of [
    ['GET', '/v1/pets/1?limit=abc&status=lost'],
    ['POST', '/v1/pets?limit=0'],
    ['GET', '/v2/pets?limit=0'],
  ] as const) {
    const { ex, error } = begin(target, { unknownParams: 'reject' }, method);
    t.equal(error, undefined, `${method} ${target}`);
    t.equal(listOf(ex), undefined, `${method} ${target}: no list`);
    t.equal(ex.upstreamQuery, '', `${method} ${target}: no query reaches the upstream`);
  }
});

// ---- response enforcement ----

const JSON_HEADERS = { 'content-type': 'application/json', 'x-upstream': 'kept' };
function response(body: string | Buffer, status = 200, truncated = false): ResponseBody {
  return { status, headers: { ...JSON_HEADERS }, body: typeof body === 'string' ? Buffer.from(body) : body, truncated };
}

function respond(target: string, res: ResponseBody, config: Partial<ListPetsConfig> = {}, env: PolicyEnv = { env: {} }): ResponseBody {
  const chain = new Chain([policy(config, env)]);
  const { ex, error } = chain.begin({ method: 'GET', target, headers: {} });
  if (error !== undefined) throw error;
  return chain.finishResponse(ex, res);
}

function assertViolation(t: TapTest, res: ResponseBody, name: string): void {
  t.equal(res.status, 502, `${name}: 502`);
  t.strictSame(res.headers, { 'content-type': ERROR_CONTENT_TYPE }, `${name}: only the Error content type`);
  t.equal(res.truncated, false, `${name}: not truncated`);
  const body = JSON.parse(res.body.toString()) as Record<string, unknown>;
  t.strictSame(Object.keys(body), ['code', 'message', 'status'], `${name}: Error shape`);
  t.equal(body.code, 'upstream_contract_violation', `${name}: code`);
  t.equal(body.status, 502, `${name}: status field`);
}

const pet = (id: number | string, status?: string): string => `{"id":${id},"name":"p${id}","categoryId":1${status === undefined ? '' : `,"status":"${status}"`}}`;

t.test('wantsResponseBody: listPets 2xx only, while enforcement is on', async (t) => {
  const p = policy();
  const chain = new Chain([p]);
  const list = chain.begin({ method: 'GET', target: '/v1/pets?limit=2', headers: {} }).ex;
  const get = chain.begin({ method: 'GET', target: '/v1/pets/1', headers: {} }).ex;
  const bad = chain.begin({ method: 'GET', target: '/v1/pets?limit=0', headers: {} }).ex;
  for (const status of [200, 201, 204, 299]) t.equal(p.wantsResponseBody?.(list, { status, headers: {} }), true, `listPets ${status}`);
  for (const status of [100, 304, 400, 404, 500, 503]) t.equal(p.wantsResponseBody?.(list, { status, headers: {} }), false, `listPets ${status}`);
  t.equal(p.wantsResponseBody?.(get, { status: 200, headers: {} }), false, 'getPet');
  t.equal(p.wantsResponseBody?.(bad, { status: 200, headers: {} }), false, 'a denied listPets has no list');
  const off = policy({ enforceResponse: false });
  const offEx = new Chain([off]).begin({ method: 'GET', target: '/v1/pets?limit=2', headers: {} }).ex;
  t.equal(off.wantsResponseBody?.(offEx, { status: 200, headers: {} }), false, 'enforceResponse false');
  t.equal(new Chain([p]).wantsResponseBody(list, { status: 200, headers: {} }), true, 'through the chain');
});

t.test('never more than limit animals', async (t) => {
  const five = `[${[1, 2, 3, 4, 5].map((i) => pet(i)).join(',')}]`;
  const r = respond('/v1/pets?limit=2', response(five));
  t.equal(r.status, 200);
  t.equal(r.body.toString(), `[${pet(1)},${pet(2)}]`);
  t.strictSame(r.headers, JSON_HEADERS, 'upstream headers kept (the exchange drops content-length, the front frames the new body)');
  t.equal(r.truncated, false);
  // Default limit 20: an upstream that ignores it is cut at 20.
  const many = `[${Array.from({ length: 30 }, (_, i) => pet(i + 1)).join(',')}]`;
  const d = JSON.parse(respond('/v1/pets', response(many)).body.toString()) as unknown[];
  t.equal(d.length, 20, 'default limit 20');
  const c = JSON.parse(respond('/v1/pets?limit=500', response(`[${Array.from({ length: 120 }, (_, i) => pet(i + 1)).join(',')}]`), { outOfRange: 'clamp' }).body.toString()) as unknown[];
  t.equal(c.length, 100, 'clamped limit 100');
});

t.test('never an animal whose status differs from the filter', async (t) => {
  const body = `[${pet(1, 'available')},${pet(2, 'sold')},${pet(3)},${pet(4, 'sold')},${pet(5, 'pending')},${pet(6, 'sold')}]`;
  t.equal(respond('/v1/pets?status=sold', response(body)).body.toString(), `[${pet(2, 'sold')},${pet(4, 'sold')},${pet(6, 'sold')}]`);
  t.equal(respond('/v1/pets?status=sold&limit=2', response(body)).body.toString(), `[${pet(2, 'sold')},${pet(4, 'sold')}]`);
  t.equal(respond('/v1/pets?status=pending', response(body)).body.toString(), `[${pet(5, 'pending')}]`);
  t.equal(respond('/v1/pets?status=available&limit=1', response(`[${pet(3)},${pet(2, 'sold')}]`)).body.toString(), '[]');
});

t.test('lossless: kept animals are the original bytes', async (t) => {
  const big = '{"id":9007199254740993,"name":"Big","categoryId":9223372036854775807,"status":"sold"}';
  const other = '{"id":9007199254740995,"name":"Other","categoryId":-9223372036854775808,"status":"available"}';
  const r = respond('/v1/pets?status=sold', response(`[${other},${big},${other}]`));
  t.ok(r.body.equals(Buffer.from(`[${big}]`)), 'byte-exact');
  t.match(r.body.toString(), /9007199254740993/);
  t.match(r.body.toString(), /9223372036854775807/);
  const l = respond('/v1/pets?limit=1', response(`[${big},${other}]`));
  t.ok(l.body.equals(Buffer.from(`[${big}]`)), 'byte-exact by limit');
});

t.test('nothing to remove: the original response object and Buffer', async (t) => {
  for (const [target, body] of [
    ['/v1/pets', '[]'],
    ['/v1/pets?limit=2', `[${pet(1)},${pet(2)}]`],
    ['/v1/pets?status=sold', ` [ ${pet('9223372036854775807', 'sold')} ]\n`],
  ] as const) {
    const res = response(body);
    const buf = res.body;
    const r = respond(target, res);
    t.equal(r, res, `${target} ${body}: same response`);
    t.equal(r.body, buf, `${target} ${body}: same Buffer`);
  }
});

t.test('a body that is not a JSON array: 502 upstream_contract_violation', async (t) => {
  for (const body of ['', '{}', '{"pets":[]}', 'null', '<html><body>oops</body></html>', '[{"id":1}', '[{"id":1},]', '[] []', `[${pet(1)}]x`]) {
    assertViolation(t, respond('/v1/pets', response(body)), JSON.stringify(body));
  }
});

t.test('truncated buffers: fine when the cut is before the truncation point, else 502', async (t) => {
  const full = `[${[1, 2, 3, 4, 5].map((i) => pet(i, i % 2 === 0 ? 'sold' : 'available')).join(',')}]`;
  const cut = (n: number) => response(Buffer.from(full.slice(0, n)), 200, true);
  // limit 2: the first two animals and the comma after them suffice.
  const needed = full.indexOf(pet(3, 'available'));
  const ok = respond('/v1/pets?limit=2', cut(needed));
  t.equal(ok.status, 200);
  t.equal(ok.body.toString(), `[${pet(1, 'available')},${pet(2, 'sold')}]`);
  t.equal(ok.truncated, false, 'the rewritten body is complete');
  t.equal(respond('/v1/pets?limit=2', cut(full.length - 3)).body.toString(), `[${pet(1, 'available')},${pet(2, 'sold')}]`);
  t.equal(respond('/v1/pets?status=sold&limit=1', cut(needed)).body.toString(), `[${pet(2, 'sold')}]`);
  // The cut is not before the truncation point.
  assertViolation(t, respond('/v1/pets?limit=2', cut(needed - 2)), 'cut inside the separator');
  assertViolation(t, respond('/v1/pets?limit=3', cut(needed + 5)), 'cut inside the third animal');
  assertViolation(t, respond('/v1/pets?status=sold', cut(full.length - 1)), 'status filter needs every element');
  assertViolation(t, respond('/v1/pets?limit=20', cut(full.length - 1)), 'fewer animals than the limit');
  // A complete-looking array in a truncated buffer: what follows is unknown.
  assertViolation(t, respond('/v1/pets', response(full, 200, true)), 'truncated flag with a complete array');
  assertViolation(t, respond('/v1/pets', response('[]', 200, true)), 'truncated empty array');
});

t.test('non-2xx and enforcement off pass untouched', async (t) => {
  const body = `[${pet(1)},${pet(2)},${pet(3)}]`;
  for (const status of [400, 404, 500, 502]) {
    const res = response('<html>', status);
    t.equal(respond('/v1/pets?limit=1', res), res, `${status}`);
  }
  const res = response(body);
  t.equal(respond('/v1/pets?limit=1', res, { enforceResponse: false }), res, 'enforceResponse false');
  const bad = response('not json');
  t.equal(respond('/v1/pets?limit=1', bad, { enforceResponse: false }), bad, 'enforceResponse false: no 502 either');
  const get = response(body);
  const chain = new Chain([policy()]);
  const { ex } = chain.begin({ method: 'GET', target: '/v1/pets/1', headers: {} });
  t.equal(chain.finishResponse(ex, get), get, 'getPet is not a list');
});

t.test('operator log: enforcement sampled (1st, 10th, 100th), scan failures logged', async (t) => {
  const log = fakeLog();
  const chain = new Chain([policy({}, { env: {}, log })]);
  const body = `[${pet(1)},${pet(2)}]`;
  for (let i = 0; i < 12; i++) {
    const { ex } = chain.begin({ method: 'GET', target: '/v1/pets?limit=1', headers: {} });
    t.equal(chain.finishResponse(ex, response(body)).body.toString(), `[${pet(1)}]`);
  }
  t.equal(log.lines.length, 2, 'logged on the 1st and the 10th time');
  t.match(log.lines[0]?.fields, { policy: 'list-pets', limit: 1, times: 1 });
  t.match(log.lines[1]?.fields, { policy: 'list-pets', times: 10 });
  const { ex } = chain.begin({ method: 'GET', target: '/v1/pets', headers: {} });
  chain.finishResponse(ex, response('{"secret":"x"}'));
  t.equal(log.lines.length, 3);
  t.match(log.lines[2]?.fields, { policy: 'list-pets', reason: 'not a JSON array' });
});

t.test('in the chain after upstream-errors: an upstream error is not a list', async (t) => {
  const chain = new Chain([upstreamErrors.create(defaults()['upstream-errors'], { env: {} }), policy()]);
  const { ex } = chain.begin({ method: 'GET', target: '/v1/pets?limit=1', headers: {} });
  const err = chain.finishResponse(ex, response('<html>Internal</html>', 500));
  t.equal(err.status, 500);
  t.equal(JSON.parse(err.body.toString()).code, 'upstream_error');
  const ok = chain.finishResponse(ex, response(`[${pet(1)},${pet(2)}]`));
  t.equal(ok.body.toString(), `[${pet(1)}]`);
});

t.test('access-log names: a filter as <name>Filter, a name the line writes itself as <name>Param', async (t) => {
  const names = declaresOf(['limit', 'status', 'level', 'consumer', 'page[size]', 'limit'], new Set(['status'])).logFields?.map((f) => f.name);
  t.strictSame(names, ['limit', 'statusFilter', 'levelParam', 'consumerParam', 'page[size]'], 'each once, none shadowing a field of the line');
});
