/**
 * The migration lane's tally (src/migration/tally.ts), its latency buckets (latency.ts),
 * the report built from it and the gate's verdict (report.ts): bounds that hold whatever the
 * traffic, snapshots that merge by adding, percentiles read from buckets, the verdict's reasons.
 */
import t from 'tap';
import { bucketOf, bucketValue, MAX_BUCKET, quantile } from '../../src/migration/latency.js';
import { buildReport, gateOf, verdict, type MigrationReport } from '../../src/migration/report.js';
import { fromFields, MAX_KINDS, MAX_OPERATIONS, mergeSnapshots, MigrationTally, OTHER, toFields } from '../../src/migration/tally.js';
import type { Comparison } from '../../src/migration/types.js';
import { manualWallClock } from '../helpers/clock.js';

const differ = (path: string, legacy = '1', next = '2'): Comparison => ({ equal: false, paths: [path], samples: [{ path, legacy, next }] });
const EQUAL: Comparison = { equal: true, paths: [], samples: [] };

t.test('counts per operation and side, by reason, kind, rule and path', async (t) => {
  const clock = manualWallClock();
  const tally = new MigrationTally({ maxPaths: 10, maxSamples: 3, now: clock.now });
  tally.routed('getPet', 'legacy', 5);
  tally.routed('getPet', 'next', 7);
  tally.routed('getPet', 'next', undefined);
  tally.fallback('getPet', 'timeout');
  tally.fallback('getPet', 'timeout');
  tally.dropped('listPets', 'in_flight');
  tally.compared('listPets', EQUAL, 3, 4);
  tally.compared('listPets', { equal: false, paths: ['$[*].name', 'status'], samples: [{ path: '$[*].name', legacy: '"Rex"', next: '"rex"' }] }, 3, 4);
  tally.nextFailed('listPets', 'reset');
  tally.nextViolation('listPets', '$[*].status: enum');
  const s = tally.snapshot();
  t.strictSame(Object.keys(s.operations), ['getPet', 'listPets'], 'operations by name');
  const getPet = s.operations.getPet!;
  t.strictSame(getPet.routed, { legacy: 1, next: 2 });
  t.strictSame(getPet.fallbacks, { timeout: 2 });
  t.equal(Object.values(getPet.latency.next).reduce((a, b) => a + b, 0), 1, 'a failed request (no ms) counts as routed, not in the latency');
  const list = s.operations.listPets!;
  t.strictSame([list.compared, list.equal, list.different], [2, 1, 1]);
  t.strictSame(list.paths, { '$[*].name': 1, status: 1 }, 'a comparison with two paths counts under each');
  t.strictSame(list.violations, { '$[*].status: enum': 1 });
  t.strictSame(list.nextErrors, { reset: 1 });
  t.strictSame(list.dropped, { in_flight: 1 });
  t.strictSame(list.samples, [{ time: new Date(clock.now()).toISOString(), path: '$[*].name', legacy: '"Rex"', next: '"rex"' }]);
  t.equal(s.since, new Date(clock.now()).toISOString());
  t.same(JSON.parse(JSON.stringify(s)), s, 'the snapshot is plain JSON');
});

t.test('bounds: 10,000 distinct paths, rules and kinds stay within their bounds; samples the newest maxSamples, values cut', async (t) => {
  const tally = new MigrationTally({ maxPaths: 100, maxSamples: 5 });
  for (let i = 0; i < 10_000; i++) {
    tally.compared('listPets', differ(`$.f${i}`, 'x'.repeat(500), `${i}`), 1, 1);
    tally.nextViolation('listPets', `$.f${i}: type`);
    tally.nextFailed('listPets', `kind${i}`);
  }
  const op = tally.snapshot().operations.listPets!;
  t.equal(Object.keys(op.paths).length, 101, 'maxPaths names and "(other)"');
  t.equal(op.paths[OTHER], 10_000 - 100, 'the rest under "(other)"');
  t.equal(op.paths['$.f0'], 1, 'the first paths keep their name');
  t.equal(Object.values(op.paths).reduce((a, b) => a + b, 0), 10_000, 'nothing lost');
  t.equal(Object.keys(op.violations).length, 101, 'rules bounded the same way');
  t.equal(Object.keys(op.nextErrors).length, MAX_KINDS + 1, 'kinds bounded');
  t.equal(op.samples.length, 5, 'maxSamples samples');
  t.strictSame(op.samples.map((s) => s.next), ['9999', '9998', '9997', '9996', '9995'], 'the newest, newest first');
  t.ok(op.samples.every((s) => s.legacy.length === 64), 'values cut to 64 characters');
  const long = new MigrationTally({ maxPaths: 10, maxSamples: 1 });
  long.compared('x', differ(`$.${'a'.repeat(10_000)}`), 1, 1);
  t.ok(Object.keys(long.snapshot().operations.x!.paths)[0]!.length <= 256, 'a long path is cut');
  const ops = new MigrationTally({ maxPaths: 1, maxSamples: 0 });
  for (let i = 0; i < 1000; i++) ops.routed(`op${i}`, 'legacy', 1);
  const names = Object.keys(ops.snapshot().operations);
  t.equal(names.length, MAX_OPERATIONS + 1, 'operations bounded');
  t.ok(names.includes(OTHER));
  t.strictSame(ops.snapshot().operations.op0!.samples, [], 'maxSamples 0 keeps none');
});

t.test('latency buckets: fixed, log-scale; percentiles within a bucket of the truth', async (t) => {
  t.equal(bucketOf(0), 0);
  t.equal(bucketOf(-1), 0);
  t.equal(bucketOf(Number.NaN), 0);
  t.equal(bucketOf(Infinity), MAX_BUCKET);
  t.equal(bucketOf(1e12), MAX_BUCKET);
  for (const ms of [0.02, 0.5, 1, 7.3, 42, 250, 999, 12_345]) {
    const v = bucketValue(bucketOf(ms));
    t.ok(Math.abs(v - ms) / ms < 0.05, `${ms} ms reads back as ${v.toFixed(3)} (within 5%)`);
  }
  t.equal(quantile({}, 0.5), null, 'nothing counted: null');
  // 1..1000 ms, one each: p50 near 500, p99 near 990.
  const tally = new MigrationTally({ maxPaths: 1, maxSamples: 0 });
  for (let ms = 1; ms <= 1000; ms++) tally.routed('op', 'legacy', ms);
  const lat = tally.snapshot().operations.op!.latency.legacy;
  const p50 = quantile(lat, 0.5)!;
  const p99 = quantile(lat, 0.99)!;
  t.ok(Math.abs(p50 - 500) / 500 < 0.05, `p50 ${p50}`);
  t.ok(Math.abs(p99 - 990) / 990 < 0.05, `p99 ${p99}`);
  t.ok(Object.keys(lat).length < 100, `sparse: ${Object.keys(lat).length} buckets for 1000 values`);
});

t.test('snapshots merge by adding: two processes equal one that saw everything', async (t) => {
  const all = new MigrationTally({ maxPaths: 3, maxSamples: 4 });
  const parts = [new MigrationTally({ maxPaths: 3, maxSamples: 4 }), new MigrationTally({ maxPaths: 3, maxSamples: 4 })];
  for (let i = 0; i < 200; i++) {
    const part = parts[i % 2]!;
    for (const tl of [all, part]) {
      tl.routed('getPet', i % 3 === 0 ? 'next' : 'legacy', (i % 50) + 1);
      if (i % 4 === 0) tl.compared('listPets', differ(`$.p${i % 3}`), 1, (i % 30) + 2);
      else tl.compared('listPets', EQUAL, 1, 2);
      if (i % 10 === 0) tl.fallback('getPet', 'reset');
    }
  }
  const merged = mergeSnapshots(parts.map((p) => p.snapshot()), all.bounds);
  const whole = all.snapshot();
  for (const op of ['getPet', 'listPets']) {
    const a = merged.operations[op]!;
    const b = whole.operations[op]!;
    t.strictSame({ ...a, samples: [] }, { ...b, samples: [] }, `${op}: the same counts, paths and latency buckets`);
    t.equal(quantile(a.latency.next, 0.99), quantile(b.latency.next, 0.99), `${op}: the same p99`);
  }
  t.equal(merged.operations.listPets!.samples.length, 4, 'samples bounded after the merge');
  // Past maxPaths after a merge: the paths with the largest counts keep their names.
  const a = new MigrationTally({ maxPaths: 2, maxSamples: 0 });
  const b = new MigrationTally({ maxPaths: 2, maxSamples: 0 });
  for (let i = 0; i < 5; i++) a.compared('x', differ('$.big'), 1, 1);
  a.compared('x', differ('$.small'), 1, 1);
  for (let i = 0; i < 3; i++) b.compared('x', differ('$.mid'), 1, 1);
  b.compared('x', differ('$.tiny'), 1, 1);
  t.strictSame(mergeSnapshots([a.snapshot(), b.snapshot()], a.bounds).operations.x!.paths, { '$.big': 5, '$.mid': 3, [OTHER]: 2 });
  // Fields round trip.
  const one = whole.operations.getPet!;
  t.strictSame(fromFields(toFields(one), one.samples, all.bounds), one, 'toFields then fromFields gives the counts back');
});

t.test('reset starts from zero, now; metricCounts names every reason and kind, unknown ones as other', async (t) => {
  const clock = manualWallClock();
  const tally = new MigrationTally({ maxPaths: 5, maxSamples: 5, now: clock.now });
  tally.routed('getPet', 'next', 1);
  tally.nextFailed('getPet', 'headers_timeout');
  tally.nextFailed('getPet', 'weird');
  tally.nextViolation('getPet', 'status');
  tally.nextViolation('getPet', 'content-type');
  const [m] = tally.metricCounts();
  t.equal(m?.operation, 'getPet');
  t.strictSame(m?.routed, { legacy: 0, next: 1 });
  t.equal(m?.violations, 2);
  t.equal(m?.nextErrors.headers_timeout, 1);
  t.equal(m?.nextErrors.timeout, 0);
  t.equal(m?.nextErrors.other, 1);
  t.strictSame(Object.keys(m?.fallbacks ?? {}), ['refused', 'reset', 'timeout', 'invalid_response', 'tls', 'contract', 'server_error', 'open_circuit']);
  t.strictSame(Object.keys(m?.dropped ?? {}), ['in_flight', 'body', 'method', 'sampled_out', 'answer_too_large', 'legacy_failed', 'compare_failed']);
  clock.advance(5000);
  const generation = tally.generation;
  tally.reset();
  t.strictSame(tally.snapshot(), { since: new Date(clock.now()).toISOString(), operations: {} });
  t.equal(tally.generation, generation + 1);
});

function report(operations: Partial<MigrationReport['operations'][number]>[]): MigrationReport {
  const tally = new MigrationTally({ maxPaths: 5, maxSamples: 0 });
  const base = buildReport(tally.snapshot(), { operations: { x: { mode: 'shadow', percent: 0 } }, gate: gateOf(null) }, 'instance').operations[0]!;
  return { generatedAt: '', scope: 'instance', since: '', gate: gateOf(null), operations: operations.map((o) => ({ ...base, ...o })) };
}

t.test('the report: modes and percents from the config, ratios, ranked paths, p50/p99', async (t) => {
  const tally = new MigrationTally({ maxPaths: 5, maxSamples: 2 });
  for (let i = 0; i < 1000; i++) tally.compared('listPets', i < 3 ? differ(i === 0 ? '$.a' : '$.b') : EQUAL, 10, 20);
  tally.routed('getPet', 'next', 30);
  const r = buildReport(tally.snapshot(), { operations: { listPets: { mode: 'shadow', percent: 0 }, getPet: { mode: 'split', percent: 12.5 }, createPet: { mode: 'next', percent: 0 } }, gate: { minComparisons: 1000, maxDifferentRatio: 0.01, maxViolations: 0 } }, 'instance', Date.UTC(2026, 0, 1));
  t.strictSame(r.operations.map((o) => [o.operation, o.mode, o.percent]), [['createPet', 'next', 100], ['getPet', 'split', 12.5], ['listPets', 'shadow', 0]]);
  const list = r.operations[2]!;
  t.equal(list.differentRatio, 0.003);
  t.strictSame(list.paths, [{ path: '$.b', count: 2 }, { path: '$.a', count: 1 }], 'most first');
  t.equal(list.latency.next.count, 1000);
  t.ok(Math.abs(list.latency.next.p50Ms! - 20) < 1);
  t.strictSame(list.latency.legacy, { count: 0, p50Ms: null, p99Ms: null });
  t.equal(r.operations[0]!.differentRatio, null, 'nothing compared: null');
  t.equal(r.generatedAt, '2026-01-01T00:00:00.000Z');
  t.strictSame(r.gate, { minComparisons: 1000, maxDifferentRatio: 0.01, maxViolations: 0 });
  const v = verdict(r);
  t.strictSame(v.operations.find((o) => o.operation === 'listPets'), { operation: 'listPets', mode: 'shadow', ready: true, reasons: [] });
  t.equal(v.ready, false, 'getPet and createPet have no comparisons');
});

t.test('verdict: every reason, split and next count failures and fallbacks, the gate can be overridden', async (t) => {
  const ready = report([{ operation: 'a', compared: 20000, equal: 20000, differentRatio: 0 }]);
  t.strictSame(verdict(ready), { ready: true, operations: [{ operation: 'a', mode: 'shadow', ready: true, reasons: [] }], reasons: [] });
  const bad = report([
    { operation: 'few', compared: 9, equal: 9, differentRatio: 0 },
    { operation: 'diff', compared: 20000, different: 40, differentRatio: 0.002 },
    { operation: 'viol', compared: 20000, differentRatio: 0, violations: [{ rule: 'status', count: 2 }] },
    { operation: 'split', mode: 'split', routed: { legacy: 60000, next: 20000 }, compared: 0, differentRatio: null, nextErrors: { timeout: 30, reset: 10 }, fallbacks: { timeout: 30 } },
    { operation: 'new', mode: 'next', routed: { legacy: 0, next: 50 }, compared: 0, differentRatio: null },
    { operation: 'off', mode: 'legacy' },
  ]);
  const v = verdict(bad);
  t.equal(v.ready, false);
  t.strictSame(v.operations.map((o) => o.operation), ['few', 'diff', 'viol', 'split', 'new'], 'an operation in legacy mode with nothing to judge is left out');
  t.strictSame(v.operations.map((o) => o.reasons), [
    ['9 comparisons, fewer than 10000'],
    ['0.2% different, above 0.1%'],
    ['2 contract violations by next, more than 0'],
    ['next failed 40 times (0.2%, above 0.1%; timeout: 30)'],
    ['50 requests answered by next, fewer than 10000'],
  ]);
  const transient = report([{ operation: 't', mode: 'next', routed: { legacy: 0, next: 20000 }, compared: 0, differentRatio: null, nextErrors: { reset: 2 }, fallbacks: { reset: 2 } }]);
  t.equal(verdict(transient).ready, true, 'split and next: 2 failures in 20,000 are under the share (0.1%)');
  const shadowErrors = report([{ operation: 's', compared: 20000, differentRatio: 0, nextErrors: { timeout: 5 } }]);
  t.equal(verdict(shadowErrors).ready, true, 'in shadow mode next failures are not a reason (the copies are discarded)');
  t.equal(verdict(bad, { minComparisons: 5, maxDifferentRatio: 0.01, maxViolations: 5 }).operations.filter((o) => o.ready).length, 5, 'a laxer gate');
  t.strictSame(verdict(report([])), { ready: false, operations: [], reasons: ['no operation is shadowed, split or sent to next'] });
});
