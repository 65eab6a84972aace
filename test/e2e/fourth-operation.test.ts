/**
 * A fourth operation with no code change: a copy of the shipped interface document with the store
 * area's listOrders (GET /store/orders: bearer auth, `limit` 1..50 default 10, a list of Order with
 * an int64 `id`, an int64 `petId`, an int32 `quantity` and a `status` enum, cut to `limit`) named
 * by the policy file's `interface:`, served by a separate upstream on 127.0.0.1. The gateway, on
 * every engine, enforces it as it enforces listPets: 401 without a key, 400 for a `limit` out of
 * range, the list cut to `limit`, a missing required field or an unknown enum value 502
 * upstream_contract_violation, an int64 above 2^53 byte-exact, every error in the Error shape, and
 * the record the access log and metrics read labelled with the operation and its route.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse, stringify } from 'yaml';
import { assertError } from '../helpers/assert.js';
import { bearer, forEachEngine, PROJECT_ROOT, request, sendJson, startGateway, startStubUpstream, tempDir } from '../helpers/servers.js';
import type { ExchangeRecord } from '../../src/core/record.js';

/** The shipped document with listOrders added, as an operator would write it. */
function documentWithOrders(): unknown {
  const doc = parse(readFileSync(join(PROJECT_ROOT, 'openapi', 'pet-store.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
  doc.paths!['/store/orders'] = {
    get: {
      operationId: 'listOrders',
      summary: 'Lists orders of the store.',
      parameters: [{ name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 50, default: 10 } }],
      'x-list-limit': 'limit',
      responses: {
        '200': { description: 'Success.', content: { 'application/json': { schema: { type: 'array', items: { $ref: '#/components/schemas/Order' } } } } },
        '401': { $ref: '#/components/responses/Unauthorized' },
      },
    },
  };
  (doc.components!.schemas as Record<string, unknown>).Order = {
    type: 'object',
    required: ['id', 'petId', 'quantity', 'status'],
    properties: {
      id: { type: 'integer', format: 'int64' },
      petId: { type: 'integer', format: 'int64' },
      quantity: { type: 'integer', format: 'int32' },
      status: { type: 'string', enum: ['placed', 'approved', 'delivered'] },
    },
  };
  return doc;
}

const BIG = '9223372036854775807'; // 2^63 - 1: far above 2^53, exact only as text

function order(i: number): string {
  return `{"id":${i === 0 ? BIG : i},"petId":${i + 100},"quantity":${i + 1},"status":"placed"}`;
}

/** What the upstream answers listOrders with (n: how many orders), set per test. */
let answer = (n: number): string => `[${Array.from({ length: n }, (_, i) => order(i)).join(',')}]`;

forEachEngine(t, async (t, engine) => {
  const dir = tempDir(t, 'fourth-operation');
  const docPath = join(dir, 'orders.yaml');
  writeFileSync(docPath, stringify(documentWithOrders()));
  const upstream = await startStubUpstream(t, (req, res) => {
    if (req.url.startsWith('/v1/store/orders')) return sendJson(res, 200, answer(15));
    if (req.url.startsWith('/v1/pets')) return sendJson(res, 200, '[{"id":1,"name":"Rex","categoryId":2}]');
    sendJson(res, 404, { code: 'not_found', message: 'no', status: 404 });
  });
  const records: ExchangeRecord[] = [];
  const gw = await startGateway(t, { upstream: { url: `${upstream.origin}/v1` }, interface: docPath }, { engine, observer: { onEnd: (r) => records.push(r) } });
  const orders = (query = '', headers: Record<string, string | number> = bearer(gw.key)) => request(`${gw.url}/v1/store/orders${query}`, { headers });
  const lastUpstream = () => upstream.requests.at(-1)?.url;

  t.test('401 without a key, in the Error shape', async (t) => {
    assertError(t, await orders('', {}), 401, 'missing_api_key');
  });

  t.test('400 for a limit outside 1..50, naming the bound; nothing reaches the upstream', async (t) => {
    const before = upstream.requests.length;
    assertError(t, await orders('?limit=0'), 400, 'invalid_query', { message: 'limit must be at least 1' });
    assertError(t, await orders('?limit=51'), 400, 'invalid_query', { message: 'limit must be at most 50' });
    assertError(t, await orders('?limit=ten'), 400, 'invalid_query', { message: 'limit must be an integer from 1 to 50' });
    t.equal(upstream.requests.length, before, 'the upstream was not called');
  });

  t.test('the list is cut to limit (default 10), the upstream asked with the limit applied', async (t) => {
    answer = (n) => `[${Array.from({ length: n }, (_, i) => order(i)).join(',')}]`;
    const def = await orders();
    t.equal(def.status, 200);
    t.equal((JSON.parse(def.body) as unknown[]).length, 10, '10 of the 15 the upstream sent');
    t.equal(lastUpstream(), '/v1/store/orders?limit=10', 'the default reaches the upstream');
    const three = await orders('?limit=3&debug=1');
    t.equal((JSON.parse(three.body) as unknown[]).length, 3);
    t.equal(lastUpstream(), '/v1/store/orders?limit=3', 'an unknown parameter is not forwarded');
    t.equal(three.body, `[${order(0)},${order(1)},${order(2)}]`, 'the kept items are the upstream bytes: the int64 above 2^53 exact');
  });

  t.test('502 upstream_contract_violation for a missing required field, an unknown enum value, an int32 overflow', async (t) => {
    const bad = [
      ['missing quantity', '[{"id":1,"petId":2,"status":"placed"}]'],
      ['unknown status', '[{"id":1,"petId":2,"quantity":1,"status":"lost"}]'],
      ['quantity beyond int32', '[{"id":1,"petId":2,"quantity":2147483648,"status":"placed"}]'],
      ['an id that is no int64', '[{"id":9223372036854775808,"petId":2,"quantity":1,"status":"placed"}]'],
      ['not a list', '{"id":1,"petId":2,"quantity":1,"status":"placed"}'],
    ] as const;
    for (const [name, body] of bad) {
      answer = () => body;
      assertError(t, await orders('?limit=5'), 502, 'upstream_contract_violation', { message: 'any' });
      t.pass(name);
    }
    answer = (n) => `[${Array.from({ length: n }, (_, i) => order(i)).join(',')}]`;
  });

  t.test('405 with Allow for another method on the path; the pet store operations unchanged', async (t) => {
    const post = await request(`${gw.url}/v1/store/orders`, { method: 'POST', headers: bearer(gw.key, { 'content-type': 'application/json' }), body: '{}' });
    assertError(t, post, 405, 'method_not_allowed', { headers: { allow: 'GET' } });
    const pets = await request(`${gw.url}/v1/pets?limit=2`, { headers: bearer(gw.key) });
    t.equal(pets.status, 200);
    t.equal(pets.body, '[{"id":1,"name":"Rex","categoryId":2}]');
  });

  t.test('the record of each request (access log, metrics) names the operation and its route', async (t) => {
    await orders('?limit=2');
    const r = [...records].reverse().find((x) => x.operation === 'listOrders');
    t.ok(r, 'a record of listOrders');
    t.equal(r?.route, '/v1/store/orders');
    t.equal(r?.status, 200);
    const fields = JSON.parse(JSON.stringify(r?.facts)) as Record<string, unknown>;
    t.equal(fields.limit, '2', 'the applied limit is a declared access-log field');
  });
});
