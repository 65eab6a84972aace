/**
 * The reference backend, called in process: listPets, createPet and getPet as the interface says,
 * every error in the Error shape with `status` equal to the HTTP status.
 */
import t, { type Test } from 'tap';
import { ReferenceBackend, type BackendResponse } from '../../src/backend/service.js';
import { LIMIT_DEFAULT, LIMIT_MAX, LIMIT_MIN } from '../helpers/pet-store.js';
import { CATALOGUE } from '../../src/core/errors.js';

const MAX_ID = '9223372036854775807';

/** An answer with its body as text, to compare. */
interface Answer {
  readonly status: number;
  readonly body: string;
}
const text = (r: BackendResponse): Answer => ({ status: r.status, body: r.body.toString('utf8') });

function create(be: ReferenceBackend, body: string | undefined): Answer {
  return text(be.handle({ operation: 'createPet', query: '', body: body === undefined ? undefined : Buffer.from(body, 'utf8') }));
}
const rawList = (be: ReferenceBackend, query = '') => be.handle({ operation: 'listPets', query });
const list = (be: ReferenceBackend, query = '') => text(rawList(be, query));
const getPet = (be: ReferenceBackend, petId: string | undefined) => text(be.handle({ operation: 'getPet', query: '', petId }));

/** Asserts an Error response: the status, and a body of exactly {code, message, status} with that status. */
function assertError(t: Test, res: Answer, code: keyof typeof CATALOGUE, status: number, name: string) {
  t.equal(res.status, status, `${name}: status`);
  const body = JSON.parse(res.body) as Record<string, unknown>;
  t.strictSame(Object.keys(body), ['code', 'message', 'status'], `${name}: Error shape`);
  t.equal(body.code, code, `${name}: code`);
  t.equal(body.status, res.status, `${name}: status field equals the HTTP status`);
  t.equal(CATALOGUE[code].status, status, `${name}: catalogue status`);
  t.type(body.message, 'string');
  t.ok((body.message as string).length > 0, `${name}: a message`);
}

/** A backend with n pets, named p1..pn, statuses cycling available, pending, sold. */
function filled(n: number): ReferenceBackend {
  const be = new ReferenceBackend();
  const statuses = ['available', 'pending', 'sold'];
  for (let i = 1; i <= n; i++) {
    const res = create(be, JSON.stringify({ name: `p${i}`, categoryId: i, status: statuses[(i - 1) % 3] }));
    if (res.status !== 201) throw new Error(`setup failed: ${res.body}`);
  }
  return be;
}
const ids = (res: Answer) => (JSON.parse(res.body) as { id: number }[]).map((p) => p.id);

t.test('createPet assigns ids 1, 2, 3 and answers 201 with the Pet', async (t) => {
  const be = new ReferenceBackend();
  t.strictSame(create(be, '{"name":"Rex","categoryId":1}'), { status: 201, body: '{"id":1,"name":"Rex","categoryId":1}' });
  t.strictSame(create(be, '{"name":"Max","categoryId":2,"status":"pending"}'), { status: 201, body: '{"id":2,"name":"Max","categoryId":2,"status":"pending"}' });
  t.strictSame(create(be, '{"status":"sold","categoryId":3,"name":"Ada"}'), { status: 201, body: '{"id":3,"name":"Ada","categoryId":3,"status":"sold"}' });
  t.equal(be.store.size, 3);
  // A refused body does not use up an id.
  t.equal(create(be, '{"name":"x"}').status, 400);
  t.strictSame(create(be, '{"name":"Bo","categoryId":4}'), { status: 201, body: '{"id":4,"name":"Bo","categoryId":4}' });
});

t.test('createPet: names are re-encoded as JSON strings', async (t) => {
  const be = new ReferenceBackend();
  const res = create(be, '{"name":"a\\"b\\\\c\\u00e9\\n</script>","categoryId":1}');
  t.equal(res.status, 201);
  t.equal((JSON.parse(res.body) as { name: string }).name, 'a"b\\cé\n</script>');
});

t.test('categoryId 9223372036854775807 survives create -> get -> list byte for byte', async (t) => {
  const be = new ReferenceBackend();
  const pet = `{"id":1,"name":"Big","categoryId":${MAX_ID},"status":"available"}`;
  t.strictSame(create(be, `{"name":"Big","categoryId":${MAX_ID},"status":"available"}`), { status: 201, body: pet });
  t.strictSame(getPet(be, '1'), { status: 200, body: pet });
  t.strictSame(list(be), { status: 200, body: `[${pet}]` });
  t.strictSame(list(be, 'status=available'), { status: 200, body: `[${pet}]` });
  t.ok(list(be).body.includes(MAX_ID));
  const min = create(be, '{"name":"Small","categoryId":-9223372036854775808}');
  t.strictSame(min, { status: 201, body: '{"id":2,"name":"Small","categoryId":-9223372036854775808}' });
  t.strictSame(getPet(be, '2'), { status: 200, body: '{"id":2,"name":"Small","categoryId":-9223372036854775808}' });
});

t.test('createPet: refused bodies are 400 in the Error shape', async (t) => {
  const be = new ReferenceBackend();
  const cases: [string, string | undefined, keyof typeof CATALOGUE][] = [
    ['no body', undefined, 'malformed_json'],
    ['empty body', '', 'malformed_json'],
    ['not JSON', '{"name":', 'malformed_json'],
    ['duplicate keys', '{"name":"a","name":"b","categoryId":1}', 'malformed_json'],
    ['missing name', '{"categoryId":1}', 'invalid_body'],
    ['missing categoryId', '{"name":"Rex"}', 'invalid_body'],
    ['categoryId out of int64', '{"name":"Rex","categoryId":9223372036854775808}', 'invalid_body'],
    ['categoryId a float', '{"name":"Rex","categoryId":1.0}', 'invalid_body'],
    ['categoryId a string', '{"name":"Rex","categoryId":"1"}', 'invalid_body'],
    ['bad status', '{"name":"Rex","categoryId":1,"status":"lost"}', 'invalid_body'],
    ['id supplied', '{"id":5,"name":"Rex","categoryId":1}', 'invalid_body'],
    ['unknown field', '{"name":"Rex","categoryId":1,"colour":"red"}', 'invalid_body'],
    ['an array', '[]', 'invalid_body'],
    ['null', 'null', 'invalid_body'],
  ];
  for (const [name, body, code] of cases) assertError(t, create(be, body), code, 400, name);
  t.equal(be.store.size, 0, 'nothing stored');
  t.match(JSON.parse(create(be, '{"id":5,"name":"Rex","categoryId":1}').body).message, /id must not be sent/);
});

t.test('createPet: maxPets -> 507 store_full', async (t) => {
  const be = new ReferenceBackend({ maxPets: 2 });
  t.equal(create(be, '{"name":"a","categoryId":1}').status, 201);
  t.equal(create(be, '{"name":"b","categoryId":1}').status, 201);
  const full = create(be, '{"name":"c","categoryId":1}');
  assertError(t, full, 'store_full', 507, 'third pet');
  t.strictSame(JSON.parse(full.body), { code: 'store_full', message: 'The store cannot hold more animals.', status: 507 });
  t.equal(be.store.size, 2);
  // The stored pets are still there.
  t.equal(ids(list(be)).join(','), '1,2');
  // An invalid body on a full store is still a 400.
  assertError(t, create(be, '{}'), 'invalid_body', 400, 'invalid body on a full store');

  const none = new ReferenceBackend({ maxPets: 0 });
  assertError(t, create(none, '{"name":"a","categoryId":1}'), 'store_full', 507, 'maxPets 0');
});

t.test('listPets: default limit 20, bounds 1..100', async (t) => {
  t.equal(LIMIT_DEFAULT, 20);
  t.equal(LIMIT_MIN, 1);
  t.equal(LIMIT_MAX, 100);
  const be = filled(105);
  const cases: [string, number[] | 'bad'][] = [
    ['', range(1, 20)],
    ['limit=1', [1]],
    ['limit=2', [1, 2]],
    ['limit=20', range(1, 20)],
    ['limit=99', range(1, 99)],
    ['limit=100', range(1, 100)],
    ['limit=0', 'bad'],
    ['limit=101', 'bad'],
    ['limit=1000', 'bad'],
    ['limit=-1', 'bad'],
    ['limit=00', 'bad'],
    ['limit=99999999999999999999', 'bad'],
    ['limit=1.0', 'bad'],
    ['limit=1e1', 'bad'],
    ['limit=', 'bad'],
    ['limit', 'bad'],
    ['limit=abc', 'bad'],
    ['limit=+5', 'bad'],
    ['limit=%205', 'bad'],
    ['limit=5%20', 'bad'],
    ['limit=0x10', 'bad'],
    ['limit=1&limit=2', 'bad'],
    ['limit=5&limit=5', 'bad'],
    // Query values are form-decoded: an encoded digit is the digit, %2B a plus sign; leading zeros are read as decimal.
    ['limit=%35', [1, 2, 3, 4, 5]],
    ['limit=%2B2', [1, 2]],
    ['limit=01', [1]],
    // Unknown parameters are ignored.
    ['page=2', range(1, 20)],
    ['offset=50&limit=3', [1, 2, 3]],
  ];
  for (const [query, expected] of cases) {
    const res = list(be, query);
    if (expected === 'bad') assertError(t, res, 'invalid_query', 400, query);
    else {
      t.equal(res.status, 200, `${query}: 200`);
      t.strictSame(ids(res), expected, query);
    }
  }
  for (const q of ['limit=0', 'limit=101', 'limit=x', 'limit=1&limit=2']) t.match(JSON.parse(list(be, q).body).message, /limit/, `${q}: the message names limit`);
});

t.test('listPets: status filter', async (t) => {
  const be = filled(9); // 1 available, 2 pending, 3 sold, 4 available, ...
  be.handle({ operation: 'createPet', query: '', body: Buffer.from('{"name":"none","categoryId":1}') }); // id 10, no status
  const cases: [string, number[] | 'bad'][] = [
    ['status=available', [1, 4, 7]],
    ['status=pending', [2, 5, 8]],
    ['status=sold', [3, 6, 9]],
    ['status=sold&limit=2', [3, 6]],
    ['limit=1&status=pending', [2]],
    ['', range(1, 10)],
    ['status=Available', 'bad'],
    ['status=SOLD', 'bad'],
    ['status=lost', 'bad'],
    ['status=', 'bad'],
    ['status', 'bad'],
    ['status=sold&status=sold', 'bad'],
    ['status=sold&status=pending', 'bad'],
    ['status=sold%20', 'bad'],
    ['status=%73old', [3, 6, 9]],
    ['status=sold&limit=0', 'bad'],
  ];
  for (const [query, expected] of cases) {
    const res = list(be, query);
    if (expected === 'bad') assertError(t, res, 'invalid_query', 400, query);
    else {
      t.equal(res.status, 200, `${query}: 200`);
      t.strictSame(ids(res), expected, query);
      const pets = JSON.parse(res.body) as { status?: string }[];
      const want = new URLSearchParams(query).get('status');
      if (want !== null) t.ok(pets.every((p) => p.status === want), `${query}: only ${want}`);
    }
  }
  for (const q of ['status=lost', 'status=sold&status=sold']) t.match(JSON.parse(list(be, q).body).message, /status/, `${q}: the message names status`);
});

t.test('listPets: an empty store lists []', async (t) => {
  const be = new ReferenceBackend();
  t.strictSame(list(be), { status: 200, body: '[]' });
  t.strictSame(list(be, 'status=sold&limit=100'), { status: 200, body: '[]' });
});

t.test('getPet: by id; unknown and non-int64 ids are 404 pet_not_found', async (t) => {
  const be = filled(3);
  t.strictSame(getPet(be, '1'), { status: 200, body: '{"id":1,"name":"p1","categoryId":1,"status":"available"}' });
  t.strictSame(getPet(be, '3'), { status: 200, body: '{"id":3,"name":"p3","categoryId":3,"status":"sold"}' });
  for (const petId of [
    '4',
    '0',
    '-1',
    '-0',
    MAX_ID,
    '-9223372036854775808',
    '9223372036854775808',
    '99999999999999999999999',
    // Past 2^53, where a Number lookup rounds: still no animal.
    '9007199254740992',
    '9007199254740993',
    '01',
    '1.0',
    '1e0',
    '+1',
    ' 1',
    'abc',
    '',
    '%31',
    '..',
    undefined,
  ]) {
    const res = getPet(be, petId);
    assertError(t, res, 'pet_not_found', 404, `petId ${JSON.stringify(petId)}`);
    t.strictSame(JSON.parse(res.body), { code: 'pet_not_found', message: 'The requested animal could not be found.', status: 404 });
  }
});

t.test('every error body is the Error shape with the matching status', async (t) => {
  const be = new ReferenceBackend({ maxPets: 1 });
  create(be, '{"name":"a","categoryId":1}');
  const responses: Answer[] = [
    list(be, 'limit=0'),
    list(be, 'status=x'),
    create(be, ''),
    create(be, '{}'),
    create(be, '{"name":"b","categoryId":2}'),
    getPet(be, '2'),
  ];
  t.strictSame(
    responses.map((r) => r.status),
    [400, 400, 400, 400, 507, 404],
  );
  for (const r of responses) {
    const body = JSON.parse(r.body) as { code: keyof typeof CATALOGUE; status: number };
    t.strictSame(Object.keys(body), ['code', 'message', 'status']);
    t.equal(body.status, r.status);
    t.equal(CATALOGUE[body.code].status, r.status, body.code);
  }
});

function range(from: number, to: number): number[] {
  const out: number[] = [];
  for (let i = from; i <= to; i++) out.push(i);
  return out;
}

t.test('listPets: an encoded list is reused until the next createPet, which shows in the next list', async (t) => {
  const be = filled(3);
  const first = rawList(be, 'limit=10').body;
  t.equal(rawList(be, 'limit=10').body, first, 'the same bytes, not encoded again');
  t.not(rawList(be, 'limit=5').body, first, 'another limit is another list');
  t.not(rawList(be, 'limit=10&status=sold').body, first, 'another status is another list');
  create(be, '{"name":"new","categoryId":1,"status":"sold"}');
  const after = list(be, 'limit=10');
  t.not(rawList(be, 'limit=10').body, first, 'a create drops the kept lists');
  t.strictSame(ids(after), [1, 2, 3, 4]);
  t.strictSame(ids(list(be, 'limit=10&status=sold')).includes(4), true, 'and the status lists');
});
