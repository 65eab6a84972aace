/**
 * The operator console's recorder (src/ops/console/series.ts): how a finished request is counted
 * (the COUNTERS classification, the latency histogram), the windows (minute and hour slots, UTC
 * days of deprecated calls) rolling with an injected clock, the bounds (consumers, rules, samples,
 * slots), takeDelta's increments, and the violation rules read from response-contract's
 * `contractViolation` field, which the policy sets through the chain. No sockets.
 */
import t from 'tap';
import { Chain } from '../helpers/chain.js';
import { record } from '../helpers/record.js';
import { DeclaredFacts, NO_FACTS, slot } from '../../src/core/facts.js';
import type { ExchangeRecord } from '../../src/core/record.js';
import type { Policy, ResponseBody } from '../../src/core/policy.js';
import { accessLine } from '../../src/ops/access-log.js';
import { classify, ConsoleRecorder, VIOLATION_FIELD } from '../../src/ops/console/series.js';
import { bucketOf, DAY_MS, HOUR_MS, MINUTE_MS } from '../../src/ops/console/slots.js';
import { COUNTERS, DAYS_KEPT, LATENCY_BOUNDS_MS, SLOT_WIDTH, type ConsoleSnapshot, type CounterName } from '../../src/ops/console/types.js';
import { MAX_RULES, MAX_SAMPLES, problemsOf, ruleOf } from '../../src/ops/console/violations.js';
import { CONTRACT_VIOLATION } from '../../src/policies/response-contract/facts.js';
import { responseContract } from '../../src/policies/response-contract/index.js';

/** 2026-11-23 10:00:00 UTC: a whole hour. */
const T0 = Date.parse('2026-11-23T10:00:00.000Z');
const NONE: ReadonlySet<string> = new Set();

function recorder(over: { deprecated?: ReadonlySet<string>; maxConsumers?: number; trackDelta?: boolean; now?: () => number } = {}): ConsoleRecorder {
  const deprecated = over.deprecated ?? NONE;
  return new ConsoleRecorder({ deprecatedOperations: () => deprecated, maxConsumers: over.maxConsumers, trackDelta: over.trackDelta, now: over.now ?? (() => T0) });
}

/** A record at `at` (startedAt), plain listPets 200 by team-a unless told otherwise. */
function at(ms: number, over: Partial<ExchangeRecord> = {}): ExchangeRecord {
  return record({ startedAt: ms, facts: NO_FACTS, ...over });
}

/** The values of the one minute slot of (operation, consumer) starting at `start`, or undefined. */
function minuteOf(snap: ConsoleSnapshot, operation: string, consumer: string, start: number): readonly number[] | undefined {
  return snap.cells.find((c) => c.operation === operation && c.consumer === consumer)?.minutes.find(([s]) => s === start)?.[1];
}

function counter(values: readonly number[] | undefined, name: CounterName): number {
  return values?.[COUNTERS.indexOf(name)] ?? NaN;
}

// [what, record fields, counter beside `requests` (undefined: none)]
const CLASSES: Array<[string, Partial<ExchangeRecord>, CounterName | undefined]> = [
  ['200', { status: 200 }, undefined],
  ['204', { status: 204, upstreamStatus: 204 }, undefined],
  ['304', { status: 304, upstreamStatus: 304 }, undefined],
  ['400 invalid query', { status: 400, errorCode: 'invalid_query', rejectedBy: 'list-pets', upstreamStatus: undefined }, 'client'],
  ['401 missing key', { status: 401, errorCode: 'missing_api_key', rejectedBy: 'auth', upstreamStatus: undefined, consumer: undefined }, 'client'],
  ['404 from the upstream', { status: 404, errorCode: 'not_found', upstreamStatus: 404 }, 'client'],
  ['413', { status: 413, errorCode: 'payload_too_large', upstreamStatus: undefined }, 'client'],
  ['429 rate_limited', { status: 429, errorCode: 'rate_limited', rejectedBy: 'rate-limit', upstreamStatus: undefined }, 'rateLimited'],
  ['429 too_many_in_flight', { status: 429, errorCode: 'too_many_in_flight', upstreamStatus: undefined }, 'rateLimited'],
  ['429 too_many_auth_failures', { status: 429, errorCode: 'too_many_auth_failures', rejectedBy: 'auth', upstreamStatus: undefined }, 'rateLimited'],
  ['status 0: the client left', { status: 0, upstreamStatus: undefined }, 'aborted'],
  ['status 0 after an upstream failure', { status: 0, upstreamStatus: undefined, upstreamFailure: 'reset' }, 'aborted'],
  ['500 internal_error', { status: 500, errorCode: 'internal_error', upstreamStatus: undefined }, 'gateway'],
  ['501 not_implemented', { status: 501, errorCode: 'not_implemented', upstreamStatus: undefined }, 'gateway'],
  ['507 store_full', { status: 507, errorCode: 'store_full', upstreamStatus: undefined }, 'gateway'],
  ['500 with no code', { status: 500, upstreamStatus: undefined }, 'gateway'],
  ['503 from the rate-limit store', { status: 503, errorCode: 'service_unavailable', rejectedBy: 'rate-limit', upstreamStatus: undefined }, 'gateway'],
  ['503 the breaker', { status: 503, errorCode: 'service_unavailable', rejectedBy: undefined, upstreamStatus: undefined }, 'upstream'],
  ['503 the upstream said', { status: 503, errorCode: 'service_unavailable', upstreamStatus: 503 }, 'upstream'],
  ['500 the upstream answered', { status: 500, errorCode: 'internal_error', upstreamStatus: 500 }, 'upstream'],
  ['502 bad_gateway', { status: 502, errorCode: 'bad_gateway', upstreamStatus: undefined }, 'upstream'],
  ['502 upstream_unavailable', { status: 502, errorCode: 'upstream_unavailable', upstreamStatus: undefined, upstreamFailure: 'refused' }, 'upstream'],
  ['502 upstream_unavailable, no failure kind', { status: 502, errorCode: 'upstream_unavailable', upstreamStatus: undefined }, 'upstream'],
  ['502 upstream_contract_violation', { status: 502, errorCode: 'upstream_contract_violation', upstreamStatus: 200 }, 'upstream'],
  ['502 upstream_error', { status: 502, errorCode: 'upstream_error', upstreamStatus: 200 }, 'upstream'],
  ['502 upstream_auth_failed', { status: 502, errorCode: 'upstream_auth_failed', upstreamStatus: 401 }, 'upstream'],
  ['502 upstream_tls_error', { status: 502, errorCode: 'upstream_tls_error', upstreamStatus: undefined }, 'upstream'],
  ['504 upstream_timeout', { status: 504, errorCode: 'upstream_timeout', upstreamStatus: undefined, upstreamFailure: 'headers_timeout' }, 'upstream'],
  ['500 after a failed call', { status: 500, errorCode: 'internal_error', upstreamStatus: undefined, upstreamFailure: 'invalid_response' }, 'upstream'],
];

t.test('each request counts in requests and in the one counter its status and cause say', async (t) => {
  for (const [what, over, expected] of CLASSES) {
    const rec = recorder();
    const r = at(T0 + 5_000, over);
    t.equal(classify(r), expected, `${what}: ${String(expected)}`);
    rec.onEnd(r);
    const values = minuteOf(rec.snapshot(), 'listPets', r.consumer ?? '-', T0);
    t.equal(values?.length, SLOT_WIDTH, `${what}: one slot`);
    for (const name of COUNTERS) t.equal(counter(values, name), name === 'requests' || name === expected ? 1 : 0, `${what}: ${name}`);
  }
  t.strictSame(
    [...new Set(CLASSES.map(([, , c]) => c).filter((c) => c !== undefined))].sort(),
    COUNTERS.filter((c) => c !== 'requests').sort(),
    'every counter has its cases',
  );
});

t.test('the latency histogram: a duration in the first bucket whose bound it does not exceed', async (t) => {
  t.equal(bucketOf(0), 0);
  t.equal(bucketOf(1), 0, 'le 1');
  t.equal(bucketOf(1.0001), 1);
  t.equal(bucketOf(7.5), LATENCY_BOUNDS_MS.indexOf(7.5));
  t.equal(bucketOf(10_000), LATENCY_BOUNDS_MS.length - 1);
  t.equal(bucketOf(10_000.5), LATENCY_BOUNDS_MS.length, 'past the last bound: its own bucket');
  const rec = recorder();
  for (const ms of [0.5, 12.5, 12.5, 60_000]) rec.onEnd(at(T0, { durationMs: ms }));
  const values = minuteOf(rec.snapshot(), 'listPets', 'team-a', T0)!;
  const histogram = values.slice(COUNTERS.length);
  t.equal(histogram.length, LATENCY_BOUNDS_MS.length + 1);
  t.equal(histogram[0], 1);
  t.equal(histogram[LATENCY_BOUNDS_MS.indexOf(15)], 2, '12.5 ms: le 15');
  t.equal(histogram[LATENCY_BOUNDS_MS.length], 1);
  t.equal(
    histogram.reduce((a, b) => a + b, 0),
    values[0],
    'every request in one bucket',
  );
});

t.test('cells by operation and consumer: no operation and no key count under -', async (t) => {
  const rec = recorder();
  rec.onEnd(at(T0, { operation: undefined, route: 'unknown', status: 404, consumer: undefined }));
  rec.onEnd(at(T0, { operation: 'getPet' }));
  rec.onEnd(at(T0, { operation: 'getPet' }));
  rec.onEnd(at(T0, { consumer: 'team-b' }));
  const snap = rec.snapshot();
  t.strictSame(snap.cells.map((c) => [c.operation, c.consumer, c.minutes[0]![1][0], c.hours[0]![1][0]]).sort(), [
    ['-', '-', 1, 1],
    ['getPet', 'team-a', 2, 2],
    ['listPets', 'team-b', 1, 1],
  ]);
  t.strictSame(
    snap.seen.map((s) => s[0]).sort(),
    ['team-a', 'team-b'],
    'seen: consumers only, not -',
  );
});

t.test('windows roll: 60 minute slots, 24 hour slots, by start; older ones dropped', async (t) => {
  let now = T0;
  const rec = recorder({ now: () => now });
  rec.onEnd(at(T0 + 59_999));
  rec.onEnd(at(T0 + 60_000));
  rec.onEnd(at(T0 + 2 * HOUR_MS + 1));
  now = T0 + 2 * HOUR_MS + 30_000;
  const cell = rec.snapshot().cells[0]!;
  t.strictSame(
    cell.minutes.map(([s, v]) => [s, v[0]]),
    [[T0 + 2 * HOUR_MS, 1]],
    'minutes older than the hour are out',
  );
  t.strictSame(cell.hours.map(([s, v]) => [s, v[0]]), [
    [T0, 2],
    [T0 + 2 * HOUR_MS, 1],
  ]);
  now = T0;
  t.strictSame(
    rec.snapshot(T0 + 60_000).cells[0]!.minutes.map(([s, v]) => [s, v[0]]),
    [],
    'dropped: a snapshot made later took them out',
  );
  now = T0 + 61 * MINUTE_MS - 1;
  const rec2 = recorder({ now: () => now });
  rec2.onEnd(at(T0));
  rec2.onEnd(at(T0 + 60_000));
  t.strictSame(
    rec2.snapshot().cells[0]!.minutes.map(([s]) => s),
    [T0 + 60_000],
    'the last 60 minutes, now included: 10:00 is the 61st',
  );
  t.strictSame(
    rec2.snapshot(T0 + 60 * MINUTE_MS - 1).cells[0]!.minutes.map(([s]) => s),
    [T0 + 60_000],
    'a slot dropped stays dropped',
  );
  const rec3 = recorder();
  rec3.onEnd(at(T0));
  t.equal(rec3.snapshot(T0 + 23 * HOUR_MS).cells[0]!.hours.length, 1, 'the 24th hour: kept');
  t.equal(rec3.snapshot(T0 + 24 * HOUR_MS).cells.length, 0, 'the 25th: gone, and the cell with it');
  t.equal(rec3.rowsInUse, 0, 'its rows released');
});

t.test("a ring place is reused a whole ring later; an older request counts in its own slot", async (t) => {
  const rec = recorder();
  rec.onEnd(at(T0 + 5 * MINUTE_MS));
  rec.onEnd(at(T0 + 65 * MINUTE_MS)); // the same place of the minute ring, an hour later
  rec.onEnd(at(T0 + 5 * MINUTE_MS, { durationMs: 60 * MINUTE_MS })); // a request that started an hour ago: out of the hour's slots
  rec.onEnd(at(T0 + 64 * MINUTE_MS + 59_999)); // started just before the newest slot
  const cell = rec.snapshot(T0 + 65 * MINUTE_MS).cells[0]!;
  t.strictSame(
    cell.minutes.map(([s, v]) => [s, v[0]]),
    [
      [T0 + 64 * MINUTE_MS, 1],
      [T0 + 65 * MINUTE_MS, 1],
    ],
  );
  t.strictSame(
    cell.hours.map(([s, v]) => [s, v[0]]),
    [
      [T0, 2],
      [T0 + HOUR_MS, 2],
    ],
    'the hour slots count all four',
  );
  t.ok(rec.rowsInUse <= 60 + 24, 'bounded by the rings');
});

t.test('rows are bounded by the rings whatever runs, and reused after a snapshot drops them', async (t) => {
  const rec = recorder();
  for (let m = 0; m < 3 * 24 * 60; m += 7) rec.onEnd(at(T0 + m * MINUTE_MS));
  t.ok(rec.rowsInUse <= 60 + 24, `${rec.rowsInUse} rows for one cell, three days long`);
  rec.snapshot(T0 + 10 * DAY_MS);
  t.equal(rec.rowsInUse, 0);
});

t.test('past maxConsumers distinct ids, the rest count under _OTHER', async (t) => {
  const rec = recorder({ maxConsumers: 3, deprecated: new Set(['getPet']) });
  for (const id of ['a', 'b', 'c', 'd', 'e', 'a', 'c']) rec.onEnd(at(T0 + 1_000, { consumer: id, operation: 'getPet' }));
  rec.onEnd(at(T0 + 2_000, { consumer: undefined, status: 401 }));
  const snap = rec.snapshot();
  t.strictSame(snap.cells.map((c) => [c.operation, c.consumer, c.minutes[0]![1][0]]).sort(), [
    ['getPet', '_OTHER', 2],
    ['getPet', 'a', 2],
    ['getPet', 'b', 1],
    ['getPet', 'c', 2],
    ['listPets', '-', 1],
  ]);
  t.strictSame(snap.seen.map((s) => s[0]).sort(), ['_OTHER', 'a', 'b', 'c']);
  t.strictSame(snap.daily.map((d) => [d.consumer, d.days]).sort(), [
    ['_OTHER', [[T0 - 10 * HOUR_MS, 2]]],
    ['a', [[T0 - 10 * HOUR_MS, 2]]],
    ['b', [[T0 - 10 * HOUR_MS, 1]]],
    ['c', [[T0 - 10 * HOUR_MS, 2]]],
  ]);
});

t.test('seen: first and last request of each consumer, whatever the order they end in', async (t) => {
  const rec = recorder();
  rec.onEnd(at(T0 + 5_000));
  rec.onEnd(at(T0 + 1_000));
  rec.onEnd(at(T0 + 9_000, { operation: 'getPet', status: 500 }));
  t.strictSame(rec.snapshot().seen, [['team-a', T0 + 1_000, T0 + 9_000]]);
});

t.test('deprecated calls per UTC day: authenticated only, the set read per request, DAYS_KEPT days', async (t) => {
  let deprecated: ReadonlySet<string> = new Set(['getPet']);
  const rec = new ConsoleRecorder({ deprecatedOperations: () => deprecated, now: () => T0 });
  const midnight = Date.parse('2026-11-24T00:00:00.000Z');
  rec.onEnd(at(midnight - 1, { operation: 'getPet' }));
  rec.onEnd(at(midnight, { operation: 'getPet', status: 404 }));
  rec.onEnd(at(midnight + 1, { operation: 'getPet', status: 0 }));
  rec.onEnd(at(midnight - 2, { operation: 'getPet' })); // ended after the next day's calls
  rec.onEnd(at(midnight, { operation: 'getPet', consumer: undefined, status: 401 }));
  rec.onEnd(at(midnight, { operation: 'listPets' }));
  deprecated = new Set(['listPets']);
  rec.onEnd(at(midnight, { operation: 'getPet' }));
  rec.onEnd(at(midnight, { operation: 'listPets' }));
  const snap = rec.snapshot(midnight + HOUR_MS);
  t.strictSame(
    snap.daily.map((d) => [d.operation, d.consumer, d.days]),
    [
      ['getPet', 'team-a', [[midnight - DAY_MS, 2], [midnight, 2]]],
      ['listPets', 'team-a', [[midnight, 1]]],
    ],
  );
  const far = midnight + (DAYS_KEPT - 1) * DAY_MS;
  t.strictSame(
    rec.snapshot(far).daily.find((d) => d.operation === 'getPet')!.days,
    [[midnight, 2]],
    'the 400th day back is kept, the 401st is not',
  );
  rec.onEnd(at(far, { operation: 'listPets' }));
  t.strictSame(rec.snapshot(far).daily.find((d) => d.operation === 'listPets')!.days, [
    [midnight, 1],
    [far, 1],
  ]);
});

// ---- Violations --------------------------------------------------------------------------------

t.test('a problem as response-contract words it becomes a rule: field and kind', async (t) => {
  const table: Array<[string, string, string]> = [
    ['/0/id must be integer', '/*/id', 'must be integer'],
    ['/12/id must be an integer within int64', '/*/id', 'must be an integer within int64'],
    ['/id must be an integer within int64', '/id', 'must be an integer within int64'],
    ["/ must have required property 'name'", '/', "must have required property 'name'"],
    ["/3 must have required property 'id'", '/*', "must have required property 'id'"],
    ['/ must be array', '/', 'must be array'],
    ['/1/status must be equal to one of the allowed values', '/*/status', 'must be equal to one of the allowed values'],
    ['status 500 where the interface says 200', '(status)', 'status 500 where the interface says 200'],
    ['status 204 where the interface says 201', '(status)', 'status 204 where the interface says 201'],
    ['content-type is not application/json', '(content-type)', 'content-type is not application/json'],
    ['content-encoding gzip', '(content-encoding)', 'content-encoding gzip'],
    ['body larger than the gateway buffers', '(body)', 'body larger than the gateway buffers'],
    ['body is not valid JSON', '(body)', 'body is not valid JSON'],
    ["unknown field 'internalNote'", '(other)', "unknown field 'internalNote'"],
    ['something new', '(other)', 'something new'],
  ];
  for (const [problem, field, kind] of table) t.strictSame(ruleOf(problem), { field, kind }, problem);
  t.strictSame(problemsOf('/0/id must be integer; status 500 where the interface says 200'), ['/0/id must be integer', 'status 500 where the interface says 200']);
});

/** A record with a declared `contractViolation` field (as response-contract declares it) set to `text`. */
function violating(ms: number, text: string | undefined, over: Partial<ExchangeRecord> = {}): ExchangeRecord {
  const facts = new DeclaredFacts(FIELDS);
  facts.set(VIOLATION, text);
  return record({ startedAt: ms, status: 502, errorCode: 'upstream_contract_violation', upstreamStatus: 200, facts, ...over });
}
const VIOLATION = slot<string>('contractViolation');
const FIELDS = Object.freeze([{ name: 'limit', slot: slot<string>('limit') }, { name: VIOLATION_FIELD, slot: VIOLATION }]);

t.test('violations: counted by operation and rule, with the newest samples', async (t) => {
  const rec = recorder();
  rec.onEnd(violating(T0 + 1, '/0/id must be integer; /3/id must be integer; /1 must have required property \'name\'', { requestId: 'r1' }));
  rec.onEnd(violating(T0 + 2, 'status 500 where the interface says 200', { requestId: 'r2', operation: 'getPet', upstreamStatus: 500 }));
  rec.onEnd(violating(T0 + 3, undefined, { requestId: 'r3', status: 200 }));
  rec.onEnd(at(T0 + 4, { requestId: 'r4' }));
  const snap = rec.snapshot();
  t.strictSame(
    [...snap.violations].sort((a, b) => b.count - a.count || a.field.localeCompare(b.field)),
    [
      { operation: 'listPets', field: '/*/id', kind: 'must be integer', count: 2, lastSeenMs: T0 + 1 },
      { operation: 'getPet', field: '(status)', kind: 'status 500 where the interface says 200', count: 1, lastSeenMs: T0 + 2 },
      { operation: 'listPets', field: '/*', kind: "must have required property 'name'", count: 1, lastSeenMs: T0 + 1 },
    ],
  );
  t.strictSame(snap.samples, [
    { atMs: T0 + 2, operation: 'getPet', requestId: 'r2', status: 500, problems: ['status 500 where the interface says 200'] },
    { atMs: T0 + 1, operation: 'listPets', requestId: 'r1', status: 200, problems: ['/0/id must be integer', '/3/id must be integer', "/1 must have required property 'name'"] },
  ]);
  t.equal(snap.cells.find((c) => c.operation === 'listPets')!.minutes[0]![1][COUNTERS.indexOf('upstream')], 1, 'and the 502 counted as the upstream\'s');
});

t.test('violations are bounded: 64 rules per operation then _OTHER, 50 samples', async (t) => {
  const rec = recorder();
  for (let i = 0; i < MAX_RULES + 10; i++) rec.onEnd(violating(T0 + i, `/f${i} must be integer`, { requestId: `r${i}` }));
  rec.onEnd(violating(T0 + 999, '/g must be string', { operation: 'getPet' }));
  const snap = rec.snapshot();
  const listRules = snap.violations.filter((v) => v.operation === 'listPets');
  t.equal(listRules.length, MAX_RULES + 1);
  t.strictSame(
    listRules.find((v) => v.field === '_OTHER'),
    { operation: 'listPets', field: '_OTHER', kind: '_OTHER', count: 10, lastSeenMs: T0 + MAX_RULES + 9 },
  );
  t.equal(snap.violations.filter((v) => v.operation === 'getPet').length, 1, 'another operation has its own 64');
  t.equal(snap.samples.length, MAX_SAMPLES);
  t.equal(snap.samples[0]!.operation, 'getPet', 'newest first');
  t.equal(snap.samples[1]!.requestId, `r${MAX_RULES + 9}`);
  t.equal(snap.samples[MAX_SAMPLES - 1]!.requestId, `r${MAX_RULES + 10 - MAX_SAMPLES + 1}`);
  rec.onEnd(violating(T0, 'a; b; c; d; e; f; g'));
  t.equal(rec.snapshot().samples[0]!.problems.length, 5, 'a sample keeps 5 problems');
});

t.test('the violation field is found by name in each logFields list', async (t) => {
  const rec = recorder();
  const other = slot<string>('contractViolation');
  const facts = new DeclaredFacts(Object.freeze([{ name: VIOLATION_FIELD, slot: other }]));
  facts.set(other, '/ must be object');
  rec.onEnd(violating(T0, '/ must be array'));
  rec.onEnd(record({ startedAt: T0, facts }));
  rec.onEnd(violating(T0, '/ must be array'));
  rec.onEnd(record({ startedAt: T0 })); // list-pets' fields only
  t.strictSame(rec.snapshot().violations.map((v) => [v.kind, v.count]).sort(), [
    ['must be array', 2],
    ['must be object', 1],
  ]);
});

// ---- Deltas ------------------------------------------------------------------------------------

t.test('takeDelta: undefined unless tracked or when nothing changed; its increments add up to the snapshot', async (t) => {
  t.equal(recorder().takeDelta(), undefined, 'not tracked');
  let now = T0;
  const rec = recorder({ trackDelta: true, deprecated: new Set(['getPet']), now: () => now });
  t.equal(rec.takeDelta(), undefined, 'nothing yet');
  const deltas: ConsoleSnapshot[] = [];
  const ops = ['listPets', 'getPet', 'createPet'];
  const statuses = [200, 404, 429, 502, 0, 500];
  for (let i = 0; i < 300; i++) {
    now = T0 + i * 23_000;
    const over: Partial<ExchangeRecord> = { operation: ops[i % 3], consumer: `c${i % 7}`, status: statuses[i % 6], durationMs: i % 40 };
    rec.onEnd(i % 50 === 0 ? violating(now, `/${i}/id must be integer`, over) : at(now, over));
    if (i % 17 === 0) deltas.push(rec.takeDelta()!);
  }
  deltas.push(rec.takeDelta()!);
  t.equal(rec.takeDelta(), undefined, 'all taken');
  const snap = rec.snapshot(now);
  /** Sums of slot values by key. */
  const sums = (list: ConsoleSnapshot[], which: 'minutes' | 'hours', from: number): Map<string, number[]> => {
    const m = new Map<string, number[]>();
    for (const s of list)
      for (const c of s.cells)
        for (const [start, values] of c[which]) {
          if (start < from) continue;
          const key = `${c.operation} ${c.consumer} ${start}`;
          const acc = m.get(key) ?? new Array<number>(SLOT_WIDTH).fill(0);
          values.forEach((v, i) => (acc[i]! += v));
          m.set(key, acc);
        }
    return new Map([...m].sort());
  };
  const minutesFrom = Math.floor(now / MINUTE_MS) * MINUTE_MS - 59 * MINUTE_MS;
  t.strictSame(sums(deltas, 'minutes', minutesFrom), sums([snap], 'minutes', 0), 'minute slots');
  t.strictSame(sums(deltas, 'hours', 0), sums([snap], 'hours', 0), 'hour slots');
  t.ok(snap.cells.length > 0 && snap.cells.every((c) => c.minutes.length > 0 || c.hours.length > 0));
  const days = (list: ConsoleSnapshot[]): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const s of list) for (const d of s.daily) for (const [day, n] of d.days) out[`${d.consumer} ${day}`] = (out[`${d.consumer} ${day}`] ?? 0) + n;
    return out;
  };
  t.strictSame(days(deltas), days([snap]), 'daily counts');
  const rules = (list: ConsoleSnapshot[]): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const s of list) for (const v of s.violations) out[`${v.operation} ${v.field} ${v.kind}`] = (out[`${v.operation} ${v.field} ${v.kind}`] ?? 0) + v.count;
    return out;
  };
  t.strictSame(rules(deltas), rules([snap]), 'violation counts');
  t.strictSame(
    deltas.flatMap((d) => d.samples).sort((a, b) => b.atMs - a.atMs),
    snap.samples,
    'each sample once',
  );
  const lastSeen = new Map<string, readonly [string, number, number]>();
  for (const d of deltas) for (const s of d.seen) lastSeen.set(s[0], s);
  t.strictSame([...lastSeen.values()].sort(), [...snap.seen].sort(), 'seen: the latest values');
  t.equal(rec.rowsInUse, snap.cells.reduce((n, c) => n + c.minutes.length + c.hours.length, 0), 'delta rows released once taken');
});

// ---- The fact, set by response-contract --------------------------------------------------------

t.test('response-contract sets contractViolation on a violating answer, not on a copy aside; the record carries it', async (t) => {
  for (const mode of ['enforce', 'monitor'] as const) {
    const p = responseContract.create({ mode, unknownFields: 'pass' }, { env: {} }) as Policy;
    const chain = new Chain([p]);
    t.strictSame(
      p.declares?.logFields?.map((f) => f.name),
      ['contractViolation'],
      'declared for the access log',
    );
    const ex = chain.open({ method: 'GET', target: '/v1/pets', headers: {} });
    const aside = ex.copyAside();
    const bad: ResponseBody = { status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from('[{"id":1.5,"name":"a","categoryId":1},{"id":2}]'), truncated: false };
    chain.finishResponse(aside, bad);
    t.equal(aside.get(CONTRACT_VIOLATION), undefined, `${mode}: nothing on a copy aside`);
    chain.finishResponse(ex, bad);
    const text = ex.get(CONTRACT_VIOLATION);
    t.equal(text, "/0/id must be an integer within int64; /1 must have required property 'name'; /1 must have required property 'categoryId'", mode);
    const good = chain.open({ method: 'GET', target: '/v1/pets/1', headers: {} });
    chain.finishResponse(good, { status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"id":1,"name":"a","categoryId":1}'), truncated: false });
    t.equal(good.get(CONTRACT_VIOLATION), undefined, `${mode}: nothing on a conforming answer`);
    t.equal(accessLine(record({ facts: good })).contractViolation, undefined, 'the access line has no such field then');
    t.notOk('contractViolation' in accessLine(record({ facts: good })));
    t.equal(accessLine(record({ facts: ex })).contractViolation, text, 'the access line says why');
    const rec = recorder();
    rec.onEnd(record({ startedAt: T0, facts: ex, status: mode === 'enforce' ? 502 : 200 }));
    t.strictSame(
      rec.snapshot().violations.map((v) => [v.field, v.kind, v.count]),
      [
        ['/*/id', 'must be an integer within int64', 1],
        ['/*', "must have required property 'name'", 1],
        ['/*', "must have required property 'categoryId'", 1],
      ],
      `${mode}: the recorder reads it by its declared name`,
    );
  }
});

t.test('response-contract: at most 5 problems, each at most 200 characters; a coding counts too', async (t) => {
  const p = responseContract.create({ mode: 'enforce', unknownFields: 'pass' }, { env: {} }) as Policy;
  const chain = new Chain([p]);
  const ex = chain.open({ method: 'GET', target: '/v1/pets', headers: {} });
  const items = Array.from({ length: 8 }, () => '{"id":"x","name":"a","categoryId":1}').join(',');
  chain.finishResponse(ex, { status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from(`[${items}]`), truncated: false });
  const problems = problemsOf(ex.get(CONTRACT_VIOLATION)!);
  t.equal(problems.length, 5);
  t.ok(problems.every((q) => q.length <= 200));
  const coded = chain.open({ method: 'GET', target: '/v1/pets/1', headers: {} });
  chain.finishResponse(coded, { status: 200, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: Buffer.from('x'), truncated: false });
  t.equal(coded.get(CONTRACT_VIOLATION), 'content-encoding gzip');
  t.strictSame(ruleOf('content-encoding gzip'), { field: '(content-encoding)', kind: 'content-encoding gzip' });
});
