/**
 * ConsumerGate, the per-consumer in-flight bound, with no sockets and a clock the test moves by
 * hand: places per consumer, arrival order, hand-over of a freed place, cancel, expiry and counts.
 */
import t from 'tap';
import { ConsumerGate, type GateEntry } from '../../src/core/consumer-gate.js';
import type { Clock } from '../../src/core/deadlines.js';

/** A clock whose one timer fires when `advance` passes it. */
function manualClock(): Clock & { advance(ms: number): void } {
  let now = 0;
  let timer: { at: number; fire: () => void } | undefined;
  return {
    now: () => now,
    set(fire, ms) {
      timer = { at: now + ms, fire };
      return timer;
    },
    clear(handle) {
      if (timer === handle) timer = undefined;
    },
    advance(ms) {
      now += ms;
      const due = timer;
      if (due !== undefined && due.at <= now) {
        timer = undefined;
        due.fire();
      }
    },
  };
}

function entry(name: string, log: string[]): GateEntry {
  return { admitted: () => log.push(`${name} admitted`), expired: () => log.push(`${name} expired`) };
}

t.test('N places per consumer; past them requests wait, and a freed place goes to the oldest', async (t) => {
  const log: string[] = [];
  const gate = new ConsumerGate({ maxInFlight: 2, queueMs: 1000 }, manualClock());
  t.equal(gate.enter('a', entry('a1', log)), undefined, 'a1 has a place');
  t.equal(gate.enter('a', entry('a2', log)), undefined, 'a2 has a place');
  t.not(gate.enter('a', entry('a3', log)), undefined, 'a3 waits');
  t.not(gate.enter('a', entry('a4', log)), undefined, 'a4 waits');
  t.equal(gate.enter('b', entry('b1', log)), undefined, 'another consumer has its own places');
  t.equal(gate.waitingOf('a'), 2);
  gate.leave('a');
  t.strictSame(log, ['a3 admitted'], 'the oldest waiting gets the freed place');
  t.equal(gate.inFlightOf('a'), 2, 'the place passed on, not freed');
  gate.leave('a');
  gate.leave('a');
  t.strictSame(log, ['a3 admitted', 'a4 admitted']);
  t.equal(gate.inFlightOf('a'), 1);
  gate.leave('a');
  t.equal(gate.inFlightOf('a'), 0, 'all places free again');
  t.strictSame(gate.counts, { queued: 2, expired: 0 });
});

t.test('a waiting request expires after queueMs, not before; a cancelled one never does', async (t) => {
  const log: string[] = [];
  const clock = manualClock();
  const gate = new ConsumerGate({ maxInFlight: 1, queueMs: 500 }, clock);
  gate.enter('a', entry('a1', log));
  const w2 = gate.enter('a', entry('a2', log));
  clock.advance(100);
  gate.enter('a', entry('a3', log));
  if (w2 === undefined) throw new Error('a2 should wait');
  gate.cancel(w2);
  t.equal(gate.waitingOf('a'), 1, 'a2 left the queue');
  clock.advance(399);
  t.strictSame(log, [], 'nothing expired before queueMs');
  clock.advance(101);
  t.strictSame(log, ['a3 expired'], 'a3 expired at queueMs; a2 (cancelled) never');
  t.equal(gate.waitingOf('a'), 0);
  gate.leave('a');
  t.equal(gate.inFlightOf('a'), 0, 'the freed place goes to nobody');
  t.strictSame(gate.counts, { queued: 2, expired: 1 });
});
