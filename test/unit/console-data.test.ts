/**
 * The console's data for an admin listener (src/ops/console/index.ts) and each instance's
 * heartbeat (beat.ts): the fleet view (the majority fingerprint, a differing policy, a stale
 * instance), the fallback to this instance's counts when the fleet's cannot be read, the
 * migration report as divergence per operation, and the policy fingerprint of the policy as data.
 * No sockets: the fleet is a stand-in with the rollup's two reads.
 */
import t from 'tap';
import { policyFingerprint, selfBeat } from '../../src/ops/console/beat.js';
import type { ConsoleFleet } from '../../src/ops/console/fleet.js';
import { consoleData, type ConsoleOptions } from '../../src/ops/console/index.js';
import type { ConsoleSnapshot, InstanceBeat, KeysView } from '../../src/ops/console/types.js';

const NOW = Date.parse('2026-11-29T08:00:00.000Z');
const EMPTY: ConsoleSnapshot = { atMs: NOW, cells: [], daily: [], seen: [], violations: [], samples: [] };

function beat(id: string, fp: string, atMs = NOW, over: Partial<InstanceBeat> = {}): InstanceBeat {
  return { id, host: 'h', pid: 1, version: '0.1.0', policyFingerprint: fp, ready: true, reason: null, startedAtMs: NOW - 60_000, lastReloadMs: null, workers: 1, atMs, ...over };
}

function options(over: Partial<ConsoleOptions> = {}): ConsoleOptions {
  return {
    local: async () => EMPTY,
    uses: async () => [],
    deprecated: () => [],
    who: async () => () => ({ owner: null, contact: null }),
    keys: async (_q, _s, scope, degraded) => ({ generatedAt: '', scope, ...(degraded === undefined ? {} : { degraded }), unusedDays: 30, expiringDays: 14, keys: [], revoked: [] }) satisfies KeysView,
    self: () => beat('self', 'aaaa'),
    beatMs: 5000,
    now: () => NOW,
    ...over,
  };
}

/** A fleet stand-in: what `read` and `instances` give, or that Redis is away. */
function fleetOf(instances: InstanceBeat[] | Error, snapshot: ConsoleSnapshot | Error = EMPTY): ConsoleFleet {
  return {
    instances: async () => {
      if (instances instanceof Error) throw instances;
      return instances;
    },
    read: async () => {
      if (snapshot instanceof Error) throw snapshot;
      return snapshot;
    },
  } as unknown as ConsoleFleet;
}

t.test('fleet: the majority fingerprint, the instance that differs, a stale one, this one first as it is now', async (t) => {
  const fleet = fleetOf([beat('self', 'old-self-beat', NOW - 4000), beat('b', 'aaaa', NOW - 1000), beat('c', 'bbbb', NOW - 2000), beat('d', 'bbbb', NOW - 16_000), beat('e', 'bbbb', NOW - 30_000)]);
  const view = await consoleData(options({ fleet })).fleet();
  t.equal(view.scope, 'fleet');
  // Live: self (aaaa), b (aaaa), c (bbbb); d and e are stale (more than 3 beats of 5 s): not counted.
  t.equal(view.majorityFingerprint, 'aaaa');
  const byId = Object.fromEntries(view.instances.map((i) => [i.id, i]));
  t.same(Object.keys(byId).sort(), ['b', 'c', 'd', 'e', 'self']);
  t.equal(byId.self?.policyFingerprint, 'aaaa', 'this instance as it is now, not its last beat');
  t.equal(byId.self?.self, true);
  t.equal(byId.c?.policyDiffers, true);
  t.equal(byId.b?.policyDiffers, false);
  t.equal(byId.c?.stale, false);
  t.equal(byId.d?.stale, true);
  t.equal(byId.e?.stale, true);
  t.equal(byId.self?.stale, false);
});

t.test('fleet: a tie between fingerprints goes to the smaller, so every instance names the same', async (t) => {
  const fleet = fleetOf([beat('b', 'zzzz')]);
  const view = await consoleData(options({ fleet, self: () => beat('self', 'aaaa') })).fleet();
  t.equal(view.majorityFingerprint, 'aaaa');
  t.equal(view.instances.find((i) => i.id === 'b')?.policyDiffers, true);
});

t.test('fleet: Redis away -> this instance alone, degraded; no Redis -> this instance, not degraded', async (t) => {
  const away = await consoleData(options({ fleet: fleetOf(new Error('down')) })).fleet();
  t.equal(away.scope, 'instance');
  t.equal(away.degraded, 'store unreachable');
  t.same(away.instances.map((i) => i.id), ['self']);
  const none = await consoleData(options()).fleet();
  t.equal(none.scope, 'instance');
  t.equal(none.degraded, undefined);
});

t.test("counts: the fleet's when it can be read, else this instance's with the reason; scope=instance asks for this one's", async (t) => {
  const fleetSnap: ConsoleSnapshot = { ...EMPTY, violations: [{ operation: 'getPet', field: '/id', kind: 'must be integer', count: 7, lastSeenMs: NOW }] };
  const localSnap: ConsoleSnapshot = { ...EMPTY, violations: [{ operation: 'getPet', field: '/id', kind: 'must be integer', count: 2, lastSeenMs: NOW }] };
  const fleetView = await consoleData(options({ fleet: fleetOf([], fleetSnap), local: async () => localSnap })).violations();
  t.equal(fleetView.scope, 'fleet');
  t.equal(fleetView.rules[0]?.count, 7);
  const own = await consoleData(options({ fleet: fleetOf([], fleetSnap), local: async () => localSnap })).violations('instance');
  t.equal(own.scope, 'instance');
  t.equal(own.rules[0]?.count, 2);
  const fallback = await consoleData(options({ fleet: fleetOf([], new Error('down')), local: async () => localSnap })).violations();
  t.equal(fallback.scope, 'instance');
  t.equal(fallback.degraded, 'store unreachable');
  t.equal(fallback.rules[0]?.count, 2);
  const keys = await consoleData(options({ fleet: fleetOf([], new Error('down')) })).keys({});
  t.equal(keys.degraded, 'store unreachable');
});

t.test('migration: off -> enabled false; on -> divergence, fallbacks and violations of next per operation', async (t) => {
  const off = await consoleData(options()).migration();
  t.same({ enabled: off.enabled, operations: off.operations }, { enabled: false, operations: [] });
  const report = {
    scope: 'fleet',
    operations: [{ operation: 'listPets', compared: 10, equal: 7, different: 3, differentRatio: 0.3, fallbacks: { refused: 2, timeout: 1 }, violations: [{ rule: 'a', count: 4 }, { rule: 'b', count: 1 }] }],
  };
  const on = await consoleData(options({ migration: async () => report })).migration();
  t.equal(on.enabled, true);
  t.equal(on.scope, 'fleet');
  t.same(on.operations, [{ operation: 'listPets', compared: 10, equal: 7, different: 3, divergence: 0.3, fallbacks: 3, nextViolations: 5 }]);
});

t.test('fingerprint: the policy as data (comments, spacing and key order change nothing; a value does)', async (t) => {
  const a = policyFingerprint('upstream:\n  url: builtin\npolicies:\n  rate-limit: {limit: 5}\n');
  const b = policyFingerprint('# a comment\npolicies:\n    rate-limit:\n        limit: 5\nupstream: {url: builtin}\n');
  const c = policyFingerprint('upstream:\n  url: builtin\npolicies:\n  rate-limit: {limit: 6}\n');
  t.match(a, /^[0-9a-f]{16}$/);
  t.equal(a, b);
  t.not(a, c);
  t.equal(policyFingerprint('{"a":1,"b":[1,2]}'), policyFingerprint('{"b":[1,2],"a":1}'));
  t.not(policyFingerprint('{"b":[1,2]}'), policyFingerprint('{"b":[2,1]}'), 'array order is data');
});

t.test('heartbeat: one id for the life of the process; the policy, readiness and reload as they are now', async (t) => {
  let text = 'a: 1';
  let ready: { ready: boolean; reason?: string } = { ready: false, reason: 'starting' };
  let reloaded: number | null = null;
  let clock = NOW;
  const make = selfBeat({ version: '9.9.9', workers: 2, policy: () => text, lastReloadMs: () => reloaded, readiness: () => ready, now: () => clock });
  const first = make();
  t.match(first.id, new RegExp(`:${process.pid}:[0-9a-f]{6}$`));
  t.same({ ready: first.ready, reason: first.reason, workers: first.workers, version: first.version, startedAtMs: first.startedAtMs, lastReloadMs: first.lastReloadMs }, { ready: false, reason: 'starting', workers: 2, version: '9.9.9', startedAtMs: NOW, lastReloadMs: null });
  text = 'a: 2';
  ready = { ready: true };
  reloaded = NOW + 5;
  clock = NOW + 10;
  const second = make();
  t.equal(second.id, first.id);
  t.not(second.policyFingerprint, first.policyFingerprint);
  t.same({ ready: second.ready, reason: second.reason, lastReloadMs: second.lastReloadMs, atMs: second.atMs, startedAtMs: second.startedAtMs }, { ready: true, reason: null, lastReloadMs: NOW + 5, atMs: NOW + 10, startedAtMs: NOW });
});
