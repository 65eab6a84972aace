/**
 * The `response-contract` policy (off / monitor / enforce) on 2xx upstream answers: listPets 200
 * Pets, createPet 201 Pet, getPet 200 Pet, application/json, every int64 exact. And the Chain's
 * response phases: run in policy order; wantsResponseBody when any policy wants the body.
 */
import t from 'tap';
import { parsePolicy } from '../../src/config/load.js';
import { ERROR_CONTENT_TYPE } from '../../src/core/errors.js';
import { Chain } from '../helpers/chain.js';
import { LIST_CHECK as PETS_CHECK } from '../../src/api/scan/index.js';
import type { Exchange, Policy, PolicyEnv, ResponseBody, UpstreamResponse } from '../../src/core/policy.js';
import { listPets } from '../../src/policies/list-pets/index.js';
import { responseContract, type ResponseContractConfig } from '../../src/policies/response-contract/index.js';
import { upstreamErrors } from '../../src/policies/upstream-errors/index.js';
import { fakeLog } from '../helpers/log.js';

type TapTest = Parameters<Parameters<typeof t.test>[0]>[0];
type Op = 'listPets' | 'createPet' | 'getPet';
type Mode = ResponseContractConfig['mode'];

const REQUEST: Record<Op, { method: string; target: string }> = {
  listPets: { method: 'GET', target: '/v1/pets' },
  createPet: { method: 'POST', target: '/v1/pets' },
  getPet: { method: 'GET', target: '/v1/pets/1' },
};

type ContractPolicy = Policy & { readonly violations: number };
/** unknownFields `pass` unless given: the shape checks alone (the `drop` and `refuse` cases below). */
function contract(mode: Mode, env: PolicyEnv = { env: {} }, unknownFields: ResponseContractConfig['unknownFields'] = 'pass'): ContractPolicy {
  return responseContract.create({ mode, unknownFields }, env) as ContractPolicy;
}

function exchange(p: Policy, op: Op): Exchange {
  return new Chain([p]).begin({ ...REQUEST[op], headers: {} }).ex;
}

/** `contentType` null: no content-type header. */
function response(status: number, body: string, contentType: string | null = 'application/json', truncated = false): ResponseBody {
  const headers: ResponseBody['headers'] = { 'x-upstream': 'kept' };
  if (contentType !== null) headers['content-type'] = contentType;
  return { status, headers, body: Buffer.from(body), truncated };
}

const PET = '{"id":1,"name":"Rex","categoryId":2,"status":"available"}';
const BIG = '{"id":9223372036854775807,"name":"Big","categoryId":-9223372036854775808,"status":"sold"}';
const BIG2 = '{"id":9007199254740993,"name":"Odd","categoryId":9223372036854775806}';

/** Valid answers per operation. */
const VALID: [Op, ResponseBody][] = [
  ['listPets', response(200, '[]')],
  ['listPets', response(200, `[${PET},${BIG},${BIG2}]`)],
  ['listPets', response(200, `[${BIG}]`, 'application/json; charset=utf-8')],
  ['createPet', response(201, BIG)],
  ['createPet', response(201, '{"id":5,"name":"","categoryId":0,"status":"pending","extra":true}', 'Application/JSON')],
  ['getPet', response(200, PET)],
  ['getPet', response(200, BIG2, 'application/json;charset=UTF-8')],
];

/** Violations: [operation, response, a word the logged problem must contain]. */
const INVALID: [string, Op, ResponseBody, RegExp][] = [
  ['createPet answers 200', 'createPet', response(200, PET), /status 200/],
  ['getPet answers 201', 'getPet', response(201, PET), /status 201/],
  ['listPets answers 204', 'listPets', response(204, ''), /status 204/],
  ['text/html', 'getPet', response(200, PET, 'text/html'), /content-type/],
  ['no content-type', 'getPet', response(200, PET, null), /content-type/],
  ['application/jsonp', 'getPet', response(200, PET, 'application/jsonp'), /content-type/],
  ['problem+json', 'getPet', response(200, PET, 'application/problem+json'), /content-type/],
  ['invalid JSON', 'getPet', response(200, '{"id":1,'), /JSON/],
  ['empty body', 'createPet', response(201, ''), /JSON/],
  ['HTML body', 'listPets', response(200, '<html></html>'), /JSON/],
  ['duplicate keys', 'getPet', response(200, '{"id":1,"id":2,"name":"a","categoryId":1}'), /JSON/],
  ['truncated', 'listPets', response(200, '[]', 'application/json', true), /larger/],
  ['Pet missing id', 'getPet', response(200, '{"name":"Rex","categoryId":2}'), /id/],
  ['Pet missing name', 'createPet', response(201, '{"id":1,"categoryId":2}'), /name/],
  ['Pet missing categoryId', 'getPet', response(200, '{"id":1,"name":"Rex"}'), /categoryId/],
  ['id above int64', 'getPet', response(200, '{"id":9223372036854775808,"name":"Rex","categoryId":2}'), /\/id must be an integer within int64/],
  ['id below int64', 'getPet', response(200, '{"id":-9223372036854775809,"name":"Rex","categoryId":2}'), /\/id/],
  ['id not an integer', 'getPet', response(200, '{"id":1.5,"name":"Rex","categoryId":2}'), /\/id/],
  ['id 1.0', 'getPet', response(200, '{"id":1.0,"name":"Rex","categoryId":2}'), /\/id/],
  ['id 1e2', 'getPet', response(200, '{"id":1e2,"name":"Rex","categoryId":2}'), /\/id/],
  ['id a string', 'getPet', response(200, '{"id":"1","name":"Rex","categoryId":2}'), /\/id/],
  ['categoryId above int64', 'createPet', response(201, '{"id":1,"name":"Rex","categoryId":9223372036854775808}'), /\/categoryId/],
  ['name a number', 'getPet', response(200, '{"id":1,"name":7,"categoryId":2}'), /\/name/],
  ['status not in the enum', 'getPet', response(200, '{"id":1,"name":"Rex","categoryId":2,"status":"lost"}'), /\/status/],
  ['status null', 'getPet', response(200, '{"id":1,"name":"Rex","categoryId":2,"status":null}'), /\/status/],
  ['a Pet where Pets is due', 'listPets', response(200, PET), /array/],
  ['Pets where a Pet is due', 'getPet', response(200, `[${PET}]`), /object/],
  ['a bad element in Pets', 'listPets', response(200, `[${PET},{"id":9223372036854775808,"name":"x","categoryId":1}]`), /\/1\/id/],
  ['null', 'getPet', response(200, 'null'), /object/],
];

function assertViolation(t: TapTest, res: ResponseBody, name: string): void {
  t.equal(res.status, 502, `${name}: 502`);
  t.strictSame(res.headers, { 'content-type': ERROR_CONTENT_TYPE }, `${name}: headers`);
  t.equal(
    res.body.toString(),
    '{"code":"upstream_contract_violation","message":"The upstream service answered outside the interface.","status":502}',
    `${name}: body`,
  );
  t.equal(res.truncated, false, `${name}: not truncated`);
}

// On by default, unknown fields dropped (this test asserted `off` before).
t.test('default mode is enforce, unknown fields dropped', async (t) => {
  const r = parsePolicy('', { env: {} });
  t.ok(r.ok);
  if (r.ok) t.strictSame(r.config.policies['response-contract'], { mode: 'enforce', unknownFields: 'drop' });
  const bad = parsePolicy('policies:\n  response-contract:\n    mode: strict\n', { env: {} });
  t.strictSame(bad.ok ? [] : bad.problems, [{ path: '$.policies["response-contract"].mode', message: 'must be one of: off, monitor, enforce' }]);
});

t.test('off: no body is read, answers pass untouched', async (t) => {
  const p = contract('off');
  for (const [name, op, res] of INVALID) {
    const ex = exchange(p, op);
    t.equal(p.wantsResponseBody?.(ex, res), false, `${name}: wantsResponseBody false`);
    t.equal(p.onResponseBody?.(ex, res), res, `${name}: same response`);
  }
  t.equal(p.violations, 0);
});

t.test('wantsResponseBody: 2xx of an operation, in monitor and enforce', async (t) => {
  for (const mode of ['monitor', 'enforce'] as const) {
    const p = contract(mode);
    for (const op of ['listPets', 'createPet', 'getPet'] as const) {
      const ex = exchange(p, op);
      for (const status of [200, 201, 204]) t.equal(p.wantsResponseBody?.(ex, { status, headers: {} }), true, `${mode} ${op} ${status}`);
      for (const status of [301, 400, 404, 500]) t.equal(p.wantsResponseBody?.(ex, { status, headers: {} }), false, `${mode} ${op} ${status}`);
    }
    const unknown = new Chain([p]).begin({ method: 'GET', target: '/v2/nope', headers: {} }).ex;
    t.equal(p.wantsResponseBody?.(unknown, { status: 200, headers: {} }), false, `${mode}: no operation`);
  }
});

t.test('valid answers pass in every mode, as the same object (big ints exact)', async (t) => {
  for (const mode of ['monitor', 'enforce'] as const) {
    const log = fakeLog();
    const p = contract(mode, { env: {}, log });
    for (const [op, res] of VALID) {
      const out = p.onResponseBody?.(exchange(p, op), res);
      t.equal(out, res, `${mode} ${op} ${res.body.toString()}`);
    }
    t.equal(p.violations, 0, `${mode}: no violations`);
    t.equal(log.lines.length, 0, `${mode}: nothing logged`);
  }
});

t.test('enforce: each violation becomes 502 upstream_contract_violation', async (t) => {
  const log = fakeLog();
  const p = contract('enforce', { env: {}, log });
  for (const [name, op, res] of INVALID) assertViolation(t, p.onResponseBody!(exchange(p, op), res), name);
  t.equal(p.violations, INVALID.length, 'every violation counted');
  t.equal(log.lines.length, INVALID.length, 'every violation logged');
  INVALID.forEach(([name, op, , problem], i) => {
    const fields = log.lines[i]!.fields;
    t.match(fields, { policy: 'response-contract', operation: op, mode: 'enforce', violations: i + 1 }, `${name}: log fields`);
    t.ok(Array.isArray(fields.problems) && (fields.problems as string[]).some((s) => problem.test(s)), `${name}: problem ${problem} in ${JSON.stringify(fields.problems)}`);
  });
});

t.test('monitor: violations counted and logged, the answer unchanged', async (t) => {
  const log = fakeLog();
  const p = contract('monitor', { env: {}, log });
  for (const [name, op, res] of INVALID) {
    const body = Buffer.from(res.body);
    const out = p.onResponseBody!(exchange(p, op), res);
    t.equal(out, res, `${name}: same response`);
    t.ok(out.body.equals(body), `${name}: same bytes`);
  }
  t.equal(p.violations, INVALID.length);
  t.equal(log.lines.length, INVALID.length);
  t.match(log.lines[0]!.fields, { policy: 'response-contract', mode: 'monitor', violations: 1 });
  // Valid answers do not count.
  p.onResponseBody!(exchange(p, 'getPet'), response(200, PET));
  t.equal(p.violations, INVALID.length);
  // Counters are per policy instance.
  t.equal(contract('monitor').violations, 0);
});

t.test('at most five problems are logged per answer', async (t) => {
  const log = fakeLog();
  const p = contract('monitor', { env: {}, log });
  const bad = `[${Array.from({ length: 10 }, () => '{"id":"x","name":1,"categoryId":"y","status":"z"}').join(',')}]`;
  p.onResponseBody!(exchange(p, 'listPets'), response(200, bad));
  t.equal((log.lines[0]!.fields.problems as string[]).length, 5);
});

t.test('unknownFields drop (default): the interface\'s fields kept, int64 exact, nothing else', async (t) => {
  const log = fakeLog();
  const p = contract('enforce', { env: {}, log }, 'drop');
  const inner = '{"id":9223372036854775807,"name":"Rex","categoryId":2,"status":"sold","internalNote":"vip","owner":{"ssn":"x"}}';
  const one = p.onResponseBody!(exchange(p, 'getPet'), response(200, inner));
  t.equal(one.status, 200);
  t.equal(one.body.toString(), '{"id":9223372036854775807,"name":"Rex","categoryId":2,"status":"sold"}');
  const list = p.onResponseBody!(exchange(p, 'listPets'), response(200, `[${PET},${inner}]`));
  t.equal(list.body.toString(), `[${PET},{"id":9223372036854775807,"name":"Rex","categoryId":2,"status":"sold"}]`);
  const created = p.onResponseBody!(exchange(p, 'createPet'), response(201, '{"id":3,"name":"a","categoryId":1,"_rev":"9"}'));
  t.equal(created.body.toString(), '{"id":3,"name":"a","categoryId":1}');
  const clean = response(200, PET);
  t.equal(p.onResponseBody!(exchange(p, 'getPet'), clean), clean, 'a clean answer is the same object, not re-serialised');
  t.equal(p.violations, 0, 'dropping is not a violation');
  // Default of a config built in code without the field.
  const absent = responseContract.create({ mode: 'enforce' } as ResponseContractConfig, { env: {} }) as ContractPolicy;
  t.equal(absent.onResponseBody!(exchange(absent, 'getPet'), response(200, inner)).body.toString(), '{"id":9223372036854775807,"name":"Rex","categoryId":2,"status":"sold"}');
});

t.test('unknownFields refuse: an unknown field is a violation (502 under enforce), its value never logged', async (t) => {
  const log = fakeLog();
  const p = contract('enforce', { env: {}, log }, 'refuse');
  assertViolation(t, p.onResponseBody!(exchange(p, 'getPet'), response(200, '{"id":1,"name":"Rex","categoryId":2,"internalNote":"secret-note"}')), 'refuse');
  t.strictSame(log.lines[0]!.fields.problems, ["unknown field 'internalNote'"]);
  t.notMatch(JSON.stringify(log.lines), /secret-note/);
  const m = contract('monitor', { env: {} }, 'refuse');
  const res = response(200, '{"id":1,"name":"Rex","categoryId":2,"x":1}');
  t.equal(m.onResponseBody!(exchange(m, 'getPet'), res), res, 'monitor passes it on');
  t.equal(m.violations, 1);
});

t.test('non-2xx answers are not this policy\'s business', async (t) => {
  for (const mode of ['monitor', 'enforce'] as const) {
    const p = contract(mode);
    for (const status of [400, 404, 500, 302]) {
      const res = response(status, '<html>', 'text/html');
      t.equal(p.onResponseBody!(exchange(p, 'getPet'), res), res, `${mode} ${status}`);
    }
    t.equal(p.violations, 0);
  }
});

// ---- the Chain's response phases ----

function recorder(name: string, calls: string[], wants: boolean | undefined, withBody = true): Policy {
  const p: Policy = { name };
  if (wants !== undefined) {
    (p as { wantsResponseBody?: Policy['wantsResponseBody'] }).wantsResponseBody = (_ex: Exchange, _res: UpstreamResponse) => {
      calls.push(`${name}.wants`);
      return wants;
    };
  }
  if (withBody) {
    (p as { onResponseBody?: Policy['onResponseBody'] }).onResponseBody = (_ex: Exchange, res: ResponseBody) => {
      calls.push(`${name}.body(${res.body.toString()})`);
      return { ...res, body: Buffer.from(res.body.toString() + name) };
    };
  }
  return p;
}

t.test('Chain: response phases run in the policy order, each on the previous output', async (t) => {
  const calls: string[] = [];
  const chain = new Chain([recorder('a', calls, false), recorder('b', calls, undefined, false), recorder('c', calls, false), recorder('d', calls, true)]);
  const { ex } = chain.begin({ method: 'GET', target: '/v1/pets', headers: {} });
  const out = chain.finishResponse(ex, { status: 200, headers: {}, body: Buffer.from('>'), truncated: false });
  t.equal(out.body.toString(), '>acd');
  t.strictSame(calls, ['a.body(>)', 'c.body(>a)', 'd.body(>ac)']);
});

t.test('Chain: wantsResponseBody is true when any policy wants the body', async (t) => {
  const ex = new Chain([]).begin({ method: 'GET', target: '/v1/pets', headers: {} }).ex;
  const head: UpstreamResponse = { status: 200, headers: {} };
  const calls: string[] = [];
  t.equal(new Chain([]).wantsResponseBody(ex, head), false, 'no policies');
  t.equal(new Chain([recorder('a', calls, false), recorder('b', calls, false)]).wantsResponseBody(ex, head), false, 'none wants it');
  t.equal(new Chain([recorder('a', calls, false), recorder('b', calls, true)]).wantsResponseBody(ex, head), true, 'the last wants it');
  t.equal(new Chain([recorder('a', calls, true), recorder('b', calls, false)]).wantsResponseBody(ex, head), true, 'the first wants it');
  t.equal(new Chain([recorder('a', calls, undefined), recorder('b', calls, true)]).wantsResponseBody(ex, head), true, 'a policy without the hook is skipped');
});

t.test('Chain: the real policies in their order (upstream-errors, list-pets, response-contract)', async (t) => {
  const r = parsePolicy('policies:\n  response-contract:\n    mode: enforce\n', { env: {} });
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  const env: PolicyEnv = { env: {} };
  const rc = responseContract.create(r.config.policies['response-contract'], env) as ContractPolicy;
  const chain = new Chain([upstreamErrors.create(r.config.policies['upstream-errors'], env), listPets.create(r.config.policies['list-pets'], env), rc]);
  const list = chain.begin({ method: 'GET', target: '/v1/pets?limit=1', headers: {} }).ex;
  t.equal(chain.wantsResponseBody(list, { status: 200, headers: {} }), true);
  t.equal(chain.wantsResponseBody(list, { status: 500, headers: {} }), true);
  // list-pets cuts to the limit before response-contract checks what is left.
  const out = chain.finishResponse(list, response(200, `[${BIG},{"id":"bad"}]`));
  t.equal(out.status, 200);
  t.equal(out.body.toString(), `[${BIG}]`);
  // An upstream error becomes the Error shape first; response-contract leaves non-2xx alone.
  const err = chain.finishResponse(list, response(500, '<html>boom</html>', 'text/html'));
  t.equal(err.status, 500);
  t.equal(err.body.toString(), '{"code":"upstream_error","message":"The upstream service answered with an error.","status":500}');
  // A 2xx that violates the contract.
  const get = chain.begin({ method: 'GET', target: '/v1/pets/1', headers: {} }).ex;
  assertViolation(t, chain.finishResponse(get, response(200, '{"id":9223372036854775808,"name":"x","categoryId":1}')), 'getPet id above int64');
  t.equal(rc.violations, 1);
});

t.test('Chain: list-pets checks each Pet in its own pass and the contract finishes from there', async (t) => {
  const r = parsePolicy('', { env: {} });
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  const env: PolicyEnv = { env: {} };
  const chain = new Chain([listPets.create(r.config.policies['list-pets'], env), responseContract.create(r.config.policies['response-contract'], env)]);
  const begin = () => {
    const { ex, error } = chain.begin({ method: 'GET', target: '/v1/pets?limit=5', headers: {} });
    t.equal(error, undefined, 'the request passes');
    return ex;
  };
  const valid = response(200, `[${PET},${BIG},${BIG2}]`);
  const ex = begin();
  t.equal(ex.get(PETS_CHECK), 'wanted', 'the contract asked for the check on the request');
  const out = chain.finishResponse(ex, valid);
  t.equal(out.body, valid.body, 'a valid list is the very buffer received');
  const findings = ex.get(PETS_CHECK);
  t.ok(typeof findings === 'object' && findings.body === valid.body, 'list-pets handed its findings on');
  // The same outcomes as two passes: a bad Pet, and a field to drop.
  assertViolation(t, chain.finishResponse(begin(), response(200, `[${PET},{"id":9223372036854775808,"name":"x","categoryId":1}]`)), 'a bad Pet in the list');
  const dropped = chain.finishResponse(begin(), response(200, `[${PET},{"id":2,"name":"y","categoryId":3,"internalNote":"vip"}]`));
  t.equal(dropped.body.toString(), `[${PET},{"id":2,"name":"y","categoryId":3}]`);
  // With the contract off, list-pets does not check Pets (nothing asked for it).
  const off = new Chain([listPets.create(r.config.policies['list-pets'], env), responseContract.create({ mode: 'off', unknownFields: 'drop' }, env)]);
  const exOff = off.begin({ method: 'GET', target: '/v1/pets?limit=5', headers: {} }).ex;
  t.equal(off.finishResponse(exOff, valid).body, valid.body);
  t.equal(exOff.get(PETS_CHECK), undefined, 'no findings without the contract');
});
