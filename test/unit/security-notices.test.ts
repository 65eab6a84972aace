/**
 * Security notices: what a reload weakens, named per option; the start
 * warning for an exposed brute-force lock; and the access log's consumer fields after a reload.
 */
import { Writable } from 'node:stream';
import t from 'tap';
import { pino } from 'pino';
import { parsePolicy } from '../../src/config/load.js';
import type { PolicyConfig } from '../../src/config/types.js';
import { hashKey } from '../../src/policies/auth/index.js';
import { createOps } from '../../src/ops/index.js';
import { securityWeakenings, warnAtStart, warnWeakenings } from '../../src/config/security-notices.js';
import { record } from '../helpers/record.js';
import { fakeLog } from '../helpers/log.js';

const H1 = hashKey('psg_notice-key-one-0123456');
const H2 = hashKey('psg_notice-key-two-0123456');

function config(policies: Record<string, unknown> = {}, rest: Record<string, unknown> = {}): PolicyConfig {
  const r = parsePolicy(JSON.stringify({ version: 1, policies: { auth: { keysFromEnv: null, keys: [{ id: 'a', hash: H1, operations: ['listPets'], expires: '2030-01-01T00:00:00Z' }] }, ...policies }, ...rest }), { env: {} });
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.config;
}

const STRICT = config({ 'rate-limit': { limit: 10, windowSeconds: 60, perKey: { a: { limit: 5 } }, onStoreError: 'closed' }, 'response-contract': { mode: 'enforce', unknownFields: 'refuse' } });

t.test('each weakening is named; the same config, or a stricter one, names none', async (t) => {
  t.strictSame(securityWeakenings(STRICT, STRICT), []);
  const table: [string, PolicyConfig, string[]][] = [
    ['rate limit removed', config({ 'rate-limit': { perKey: { a: { limit: 5 } }, onStoreError: 'closed' }, 'response-contract': { unknownFields: 'refuse' } }), ['rate-limit: limit removed']],
    // A shorter window raises the rate of perKey.a too: it inherits windowSeconds.
    ['rate limit raised', config({ 'rate-limit': { limit: 10, windowSeconds: 30, perKey: { a: { limit: 5 } }, onStoreError: 'closed' }, 'response-contract': { unknownFields: 'refuse' } }), ['rate-limit: limit raised', 'rate-limit.perKey.a raised']],
    ['perKey removed, store open', config({ 'rate-limit': { limit: 10, windowSeconds: 60 }, 'response-contract': { unknownFields: 'refuse' } }), ['rate-limit.perKey.a removed', 'rate-limit.onStoreError closed -> open']],
    ['contract off', config({ 'rate-limit': { limit: 10, windowSeconds: 60, perKey: { a: { limit: 5 } }, onStoreError: 'closed' }, 'response-contract': { mode: 'off' } }), ['response-contract.mode enforce -> off', 'response-contract.unknownFields refuse -> drop']],
  ];
  for (const [name, next, expected] of table) t.strictSame(securityWeakenings(STRICT, next), expected, name);
  const base = config();
  t.strictSame(securityWeakenings(base, config({ auth: { keysFromEnv: null, bruteForce: null, keys: [{ id: 'a', hash: H1, operations: ['listPets'], expires: '2030-01-01T00:00:00Z' }] } })), ['auth.bruteForce turned off']);
  t.strictSame(
    securityWeakenings(base, config({ auth: { keysFromEnv: null, keys: [{ id: 'a', hash: H2 }, { id: 'b', hash: H1 }] } })),
    ["auth key 'a' may call more operations", "auth key 'a' expires later", "auth key 'a' accepts another key", 'auth keys added: b'],
  );
  const scoped = (scopes?: string[]) => config({ auth: { keysFromEnv: null, keys: [{ id: 'a', hash: H1, operations: ['listPets'], expires: '2030-01-01T00:00:00Z', ...(scopes === undefined ? {} : { scopes }) }] } });
  t.strictSame(securityWeakenings(base, scoped(['migration:tester'])), ["auth key 'a' has more scopes"], 'a scope given');
  t.strictSame(securityWeakenings(scoped(['x']), scoped(['x', 'migration:tester'])), ["auth key 'a' has more scopes"], 'a scope added');
  t.strictSame(securityWeakenings(scoped(['x', 'migration:tester']), scoped(['x'])), [], 'a scope taken away is not a weakening');
  t.strictSame(securityWeakenings(scoped(['x']), base), [], 'nor are all of them');
  t.strictSame(securityWeakenings(base, config({}, { headers: { response: { allow: ['x-debug'] } }, log: { access: false } })), ['headers.response.allow gained x-debug', 'log.access turned off']);
  t.strictSame(securityWeakenings(config({ 'rate-limit': { limit: 100 } }), config({ 'rate-limit': { limit: 50 } })), [], 'a lower limit is not a weakening');
});

t.test('warnAtStart: the brute-force lock on a non-loopback listener with no trusted proxy', async (t) => {
  const log = fakeLog();
  warnAtStart(config({}, { server: { host: '0.0.0.0' } }), log);
  warnAtStart(config({}, { server: { host: '127.0.0.1' } }), log);
  warnAtStart(config({}, { server: { host: '0.0.0.0', trustedProxies: ['10.0.0.0/8'] } }), log);
  t.equal(log.lines.length, 1);
  t.match(log.lines[0], { fields: { host: '0.0.0.0' }, message: /trustedProxies/ });
});

t.test('a reload: the access log names the consumer facts in force, and a weakening is one warning', async (t) => {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'info' }, new Writable({
    write(chunk: Buffer, _e, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  }));
  let current = STRICT;
  const ops = createOps(STRICT, { log: logger, breakerOpen: () => false, defaultMetrics: false, current: () => current });
  t.teardown(() => ops.close());
  ops.observer.onEnd(record({ consumer: 'a' }));
  const next = config({ auth: { keysFromEnv: null, keys: [{ id: 'a', hash: H1, operations: ['listPets', 'getPet'], expires: '2031-01-01T00:00:00Z' }] }, 'rate-limit': { limit: 10, windowSeconds: 60, perKey: { a: { limit: 5 } }, onStoreError: 'closed' }, 'response-contract': { unknownFields: 'refuse' } });
  current = next;
  warnWeakenings(STRICT, next, logger);
  ops.observer.onEnd(record({ consumer: 'a' }));
  await ops.close();
  const access = lines.filter((l) => l.log === 'access');
  t.strictSame(access.map((l) => [l.consumerExpires, l.consumerScopes]), [
    ['2030-01-01T00:00:00Z', ['listPets']],
    ['2031-01-01T00:00:00Z', ['listPets', 'getPet']],
  ]);
  const warn = lines.filter((l) => l.level === 40);
  t.equal(warn.length, 1);
  t.strictSame(warn[0]?.weakened, ["auth key 'a' may call more operations", "auth key 'a' expires later"]);
  t.match(warn[0]?.msg, /^policy reload weakens security: auth key 'a' may call more operations; auth key 'a' expires later$/);
});
