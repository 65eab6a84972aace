/**
 * The operator console attacked without sockets: what a hostile upstream, a stepping clock, a
 * flood or an operator's hostile text can do to the recorder (src/ops/console/series.ts), the
 * violation book (violations.ts) and the keys' owner and contact checks (src/core/key-owner.ts).
 */
import t from 'tap';
import { record } from '../helpers/record.js';
import { NO_FACTS } from '../../src/core/facts.js';
import type { ExchangeRecord } from '../../src/core/record.js';
import { ConsoleRecorder } from '../../src/ops/console/series.js';
import { HOUR_MS, MINUTE_MS } from '../../src/ops/console/slots.js';
import { COUNTERS, HOURS_KEPT, MINUTES_KEPT, NOBODY, type ConsoleSnapshot } from '../../src/ops/console/types.js';

/** 2026-11-23 10:00:00 UTC: a whole hour. */
const T0 = Date.parse('2026-11-23T10:00:00.000Z');
const REQUESTS = COUNTERS.indexOf('requests');

const at = (ms: number, over: Partial<ExchangeRecord> = {}): ExchangeRecord => record({ startedAt: ms, facts: NO_FACTS, ...over });


function requestsIn(snap: ConsoleSnapshot, kind: 'minutes' | 'hours'): number {
  let n = 0;
  for (const c of snap.cells) for (const [, v] of c[kind]) n += v[REQUESTS] ?? 0;
  return n;
}

t.test('a clock stepped back does not stop the counting (the slots it left ahead are taken back)', async (t) => {
  // The wall clock ran a day ahead for an hour (a VM without its RTC, a wrong NTP source), then was put right.
  let now = T0 + 24 * HOUR_MS;
  for (const trackDelta of [false, true]) {
    const rec = new ConsoleRecorder({ deprecatedOperations: () => new Set(), trackDelta, now: () => now });
    for (let m = 0; m < 60; m++) rec.onEnd(at(T0 + 24 * HOUR_MS + m * MINUTE_MS));
    rec.takeDelta();
    // Put right: requests every minute of the next hour, at the true time.
    for (let m = 0; m < 60; m++) rec.onEnd(at(T0 + m * MINUTE_MS + 1000));
    now = T0 + 59 * MINUTE_MS + 30_000;
    const snap = rec.snapshot(now);
    t.equal(requestsIn(snap, 'minutes'), 60, `trackDelta ${trackDelta}: the hour after the step is counted in the minute slots`);
    t.equal(requestsIn(snap, 'hours'), 60, `trackDelta ${trackDelta}: and in the hour slots`);
    if (trackDelta) {
      const delta = rec.takeDelta(now);
      let n = 0;
      for (const c of delta?.cells ?? []) for (const [start, v] of c.minutes) if (start <= now) n += v[REQUESTS] ?? 0;
      t.equal(n, 60, 'the delta sent to Redis holds them too');
    }
    now = T0 + 24 * HOUR_MS;
  }
  // A request that really started 61 minutes ago (a long one) still falls out of the minute window.
  const rec = new ConsoleRecorder({ deprecatedOperations: () => new Set(), now: () => T0 + 61 * MINUTE_MS });
  rec.onEnd(at(T0 + 61 * MINUTE_MS));
  rec.onEnd(at(T0 + MINUTE_MS, { durationMs: 60 * MINUTE_MS }));
  t.equal(requestsIn(rec.snapshot(), 'minutes'), 1, 'a slot a whole window old is still not counted');
});

t.test('a flood of requests keeps the recorder within its bounds', async (t) => {
  let now = T0;
  const rec = new ConsoleRecorder({ deprecatedOperations: () => new Set(['getPet']), trackDelta: true, maxConsumers: 50, now: () => now });
  const ops = ['listPets', 'getPet', 'createPet', undefined];
  // Three days of requests, from 200 consumer ids (past maxConsumers: _OTHER), with a take every 10 minutes.
  let i = 0;
  for (let m = 0; m < 3 * 24 * 60; m += 1) {
    now = T0 + m * MINUTE_MS;
    for (let k = 0; k < 7; k++, i++) rec.onEnd(at(now + k, { consumer: i % 11 === 0 ? undefined : `c${i % 200}`, operation: ops[i % 4], durationMs: i % 13 }));
    if (m % 10 === 0) rec.takeDelta(now);
    if (m % 60 === 0) rec.snapshot(now);
  }
  const snap = rec.snapshot(now);
  const consumers = new Set(snap.cells.map((c) => c.consumer));
  t.ok(consumers.size <= 52, `consumers bounded: ${consumers.size} (50, _OTHER and -)`);
  t.ok(consumers.has(NOBODY), 'requests without a key count under -');
  const cells = snap.cells.length;
  t.ok(cells <= 52 * 4, `cells bounded: ${cells}`);
  t.ok(rec.rowsInUse <= cells * (MINUTES_KEPT + HOURS_KEPT) * 2, `rows bounded: ${rec.rowsInUse}`);
  for (const d of snap.daily) t.ok(d.days.length <= 400, 'days bounded');
});

