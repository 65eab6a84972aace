/**
 * DeadlineList: the response-head and body-idle deadlines of every engine, one list and one timer
 * per duration. On a clock the test moves (test/helpers/clock.ts), so each deadline is checked to
 * the millisecond, both ways: not a millisecond early, and due exactly when it should be. One test
 * at the end runs on the real clock (performance.now() and node's timers), with a lower bound
 * only: on a loaded 2-core machine a timer can run hundreds of milliseconds late.
 */
import t from 'tap';
import { DeadlineList, REAL_CLOCK, type Clock, type Deadlined, type DeadlineOwner } from '../../src/core/deadlines.js';
import { ManualClock } from '../helpers/clock.js';
import { waitFor } from '../helpers/wait.js';

/** How late a real timer may run on a loaded machine before the test calls it a failure. */
const LATE_MS = 1000;

class Item implements Deadlined {
  deadlinePrev: Deadlined | undefined = undefined;
  deadlineNext: Deadlined | undefined = undefined;
  deadlineAt = 0;
  deadlineList: DeadlineOwner | undefined = undefined;
  /** When it expired, ms after `t0`. */
  expiredAt: number | undefined = undefined;
  last: number;
  constructor(
    readonly name: string,
    readonly t0: number,
  ) {
    this.last = t0;
  }
}

/** A list whose items expire at once when due, recording when and in which order. */
function expiring(clock: Clock, ms: number, order: string[] = []): DeadlineList<Item> {
  return new DeadlineList<Item>(
    ms,
    (item, now) => {
      item.expiredAt = now - item.t0;
      order.push(item.name);
      return undefined;
    },
    clock,
  );
}

t.test('an item expires once, ms after it was added and not a millisecond before', async (t) => {
  const clock = new ManualClock();
  const list = expiring(clock, 60);
  const item = new Item('a', clock.now());
  list.add(item);
  t.equal(list.size, 1);
  t.equal(clock.armed, 1, 'one timer for the list');
  clock.advance(59);
  t.equal(item.expiredAt, undefined, 'not at 59 ms');
  clock.advance(1);
  t.equal(item.expiredAt, 60, 'at 60 ms');
  t.equal(list.size, 0, 'off the list once expired');
  t.equal(item.deadlineList, undefined);
  t.equal(clock.armed, 0, 'an empty list leaves no timer armed');
  clock.advance(1000);
  t.equal(item.expiredAt, 60, 'once');
});

t.test('a removed item never expires; the others still do, in the order they fall due', async (t) => {
  const clock = new ManualClock();
  const order: string[] = [];
  const list = expiring(clock, 80, order);
  const a = new Item('a', clock.now());
  list.add(a);
  clock.advance(10);
  const b = new Item('b', clock.now());
  list.add(b);
  clock.advance(10);
  const c = new Item('c', clock.now());
  list.add(c);
  list.remove(a); // the head: the armed timer finds nothing due and re-arms for b
  list.remove(a); // twice: nothing
  t.equal(list.size, 2);
  clock.advance(60); // a's deadline: nothing is due
  t.same(order, [], 'nothing at the removed item\'s deadline');
  t.equal(clock.armed, 1, 're-armed for b');
  clock.advance(9);
  t.same(order, [], 'b not a millisecond early');
  clock.advance(1);
  t.same(order, ['b']);
  clock.advance(10);
  t.same(order, ['b', 'c']);
  t.equal(a.expiredAt, undefined, 'the removed item never expired');
  t.same([b.expiredAt, c.expiredAt], [80, 80], 'each exactly 80 ms after it was added');
});

t.test('an earlier explicit deadline goes before later ones and re-arms the timer earlier', async (t) => {
  const clock = new ManualClock();
  const order: string[] = [];
  const list = expiring(clock, 5000, order);
  const late = new Item('late', clock.now());
  list.add(late); // the timer is armed 5 s away
  const early = new Item('early', clock.now());
  list.add(early, clock.now() + 50);
  t.equal(clock.armed, 1, 'one timer, moved, not a second one');
  clock.advance(49);
  t.equal(early.expiredAt, undefined, 'not before 50 ms');
  clock.advance(1);
  t.equal(early.expiredAt, 50, 'at 50 ms, not at the 5 s the timer was first armed for');
  t.same(order, ['early']);
  t.equal(list.size, 1, 'the late one still waits');
  clock.advance(4949);
  t.equal(late.expiredAt, undefined, 'the late one not before 5000 ms');
  clock.advance(1);
  t.equal(late.expiredAt, 5000, 'the timer was re-armed for the late one');
  t.equal(list.size, 0);
});

t.test('an item listed again is moved, not listed twice', async (t) => {
  const clock = new ManualClock();
  const a = expiring(clock, 5000);
  const b = expiring(clock, 40);
  const item = new Item('x', clock.now());
  a.add(item);
  b.add(item);
  t.equal(a.size, 0, 'off the first list');
  t.equal(b.size, 1);
  clock.advance(40);
  t.equal(item.expiredAt, 40, 'expired on the second list');
  t.equal(b.size, 0);
  clock.advance(5000);
  t.equal(item.expiredAt, 40, 'and not again from the first');
});

/** The body-idle rule: due again `ms` after the last activity, or later while held back. */
function idleList(clock: Clock, ms: number, held: () => boolean): DeadlineList<Item> {
  return new DeadlineList<Item>(
    ms,
    (item, now) => {
      const next = held() ? now + ms : item.last + ms;
      if (next > now) return next;
      item.expiredAt = now - item.t0;
      return undefined;
    },
    clock,
  );
}

t.test('activity postpones the deadline; it falls ms after the last activity', async (t) => {
  const clock = new ManualClock();
  const IDLE = 400;
  const list = idleList(clock, IDLE, () => false);
  const item = new Item('body', clock.now());
  list.add(item);
  // Activity every 20 ms for 600 ms: longer than IDLE, never IDLE without a touch.
  for (let i = 0; i < 30; i++) {
    clock.advance(20);
    item.last = clock.now();
  }
  t.equal(item.expiredAt, undefined, 'not expired during 600 ms of activity');
  clock.advance(IDLE - 1);
  t.equal(item.expiredAt, undefined, `not ${IDLE - 1} ms after the last activity`);
  clock.advance(1);
  t.equal(item.expiredAt, 600 + IDLE, `exactly ${IDLE} ms after the last activity`);
  t.equal(list.size, 0);
});

t.test('while held back it never expires; released, it expires ms later', async (t) => {
  const clock = new ManualClock();
  let held = true;
  const list = idleList(clock, 30, () => held);
  const item = new Item('held', clock.now());
  list.add(item);
  clock.advance(150);
  t.equal(item.expiredAt, undefined, 'not while held, 5 deadlines long');
  t.equal(list.size, 1, 'still listed');
  held = false;
  const releasedAt = clock.now() - item.t0;
  item.last = clock.now();
  clock.advance(29);
  t.equal(item.expiredAt, undefined, 'not 29 ms after the release');
  clock.advance(1);
  t.equal(item.expiredAt, releasedAt + 30, '30 ms after the release');
});

t.test('a due callback that answers the past cannot spin: the item is due again 1 ms on', async (t) => {
  const clock = new ManualClock();
  let calls = 0;
  const list = new DeadlineList<Item>(10, (_item, now) => (++calls >= 3 ? undefined : now - 100), clock);
  const item = new Item('past', clock.now());
  list.add(item);
  clock.advance(10);
  t.equal(calls, 1, 'called once at the deadline, not again in the same turn');
  t.equal(list.size, 1, 'still listed');
  clock.advance(1);
  t.equal(calls, 2, 'again 1 ms on');
  clock.advance(1);
  t.equal(calls, 3, 'once per timer turn, not in a loop');
  t.equal(list.size, 0);
});

t.test('on the real clock (the default): due not before ms, and the timer does not hold the process', async (t) => {
  const order: string[] = [];
  const list = expiring(REAL_CLOCK, 40, order);
  t.equal(list.clock, REAL_CLOCK, 'the default clock');
  const item = new Item('real', performance.now());
  list.add(item);
  const other = new Item('removed', performance.now());
  list.add(other, performance.now() + 5);
  list.remove(other);
  const at = await waitFor('the deadline', () => item.expiredAt, 40 + LATE_MS);
  t.ok(at >= 39, `not before 40 ms (${at.toFixed(0)} ms; 1 ms of timer rounding)`);
  t.same(order, ['real'], 'the removed item never expired');
});
