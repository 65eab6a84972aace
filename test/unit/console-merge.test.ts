/**
 * Console snapshots added together (src/ops/console/merge.ts): cells by (operation, consumer) and
 * slots by start, number by number; daily counts added; first and last seen; violation rules added
 * and bounded per operation; samples newest first and bounded; everything out of the windows left out.
 */
import t from 'tap';
import { addInto, DAY_MS, HOUR_MS, keptFrom, MAX_RULES, MAX_SAMPLES, mergeSnapshots, MINUTE_MS, SnapshotSum } from '../../src/ops/console/merge.js';
import { DAYS_KEPT, HOURS_KEPT, MINUTES_KEPT, SLOT_WIDTH, type ConsoleSnapshot, type ViolationSample } from '../../src/ops/console/types.js';

/** 2030-06-01T12:34:56.789Z */
const NOW = Date.UTC(2030, 5, 1, 12, 34, 56, 789);
const MIN0 = Date.UTC(2030, 5, 1, 12, 34);
const HOUR0 = Date.UTC(2030, 5, 1, 12);
const DAY0 = Date.UTC(2030, 5, 1);

/** A slot's numbers: the given leading numbers, zeros after. */
function v(...lead: number[]): number[] {
  return [...lead, ...new Array<number>(SLOT_WIDTH - lead.length).fill(0)];
}

function snap(part: Partial<ConsoleSnapshot>): ConsoleSnapshot {
  return { atMs: NOW, cells: [], daily: [], seen: [], violations: [], samples: [], ...part };
}

const sample = (atMs: number, requestId: string, operation = 'getPet'): ViolationSample => ({ atMs, operation, requestId, status: 200, problems: ['/id must be integer'] });

t.test('the windows kept: 60 minutes, 24 hours, 400 days, each ending with the current one', async (t) => {
  const from = keptFrom(NOW);
  t.equal(from.minute, MIN0 - (MINUTES_KEPT - 1) * MINUTE_MS);
  t.equal(from.hour, HOUR0 - (HOURS_KEPT - 1) * HOUR_MS);
  t.equal(from.day, DAY0 - (DAYS_KEPT - 1) * DAY_MS);
  t.equal(keptFrom(MIN0).minute, MIN0 - 59 * MINUTE_MS, 'a whole minute is its own slot');
});

t.test('cells add by operation and consumer, slots by start, number by number', async (t) => {
  const a = snap({
    cells: [
      { operation: 'getPet', consumer: 'k1', minutes: [[MIN0 - MINUTE_MS, v(2, 1)], [MIN0, v(3)]], hours: [[HOUR0, v(5, 1)]] },
      { operation: 'listPets', consumer: '-', minutes: [[MIN0, v(1)]], hours: [[HOUR0, v(1)]] },
    ],
  });
  const b = snap({
    cells: [
      { operation: 'getPet', consumer: 'k1', minutes: [[MIN0, v(4, 0, 1)]], hours: [[HOUR0 - HOUR_MS, v(7)], [HOUR0, v(4, 0, 1)]] },
      { operation: 'getPet', consumer: 'k2', minutes: [[MIN0, v(1)]], hours: [[HOUR0, v(1)]] },
    ],
  });
  const m = mergeSnapshots([a, b], NOW);
  t.equal(m.atMs, NOW);
  t.strictSame(
    m.cells.map((c) => [c.operation, c.consumer]),
    [
      ['getPet', 'k1'],
      ['getPet', 'k2'],
      ['listPets', '-'],
    ],
    'sorted by operation, then consumer',
  );
  t.strictSame(m.cells[0]?.minutes, [
    [MIN0 - MINUTE_MS, v(2, 1)],
    [MIN0, v(7, 0, 1)],
  ]);
  t.strictSame(m.cells[0]?.hours, [
    [HOUR0 - HOUR_MS, v(7)],
    [HOUR0, v(9, 1, 1)],
  ]);
  t.strictSame(m.cells[2]?.minutes, [[MIN0, v(1)]]);
  t.strictSame(mergeSnapshots([b, a], NOW), m, 'the order of the list does not matter');
  t.strictSame(mergeSnapshots([a], NOW).cells[0]?.minutes, a.cells[0]?.minutes, 'one snapshot is itself');
  t.strictSame(a.cells[0]?.minutes[1], [MIN0, v(3)], 'the inputs are not changed');
});

t.test('slots, days and empty cells out of the windows at nowMs are left out', async (t) => {
  const from = keptFrom(NOW);
  const a = snap({
    cells: [
      { operation: 'getPet', consumer: 'k1', minutes: [[from.minute - MINUTE_MS, v(1)], [from.minute, v(2)]], hours: [[from.hour - HOUR_MS, v(3)], [from.hour, v(4)]] },
      { operation: 'getPet', consumer: 'old', minutes: [[from.minute - MINUTE_MS, v(1)]], hours: [[from.hour - HOUR_MS, v(1)]] },
    ],
    daily: [{ operation: 'getPet', consumer: 'k1', days: [[from.day - DAY_MS, 9], [from.day, 1], [DAY0, 2]] }],
  });
  const m = mergeSnapshots([a], NOW);
  t.strictSame(m.cells, [{ operation: 'getPet', consumer: 'k1', minutes: [[from.minute, v(2)]], hours: [[from.hour, v(4)]] }]);
  t.strictSame(m.daily, [{ operation: 'getPet', consumer: 'k1', days: [[from.day, 1], [DAY0, 2]] }]);
});

t.test('daily counts add; first seen is the earliest, last seen the latest', async (t) => {
  const a = snap({
    daily: [{ operation: 'getPet', consumer: 'k1', days: [[DAY0 - DAY_MS, 3], [DAY0, 1]] }],
    seen: [
      ['k1', 100, 500],
      ['k2', 50, 60],
    ],
  });
  const b = snap({
    daily: [
      { operation: 'getPet', consumer: 'k1', days: [[DAY0, 4]] },
      { operation: 'getPet', consumer: 'k0', days: [[DAY0 - 2 * DAY_MS, 1]] },
    ],
    seen: [
      ['k1', 20, 400],
      ['-', 1, 2],
    ],
  });
  const m = mergeSnapshots([a, b], NOW);
  t.strictSame(m.daily, [
    { operation: 'getPet', consumer: 'k0', days: [[DAY0 - 2 * DAY_MS, 1]] },
    {
      operation: 'getPet',
      consumer: 'k1',
      days: [
        [DAY0 - DAY_MS, 3],
        [DAY0, 5],
      ],
    },
  ]);
  t.strictSame(m.seen, [
    ['-', 1, 2],
    ['k1', 20, 500],
    ['k2', 50, 60],
  ]);
});

t.test('violation rules add, the latest time wins, at most MAX_RULES per operation (the most counted)', async (t) => {
  const a = snap({
    violations: [
      { operation: 'getPet', field: '/id', kind: 'must be integer', count: 3, lastSeenMs: 1000 },
      { operation: 'listPets', field: '/*/name', kind: "must have required property 'name'", count: 1, lastSeenMs: 10 },
    ],
  });
  const b = snap({ violations: [{ operation: 'getPet', field: '/id', kind: 'must be integer', count: 2, lastSeenMs: 900 }] });
  const m = mergeSnapshots([a, b], NOW);
  t.strictSame(m.violations, [
    { operation: 'getPet', field: '/id', kind: 'must be integer', count: 5, lastSeenMs: 1000 },
    { operation: 'listPets', field: '/*/name', kind: "must have required property 'name'", count: 1, lastSeenMs: 10 },
  ]);
  // 70 distinct rules of getPet in one, 10 more counted in another: the MAX_RULES most counted stay.
  const many = snap({ violations: Array.from({ length: 70 }, (_, i) => ({ operation: 'getPet', field: `/f${i}`, kind: 'must be string', count: i + 1, lastSeenMs: i })) });
  const more = snap({ violations: Array.from({ length: 10 }, (_, i) => ({ operation: 'getPet', field: `/f${i}`, kind: 'must be string', count: 100, lastSeenMs: 1 })) });
  const kept = mergeSnapshots([many, more, a], NOW).violations.filter((r) => r.operation === 'getPet');
  t.equal(kept.length, MAX_RULES);
  t.strictSame(
    kept.slice(0, 3).map((r) => [r.field, r.count]),
    [
      ['/f9', 110],
      ['/f8', 109],
      ['/f7', 108],
    ],
    'most counted first',
  );
  t.notOk(
    kept.some((r) => r.field === '/f15' || r.field === '/id'),
    'the least counted are dropped (/f15: 16, /id: 3)',
  );
  t.ok(
    kept.some((r) => r.field === '/f16'),
    '/f16 (17) is the 64th: /f0-/f9 (101-110), then /f69 (70) down to /f16',
  );
});

t.test('samples: the newest MAX_SAMPLES of all, newest first', async (t) => {
  const a = snap({ samples: Array.from({ length: 40 }, (_, i) => sample(1000 - i * 2, `a${i}`)) });
  const b = snap({ samples: Array.from({ length: 40 }, (_, i) => sample(1001 - i * 2, `b${i}`)) });
  const m = mergeSnapshots([a, b], NOW);
  t.equal(m.samples.length, MAX_SAMPLES);
  t.strictSame(
    m.samples.slice(0, 3).map((s) => s.requestId),
    ['b0', 'a0', 'b1'],
  );
  t.ok(
    m.samples.every((s, i) => i === 0 || (m.samples[i - 1]?.atMs ?? 0) >= s.atMs),
    'newest first',
  );
  t.equal(m.samples.at(-1)?.atMs, 1000 - 24 * 2, 'the 50th newest: a24 (952)');
  const tie = mergeSnapshots([snap({ samples: [sample(5, 'r2'), sample(5, 'r1')] })], NOW);
  t.strictSame(
    tie.samples.map((s) => s.requestId),
    ['r1', 'r2'],
    'equal times in a stable order',
  );
});

t.test('a pending sum: deltas added in, trimmed as time goes on, empty when nothing is held', async (t) => {
  const pending = new SnapshotSum();
  t.ok(pending.empty);
  addInto(pending, snap({ cells: [{ operation: 'getPet', consumer: 'k1', minutes: [[MIN0, v(1)]], hours: [[HOUR0, v(1)]] }] }), NOW);
  addInto(pending, snap({ cells: [{ operation: 'getPet', consumer: 'k1', minutes: [[MIN0, v(1)]], hours: [[HOUR0, v(1)]] }] }), NOW);
  t.notOk(pending.empty);
  t.strictSame(pending.snapshot(NOW).cells[0]?.minutes, [[MIN0, v(2)]]);
  // An hour later the minute slot is out of its window, the hour slot is not.
  const later = NOW + HOUR_MS;
  pending.trim(later);
  t.strictSame(pending.snapshot(later).cells, [{ operation: 'getPet', consumer: 'k1', minutes: [], hours: [[HOUR0, v(2)]] }]);
  pending.trim(NOW + 25 * HOUR_MS);
  t.ok(pending.empty, 'a day later nothing is left');
});
