/**
 * The migration lane end to end: the reference backend as legacy and a second process as next
 * (test/fixtures/next-upstream.mjs, drift injected on demand), on every engine. Shadow mode: the
 * client's answer is legacy's, and the comparison, made as the client would see each answer, finds
 * exactly the drift (int64 exact, declared noise ignored, a field the response contract drops is
 * no difference). Split: sticky per key, monotone as the percent rises on reload. Next mode: a
 * read `next` fails is answered by legacy and counted; a createPet is never repeated. Testers pick
 * a side with their header only when their key has the scope.
 */
import t from 'tap';
import { bearer, forEachEngine, request, testKey } from '../helpers/servers.js';
import { until } from '../helpers/wait.js';
import { startBackends, type Backends, type LaneGateway, startLaneGateway } from '../helpers/migration.js';

const backends: Backends = await startBackends(t);

async function get(gw: LaneGateway, path: string, key = gw.key, extra: Record<string, string> = {}) {
  return request(`${gw.url}/v1${path}`, { headers: bearer(key, extra) });
}

/** Waits until the lane has compared `n` answers of `op` (comparisons run after the answers). */
async function compared(gw: LaneGateway, op: string, n: number) {
  await until(`${n} comparisons of ${op}`, async () => {
    const r = await gw.op(op);
    return (r?.compared ?? 0) + (r?.dropped.legacy_failed ?? 0) + (r?.dropped.answer_too_large ?? 0) >= n;
  }, 5000);
  return (await gw.op(op))!;
}

async function legacyDirect(path: string) {
  return request(`${backends.legacy}${path}`);
}

forEachEngine(t, async (t, engine) => {
  const shadow = { operations: { listPets: { mode: 'shadow' }, getPet: { mode: 'shadow' } }, compare: { listOrder: 'strict' } };

  t.test('shadow: the client gets legacy\'s answer; equal answers compare equal', async (t) => {
    await backends.next.drift('none');
    const gw = await startLaneGateway(t, engine, backends, shadow);
    const list = await get(gw, '/pets?limit=10');
    t.equal(list.status, 200);
    t.equal(list.body, (await legacyDirect('/pets?limit=10')).body, 'the list is legacy\'s, byte for byte (int64 exact)');
    const one = await get(gw, '/pets/2');
    t.equal(one.status, 200);
    t.match(one.body, /"categoryId":9007199254740993/, 'the int64 passes exact');
    const missing = await get(gw, '/pets/999');
    t.equal(missing.status, 404);
    const op = await compared(gw, 'getPet', 2);
    t.equal(op.equal, 2, 'getPet: a Pet and a 404, both equal');
    t.equal(op.different, 0);
    const lp = await compared(gw, 'listPets', 1);
    t.equal(lp.equal, 1, 'listPets equal');
    t.equal(lp.routed.legacy, 1, 'counted as routed to legacy');
    t.equal(lp.latency.next.count, 1, "next's latency counted");
    t.equal(lp.latency.legacy.count, 1, "beside legacy's");
  });

  t.test('shadow: drift is found where it is, int64 exact; noise and dropped fields are not differences', async (t) => {
    const gw = await startLaneGateway(t, engine, backends, { ...shadow, compare: { ignore: ['$[*].id'], listOrder: 'strict' } });
    await backends.next.drift('rename');
    const renamed = await get(gw, '/pets/1');
    t.match(renamed.body, /"name":"Rex"/, 'the client still gets legacy\'s name');
    let op = await compared(gw, 'getPet', 1);
    t.same(op.paths.map((p) => p.path), ['$.name'], 'a renamed field: $.name');
    t.ok(op.samples.some((s) => s.path === '$.name' && s.legacy.includes('Rex') && s.next.includes('REX')), 'a sample with both values');

    await backends.next.drift('int64');
    await get(gw, '/pets/2');
    op = await compared(gw, 'getPet', 2);
    t.ok(op.paths.some((p) => p.path === '$.categoryId'), '9007199254740993 is not 9007199254740992');

    await backends.next.drift('extra');
    await get(gw, '/pets/3');
    op = await compared(gw, 'getPet', 3);
    t.equal(op.equal, 1, 'an extra field the response contract drops is no difference');

    await backends.next.drift('violate');
    await get(gw, '/pets/3');
    op = await compared(gw, 'getPet', 4);
    t.ok(op.violations.length > 0 && op.violations[0]!.rule.includes('status'), `next's violation counted: ${JSON.stringify(op.violations)}`);
    t.ok(op.paths.some((p) => p.path === 'status'), 'and the client would have got a 502: status differs');

    await backends.next.drift('reorder');
    await get(gw, '/pets?limit=10');
    const lp = await compared(gw, 'listPets', 1);
    t.equal(lp.different, 1, 'listOrder strict: a reversed list differs');
    t.same(await gw.reload({ ...shadow, compare: { listOrder: 'ignore' } }), [], 'reloaded with listOrder ignore');
    await get(gw, '/pets?limit=10');
    const lp2 = await compared(gw, 'listPets', 2);
    t.equal(lp2.equal, 1, 'listOrder ignore: the same list in another order is equal');
    await backends.next.drift('none');
  });

  t.test('shadow: a createPet is not copied unless next is a sandbox', async (t) => {
    const gw = await startLaneGateway(t, engine, backends, { operations: { createPet: { mode: 'shadow' } } });
    const before = (await backends.next.stats()).byMethod.POST ?? 0;
    const made = await request(`${gw.url}/v1/pets`, { method: 'POST', headers: bearer(gw.key, { 'content-type': 'application/json' }), body: '{"name":"Zed","categoryId":5}' });
    t.equal(made.status, 201);
    const op = await gw.op('createPet');
    t.equal(op?.dropped.method, 1, 'dropped and counted: method');
    t.equal((await backends.next.stats()).byMethod.POST ?? 0, before, 'next never saw it');
    // The same animal in next too: the two stores stay alike for the next tests.
    t.equal((await request(`${backends.next.url}/pets`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"Zed","categoryId":5}' })).status, 201);
  });

  t.test('next mode: a read next fails is answered by legacy and counted; a createPet is not repeated', async (t) => {
    const gw = await startLaneGateway(t, engine, backends, { operations: { getPet: { mode: 'next' }, createPet: { mode: 'next' } }, next: { url: backends.next.url, timeouts: { headersMs: 300 } } });
    await backends.next.drift('rename');
    t.match((await get(gw, '/pets/1')).body, /"name":"REX"/, 'next answers');
    for (const [kind, reason] of [['reset', 'reset'], ['error500', 'server_error'], ['violate', 'contract'], ['hang', 'timeout']] as const) {
      await backends.next.drift(kind);
      const res = await get(gw, '/pets/1');
      t.equal(res.status, 200, `${kind}: answered`);
      t.match(res.body, /"name":"Rex"/, `${kind}: by legacy`);
      t.equal((await gw.op('getPet'))?.fallbacks[reason], 1, `${kind}: fallback counted as ${reason}`);
    }
    await backends.next.drift('reset');
    const legacyCount = ((await legacyDirect('/pets?limit=100')).json as unknown[]).length;
    const made = await request(`${gw.url}/v1/pets`, { method: 'POST', headers: bearer(gw.key, { 'content-type': 'application/json' }), body: '{"name":"Once","categoryId":5}' });
    t.equal(made.status, 502, 'a createPet next reset is a 502, not repeated');
    t.equal(((await legacyDirect('/pets?limit=100')).json as unknown[]).length, legacyCount, 'legacy created nothing');
    await backends.next.drift('none');
  });
});

// parity: the side is the lane's choice, made above every transport (src/migration/side.ts); the engines' part is covered above
t.test('split: each key on one side every time, the share within binomial bounds, monotone on reload', async (t) => {
  const keys = Array.from({ length: 200 }, () => testKey());
  const gw = await startLaneGateway(t, 'undici', backends, { operations: { getPet: { mode: 'split', percent: 30 } } }, {}, keys.join(','));
  await backends.next.drift('rename');
  const sideOf = async (key: string) => ((await get(gw, '/pets/1', key)).body.includes('"REX"') ? 'next' : 'legacy');
  const first: string[] = [];
  for (const key of keys) first.push(await sideOf(key));
  for (const [i, key] of keys.slice(0, 40).entries()) t.equal(await sideOf(key), first[i], `key ${i} stays on ${first[i]}`);
  const onNext = first.filter((s) => s === 'next').length;
  // n = 200, p = 0.3: mean 60, sd 6.5; 4.5 sd either side.
  t.ok(onNext >= 31 && onNext <= 89, `${onNext} of 200 keys on next at 30%`);
  t.same(await gw.reload({ operations: { getPet: { mode: 'split', percent: 60 } } }), [], 'reloaded at 60%');
  const second: string[] = [];
  for (const key of keys) second.push(await sideOf(key));
  t.same(first.flatMap((s, i) => (s === 'next' && second[i] !== 'next' ? [i] : [])), [], 'no key moved back to legacy');
  t.ok(second.filter((s) => s === 'next').length > onNext, 'more keys on next');
  await backends.next.drift('none');
});

// parity: the tester's pick is read from the exchange by the lane, above every transport; the engines' part is covered above
t.test('testers pick a side with the header only when their key has the scope', async (t) => {
  const tester = testKey();
  const plain = testKey();
  const { hashKey } = await import('../../src/policies/auth/keys.js');
  const gw = await startLaneGateway(t, 'undici', backends, { tester: { header: 'x-side', scope: 'qa' } }, { policies: { auth: { keysFromEnv: null, keys: [{ id: 'tester', hash: hashKey(tester), scopes: ['qa'] }, { id: 'plain', hash: hashKey(plain) }] } } });
  await backends.next.drift('rename');
  t.match((await get(gw, '/pets/1', tester, { 'x-side': 'next' })).body, /"REX"/, 'the tester gets next');
  t.match((await get(gw, '/pets/1', tester)).body, /"Rex"/, 'without the header: legacy (the operation is legacy\'s)');
  t.match((await get(gw, '/pets/1', plain, { 'x-side': 'next' })).body, /"Rex"/, 'a key without the scope: the header is ignored');
  await backends.next.drift('none');
});
