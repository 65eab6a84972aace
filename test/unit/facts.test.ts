/**
 * Per-request facts (src/core/facts.ts): typed slots owned by the module that creates them, stored
 * in the exchange itself; what policies declare for observers, gathered by the chain and written
 * by the access log without it knowing the policy. No sockets.
 */
import { inspect } from 'node:util';
import { pino } from 'pino';
import t from 'tap';
import { Chain } from '../helpers/chain.js';
import { DeclaredFacts, declaredValues, Facts, NO_FACTS, slot, type Slot } from '../../src/core/facts.js';
import type { Exchange, Policy } from '../../src/core/policy.js';
import { AccessLog } from '../../src/ops/access-log.js';
import { auth, hashKey } from '../../src/policies/auth/index.js';
import { CONSUMER, KEY_ID } from '../../src/policies/auth/facts.js';
import { listPets } from '../../src/policies/list-pets/index.js';
import { LIMIT, STATUS } from '../helpers/pet-store.js';
import { record } from '../helpers/record.js';

const HEAD = { method: 'GET', target: '/v1/pets?limit=7&status=sold', headers: {} };

t.test('a slot holds its own value, typed; unset is undefined; undefined clears', async (t) => {
  const NAME = slot<string>('name');
  const COUNT = slot<number>('count');
  const facts = new Facts();
  t.equal(facts.get(NAME), undefined, 'nothing set');
  facts.set(NAME, 'a');
  facts.set(COUNT, 3);
  const name: string | undefined = facts.get(NAME);
  const count: number | undefined = facts.get(COUNT);
  t.equal(name, 'a');
  t.equal(count, 3);
  facts.set(NAME, undefined);
  t.equal(facts.get(NAME), undefined, 'cleared');
  t.equal(facts.get(COUNT), 3, 'the other slot kept');
});

t.test('slots are distinct by identity, not name; numbered in creation order', async (t) => {
  const a = slot<string>('same');
  const b = slot<string>('same');
  t.equal(b.index, a.index + 1, 'the next number');
  const facts = new Facts();
  facts.set(a, 'first');
  t.equal(facts.get(b), undefined, 'a slot of the same name is another slot');
});

t.test('more slots than the inline fields spill into the array, each still its own', async (t) => {
  // Whatever slots other modules made already, twelve more reach past the inline six.
  const many: Array<Slot<number>> = Array.from({ length: 12 }, (_, i) => slot<number>(`s${i}`));
  const facts = new Facts();
  many.forEach((s, i) => facts.set(s, i * 10));
  t.strictSame(
    many.map((s) => facts.get(s)),
    many.map((_, i) => i * 10),
  );
  // The slots made before (auth's, list-pets') are untouched.
  t.equal(facts.get(KEY_ID), undefined);
  t.equal(facts.get(CONSUMER), undefined);
  t.equal(facts.get(LIMIT), undefined);
  t.equal(facts.get(STATUS), undefined);
});

t.test('each exchange has its own facts', async (t) => {
  const chain = new Chain([]);
  const a = chain.open(HEAD);
  const b = chain.open(HEAD);
  a.set(KEY_ID, 'team-a');
  t.equal(a.get(KEY_ID), 'team-a');
  t.equal(b.get(KEY_ID), undefined);
});

t.test('policies write their own slots; the exchange type names none of them', async (t) => {
  const KEY = 'psg_facts-test-key-0123';
  const chain = new Chain([
    auth.create({ keys: [{ id: 'team-a', hash: hashKey(KEY) }], keysFromEnv: null, realm: 'petstore', upstreamAuthorization: 'drop', bruteForce: null, registry: null }, { env: {} }),
    listPets.create({ unknownParams: 'drop', outOfRange: 'reject', enforceResponse: true }, { env: {} }),
  ]);
  const { ex, error } = chain.begin({ ...HEAD, headers: { authorization: `Bearer ${KEY}` } });
  t.equal(error, undefined);
  t.equal(ex.get(KEY_ID), 'team-a', "auth's key id");
  t.strictSame(ex.get(CONSUMER), { id: 'team-a', expires: undefined, operations: undefined, scopes: undefined }, "auth's consumer");
  t.equal(ex.get(LIMIT), 7, "list-pets' limit, a number");
  t.equal(ex.get(STATUS), 'sold');
  t.equal(ex.consumerId, 'team-a', 'the consumer, through the slot auth declared');
  t.strictSame(
    ex.logFields.map((f) => f.name),
    ['limit', 'statusFilter'],
    'the declared log fields, in chain order',
  );
  const keys = Object.keys(ex as Exchange);
  for (const name of ['keyId', 'petId', 'list', 'consumer']) t.notOk(keys.includes(name), `no ${name} field`);
});

t.test('without a policy that identifies clients, there is no consumer', async (t) => {
  const ex = new Chain([]).open(HEAD);
  ex.set(KEY_ID, 'team-a');
  t.equal(ex.consumerId, undefined, 'a key id nobody declared is not the consumer');
  t.strictSame(ex.logFields, []);
});

t.test('serialised, the facts show the declared values only, never the request', async (t) => {
  const secret = 'Bearer psg_never-in-a-log-0123456789';
  const chain = new Chain([listPets.create({ unknownParams: 'drop', outOfRange: 'reject', enforceResponse: true }, { env: {} })]);
  const { ex } = chain.begin({ ...HEAD, headers: { authorization: secret } });
  t.strictSame(declaredValues(ex), { limit: '7', statusFilter: 'sold' });
  const json = JSON.stringify({ facts: ex });
  t.equal(json, '{"facts":{"limit":"7","statusFilter":"sold"}}');
  t.notMatch(inspect({ facts: ex }, { depth: 5 }), /psg_never/, 'console.log shows no header either');
  t.equal(JSON.stringify(NO_FACTS), '{}');
});

t.test('the access log writes any declared field, knowing no policy', async (t) => {
  const TENANT = slot<string>('tenant');
  const SIZE = slot<number>('size');
  const tenantPolicy: Policy = {
    name: 'tenant',
    declares: { logFields: [{ name: 'tenant', slot: TENANT }, { name: 'size', slot: SIZE }] },
    onRequest(ex) {
      ex.set(TENANT, 'blue "team"');
      ex.set(SIZE, 42);
      return undefined;
    },
  };
  const { ex } = new Chain([tenantPolicy]).begin(HEAD);
  const log = new AccessLog({ logger: pino({ level: 'info' }, { write() {} }) });
  const line = JSON.parse(log.format(record({ facts: ex }))) as Record<string, unknown>;
  t.equal(line.tenant, 'blue "team"', 'a string, escaped');
  t.equal(line.size, '42', 'a number, as its text');
  const keys = Object.keys(line);
  t.equal(keys.indexOf('size'), keys.indexOf('tenant') + 1, 'in declared order');
  t.equal(keys.at(-1), 'msg');

  const unset = new DeclaredFacts(tenantPolicy.declares?.logFields ?? []);
  const bare = JSON.parse(log.format(record({ facts: unset }))) as Record<string, unknown>;
  t.notOk('tenant' in bare || 'size' in bare, 'an unset fact leaves its field out');
});
