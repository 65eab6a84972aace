/**
 * The operator console's views (src/ops/console/views.ts) from a recorder's snapshot: the traffic
 * table and chart for the last hour and day, the deprecation burn-down per UTC day, the violations
 * by rule; their numbers equal what was recorded. And the quantiles read from the histogram.
 * No sockets.
 */
import t from 'tap';
import { record } from '../helpers/record.js';
import { DeclaredFacts, NO_FACTS, slot } from '../../src/core/facts.js';
import type { ExchangeRecord } from '../../src/core/record.js';
import { ConsoleRecorder } from '../../src/ops/console/series.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../../src/ops/console/slots.js';
import { LATENCY_BOUNDS_MS, type ConsoleSnapshot, type WhoToTell } from '../../src/ops/console/types.js';
import { burndownView, quantileMs, trafficView, violationsView } from '../../src/ops/console/views.js';
import type { DeprecationUse } from '../../src/stores/types.js';

const T0 = Date.parse('2026-11-23T10:00:00.000Z');
const WHO: Record<string, WhoToTell> = { 'team-a': { owner: 'Team A', contact: 'a@example.org' } };
const who = (consumer: string): WhoToTell => WHO[consumer] ?? { owner: null, contact: null };

function recorderOf(records: ExchangeRecord[], deprecated: readonly string[] = []): ConsoleRecorder {
  const set = new Set(deprecated);
  const rec = new ConsoleRecorder({ deprecatedOperations: () => set, now: () => T0 });
  for (const r of records) rec.onEnd(r);
  return rec;
}

function at(ms: number, over: Partial<ExchangeRecord> = {}): ExchangeRecord {
  return record({ startedAt: ms, facts: NO_FACTS, ...over });
}

/** A histogram with `counts` at the given bucket indexes. */
function histogram(counts: Record<number, number>): number[] {
  const h = new Array<number>(LATENCY_BOUNDS_MS.length + 1).fill(0);
  for (const [i, n] of Object.entries(counts)) h[Number(i)] = n;
  return h;
}

t.test('quantiles: the upper bound of the bucket holding rank ceil(q n); null with none', async (t) => {
  t.equal(quantileMs(histogram({}), 0.5), null);
  t.equal(quantileMs(histogram({ 3: 1 }), 0.5), LATENCY_BOUNDS_MS[3]);
  t.equal(quantileMs(histogram({ 3: 1 }), 0.99), LATENCY_BOUNDS_MS[3]);
  // 100 requests: 50 in bucket 0, 49 in bucket 5, 1 in bucket 10.
  const h = histogram({ 0: 50, 5: 49, 10: 1 });
  t.equal(quantileMs(h, 0.5), LATENCY_BOUNDS_MS[0], 'rank 50: the 50th is in bucket 0');
  t.equal(quantileMs(h, 0.51), LATENCY_BOUNDS_MS[5], 'rank 51');
  t.equal(quantileMs(h, 0.99), LATENCY_BOUNDS_MS[5], 'rank 99');
  t.equal(quantileMs(h, 1), LATENCY_BOUNDS_MS[10], 'rank 100');
  t.equal(quantileMs(h, 0), LATENCY_BOUNDS_MS[0], 'rank at least 1');
  t.equal(quantileMs(histogram({ [LATENCY_BOUNDS_MS.length]: 2 }), 0.5), 10_000, 'past the last bound: read as it');
  // 3 requests: ceil(0.5 * 3) = 2.
  t.equal(quantileMs(histogram({ 1: 1, 2: 1, 4: 1 }), 0.5), LATENCY_BOUNDS_MS[2]);
});

t.test('traffic, last hour: rows equal what was recorded, 60 points with zeros, sorted, who to tell', async (t) => {
  const now = T0 + 30 * MINUTE_MS + 10_000;
  const records = [
    at(T0 + 30 * MINUTE_MS, { durationMs: 4 }), // listPets team-a 200; listPets: 4, 4, 12.5, 40, 900 ms: p50 le 15
    at(T0 + 30 * MINUTE_MS, { durationMs: 4 }),
    at(T0 + 29 * MINUTE_MS, { status: 404, errorCode: 'not_found', upstreamStatus: 404, durationMs: 40 }),
    at(T0 + 10 * MINUTE_MS, { status: 502, errorCode: 'upstream_unavailable', upstreamStatus: undefined, upstreamFailure: 'refused', durationMs: 900 }),
    at(T0 + 10 * MINUTE_MS, { status: 500, errorCode: 'internal_error', upstreamStatus: undefined, consumer: 'team-b' }),
    at(T0 + 5 * MINUTE_MS, { status: 429, errorCode: 'rate_limited', upstreamStatus: undefined, consumer: 'team-b', operation: 'getPet' }),
    at(T0 + 5 * MINUTE_MS, { status: 0, upstreamStatus: undefined, consumer: 'team-b', operation: 'getPet' }),
    at(T0 + 5 * MINUTE_MS, { consumer: 'team-c', operation: 'getPet' }),
    at(T0 + 1 * MINUTE_MS, { consumer: undefined, operation: undefined, route: 'unknown', status: 401, errorCode: 'missing_api_key' }),
    at(T0 - 40 * MINUTE_MS, { consumer: 'team-z' }), // out of the hour, in the day
  ];
  const snap = recorderOf(records).snapshot(now);
  const v = trafficView(snap, 'hour', { now, who, scope: 'instance' });
  t.equal(v.window, 'hour');
  t.equal(v.stepSeconds, 60);
  t.equal(v.scope, 'instance');
  t.notOk('degraded' in v, 'no degraded field unless given');
  t.equal(v.generatedAt, new Date(now).toISOString());
  t.equal(v.to, new Date(now).toISOString());
  t.equal(v.from, new Date(T0 + 30 * MINUTE_MS - 59 * MINUTE_MS).toISOString(), 'the 60th minute back, now included');
  t.equal(v.series.t.length, 60);
  t.equal(v.series.t[59], (T0 + 30 * MINUTE_MS) / 1000);
  t.equal(v.series.t[1]! - v.series.t[0]!, 60);
  t.strictSame(v.operations, [
    { operation: 'listPets', requests: 5, p50Ms: 15, p99Ms: 1000, errors: { client: 1, gateway: 1, upstream: 1 }, rateLimited: 0, aborted: 0 },
    { operation: 'getPet', requests: 3, p50Ms: 15, p99Ms: 15, errors: { client: 0, gateway: 0, upstream: 0 }, rateLimited: 1, aborted: 1 },
    { operation: '-', requests: 1, p50Ms: 15, p99Ms: 15, errors: { client: 1, gateway: 0, upstream: 0 }, rateLimited: 0, aborted: 0 },
  ]);
  t.strictSame(
    v.consumers.map((c) => [c.consumer, c.requests, c.owner, c.contact, c.errors.client + c.errors.gateway + c.errors.upstream]),
    [
      ['team-a', 4, 'Team A', 'a@example.org', 2],
      ['team-b', 3, null, null, 1],
      ['-', 1, null, null, 1],
      ['team-c', 1, null, null, 0],
    ],
    'most requests first, ties by name; team-z is out of the hour',
  );
  t.strictSame(
    v.cells.map((c) => [c.operation, c.consumer, c.requests]),
    [
      ['listPets', 'team-a', 4],
      ['getPet', 'team-b', 2],
      ['-', '-', 1],
      ['getPet', 'team-c', 1],
      ['listPets', 'team-b', 1],
    ],
  );
  const list = v.series.operations.find((s) => s.operation === 'listPets')!;
  t.strictSame(
    v.series.operations.map((s) => s.operation),
    ['listPets', 'getPet', '-'],
    'in the order of the rows',
  );
  t.equal(list.requests.length, 60);
  const point = (ms: number): number => v.series.t.indexOf(ms / 1000);
  t.equal(list.requests[point(T0 + 30 * MINUTE_MS)], 2);
  t.equal(list.requests[point(T0 + 29 * MINUTE_MS)], 1);
  t.equal(list.errors[point(T0 + 29 * MINUTE_MS)], 1);
  t.equal(list.requests[point(T0 + 10 * MINUTE_MS)], 2);
  t.equal(list.errors[point(T0 + 10 * MINUTE_MS)], 2);
  t.equal(
    list.requests.reduce((a, b) => a + b, 0),
    5,
    'every other point zero',
  );
  t.equal(v.series.operations.find((s) => s.operation === 'getPet')!.errors.reduce((a, b) => a + b, 0), 0, '429 and aborted are not errors');
});

t.test('traffic, last day: 24 hour points; the same numbers summed by hour', async (t) => {
  const now = T0 + 30 * MINUTE_MS;
  const records = [at(T0 + 1_000), at(T0 - 40 * MINUTE_MS, { consumer: 'team-z' }), at(T0 - 23 * HOUR_MS), at(T0 - 24 * HOUR_MS, { consumer: 'gone' })];
  const v = trafficView(recorderOf(records).snapshot(now), 'day', { now, who, scope: 'fleet', degraded: 'store unreachable' });
  t.equal(v.stepSeconds, 3600);
  t.equal(v.series.t.length, 24);
  t.equal(v.series.t[23], T0 / 1000);
  t.equal(v.from, new Date(T0 - 23 * HOUR_MS).toISOString());
  t.equal(v.scope, 'fleet');
  t.equal(v.degraded, 'store unreachable');
  t.strictSame(
    v.consumers.map((c) => [c.consumer, c.requests]),
    [
      ['team-a', 2],
      ['team-z', 1],
    ],
  );
  t.strictSame(v.series.operations[0]!.requests.filter((n) => n > 0), [1, 1, 1]);
  t.equal(v.series.operations[0]!.requests[0], 1, 'the first point: 23 hours back');
});

t.test('traffic from snapshots put together: one cell named twice is added up', async (t) => {
  const now = T0 + 5 * MINUTE_MS;
  const a = recorderOf([at(T0 + 1_000, { durationMs: 1 })]).snapshot(now);
  const b = recorderOf([at(T0 + 2_000, { durationMs: 2 }), at(T0 + 2_000, { durationMs: 2 })]).snapshot(now);
  const merged: ConsoleSnapshot = { ...a, cells: [...a.cells, ...b.cells] };
  const v = trafficView(merged, 'hour', { now, who, scope: 'fleet' });
  t.strictSame(
    v.cells.map((c) => [c.operation, c.consumer, c.requests, c.p50Ms]),
    [['listPets', 'team-a', 3, 2]],
  );
  t.equal(v.series.operations[0]!.requests.reduce((x, y) => x + y, 0), 3);
});

t.test('traffic with nothing recorded: empty rows, 60 points of time, no operation series', async (t) => {
  const v = trafficView(recorderOf([]).snapshot(T0), 'hour', { now: T0, who, scope: 'instance' });
  t.strictSame([v.operations, v.consumers, v.cells, v.series.operations], [[], [], [], []]);
  t.equal(v.series.t.length, 60);
});

const MIDNIGHT = Date.parse('2026-11-24T00:00:00.000Z');

t.test('burn-down: UTC days from the first call to today, across midnight; ledger rows joined; stopped', async (t) => {
  const now = MIDNIGHT + 2 * DAY_MS + 9 * HOUR_MS; // 2026-11-26 09:00
  const records = [
    at(MIDNIGHT - 1, { operation: 'getPet' }), // 2026-11-23 23:59:59.999, team-a
    at(MIDNIGHT, { operation: 'getPet' }), // 2026-11-24 00:00, team-a
    at(MIDNIGHT + 1, { operation: 'getPet', consumer: 'team-b' }),
    at(MIDNIGHT + 2 * DAY_MS + 8 * HOUR_MS, { operation: 'getPet', consumer: 'team-b' }),
    at(MIDNIGHT + 2 * DAY_MS + 8 * HOUR_MS, { operation: 'getPet', consumer: 'team-b' }),
    at(MIDNIGHT + 5, { operation: 'getPet', consumer: 'late' }), // not in the ledger yet
    at(MIDNIGHT + 6, { operation: 'getPet', consumer: undefined, status: 401 }), // nobody to tell
    at(MIDNIGHT + 7, { operation: 'listPets' }), // not deprecated
  ];
  const snap = recorderOf(records, ['getPet']).snapshot(now);
  const uses: DeprecationUse[] = [
    { operation: 'getPet', consumer: 'team-a', count: 40, firstSeen: '2026-10-01T08:00:00.000Z', lastSeen: new Date(MIDNIGHT).toISOString() },
    { operation: 'getPet', consumer: 'team-b', count: 3, firstSeen: new Date(MIDNIGHT + 1).toISOString(), lastSeen: new Date(MIDNIGHT + 2 * DAY_MS + 8 * HOUR_MS).toISOString() },
    { operation: 'getPet', consumer: 'quiet', count: 1, firstSeen: '2026-01-01T00:00:00.000Z', lastSeen: '2026-01-01T00:00:00.000Z' },
    { operation: 'listPets', consumer: 'team-a', count: 9, firstSeen: '2026-01-01T00:00:00.000Z', lastSeen: '2026-01-01T00:00:00.000Z' },
  ];
  const v = burndownView(snap, {
    deprecated: [
      { operation: 'getPet', sunset: '2030-12-05T00:00:00.000Z' },
      { operation: 'createPet', sunset: undefined },
    ],
    uses,
    who,
    now,
    stoppedAfterDays: 2,
    scope: 'instance',
  });
  t.equal(v.stoppedAfterDays, 2);
  const getPet = v.operations[0]!;
  t.equal(getPet.operation, 'getPet');
  t.equal(getPet.sunset, '2030-12-05T00:00:00.000Z');
  t.strictSame(getPet.days, ['2026-11-23', '2026-11-24', '2026-11-25', '2026-11-26']);
  t.strictSame(getPet.total, [1, 3, 0, 2]);
  t.strictSame(
    getPet.consumers.map((c) => [c.consumer, c.calls, c.daily, c.firstSeen, c.lastSeen, c.stopped, c.owner]),
    [
      ['team-a', 2, [1, 1, 0, 0], '2026-10-01T08:00:00.000Z', '2026-11-24T00:00:00.000Z', true, 'Team A'],
      ['team-b', 3, [0, 1, 0, 2], '2026-11-24T00:00:00.001Z', '2026-11-26T08:00:00.000Z', false, null],
      ['late', 1, [0, 1, 0, 0], '2026-11-24T00:00:00.000Z', '2026-11-24T00:00:00.000Z', true, null],
      ['quiet', 0, [0, 0, 0, 0], '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', true, null],
    ].sort((a, b) => (b[1] as number) - (a[1] as number) || String(a[0]).localeCompare(String(b[0]))),
  );
  t.strictSame(
    getPet.total,
    getPet.days.map((_, i) => getPet.consumers.reduce((n, c) => n + c.daily[i]!, 0)),
    'the total is the consumers\' sum',
  );
  t.strictSame(v.operations[1], { operation: 'createPet', sunset: null, days: [], total: [], consumers: [] }, 'no call: empty');
  const fresh = burndownView(snap, { deprecated: [{ operation: 'getPet', sunset: undefined }], uses, who, now, scope: 'instance' });
  t.equal(fresh.stoppedAfterDays, 7, 'default');
  t.strictSame(
    fresh.operations[0]!.consumers.filter((c) => c.stopped).map((c) => c.consumer),
    ['quiet'],
    'within 7 days: not stopped',
  );
});

t.test('burn-down: one day when every call is today; a snapshot merged is added up', async (t) => {
  const now = MIDNIGHT + 10 * HOUR_MS;
  const a = recorderOf([at(MIDNIGHT + HOUR_MS, { operation: 'getPet' })], ['getPet']).snapshot(now);
  const b = recorderOf([at(MIDNIGHT + 2 * HOUR_MS, { operation: 'getPet' })], ['getPet']).snapshot(now);
  const v = burndownView({ ...a, daily: [...a.daily, ...b.daily] }, { deprecated: [{ operation: 'getPet', sunset: undefined }], uses: [], who, now, scope: 'fleet' });
  t.strictSame(v.operations[0]!.days, ['2026-11-24']);
  t.strictSame(v.operations[0]!.total, [2]);
  t.strictSame(
    v.operations[0]!.consumers.map((c) => [c.consumer, c.calls, c.daily]),
    [['team-a', 2, [2]]],
  );
});

t.test('violations: by rule, most first (ties by name), total, newest samples, times as ISO', async (t) => {
  const V = slot<string>('contractViolation');
  const fields = Object.freeze([{ name: 'contractViolation', slot: V }]);
  const violating = (ms: number, text: string, over: Partial<ExchangeRecord> = {}): ExchangeRecord => {
    const facts = new DeclaredFacts(fields);
    facts.set(V, text);
    return record({ startedAt: ms, facts, status: 502, errorCode: 'upstream_contract_violation', ...over });
  };
  const rec = recorderOf([
    violating(T0 + 1, '/0/id must be integer; /1/id must be integer', { requestId: 'r1' }),
    violating(T0 + 2, 'content-type is not application/json', { requestId: 'r2', operation: 'getPet' }),
    violating(T0 + 3, '/ must be array', { requestId: 'r3' }),
    at(T0 + 4),
  ]);
  const now = T0 + MINUTE_MS;
  const v = violationsView(rec.snapshot(now), { now, scope: 'instance' });
  t.equal(v.total, 4, 'problems counted');
  t.strictSame(v.rules, [
    { operation: 'listPets', field: '/*/id', kind: 'must be integer', count: 2, lastSeen: new Date(T0 + 1).toISOString() },
    { operation: 'getPet', field: '(content-type)', kind: 'content-type is not application/json', count: 1, lastSeen: new Date(T0 + 2).toISOString() },
    { operation: 'listPets', field: '/', kind: 'must be array', count: 1, lastSeen: new Date(T0 + 3).toISOString() },
  ]);
  t.strictSame(
    v.samples.map((s) => [s.at, s.requestId, s.status, s.problems.length]),
    [
      [new Date(T0 + 3).toISOString(), 'r3', 200, 1],
      [new Date(T0 + 2).toISOString(), 'r2', 200, 1],
      [new Date(T0 + 1).toISOString(), 'r1', 200, 2],
    ],
  );
  const twice = rec.snapshot(now);
  const merged = violationsView({ ...twice, violations: [...twice.violations, ...twice.violations] }, { now, scope: 'fleet' });
  t.equal(merged.total, 8, 'a rule named twice is added up');
  t.equal(merged.rules.length, 3);
});
