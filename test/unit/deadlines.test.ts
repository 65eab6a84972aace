/**
 * DeadlineList: the response-head and body-idle deadlines of every engine, one list and one timer
 * per duration. Real timers, bounded waits.
 *
 * Bands: a lower bound is exact (firing before the deadline would cut a healthy exchange short);
 * an upper bound only proves that it does fire, soon: on a loaded 2-core machine a timer can run
 * hundreds of milliseconds late, so a tight upper bound would fail for reasons not the list's.
 */
import t from 'tap';
import { DeadlineList, type Deadlined, type DeadlineOwner } from '../../src/core/deadlines.js';
import { sleep, waitFor } from '../helpers/wait.js';

/** How late a timer may run on a loaded machine before the test calls it a failure. */
const LATE_MS = 1000;

class Item implements Deadlined {
  deadlinePrev: Deadlined | undefined = undefined;
  deadlineNext: Deadlined | undefined = undefined;
  deadlineAt = 0;
  deadlineList: DeadlineOwner | undefined = undefined;
  /** When it expired, ms after `t0`. */
  expiredAt: number | undefined = undefined;
  last = performance.now();
  constructor(
    readonly name: string,
    readonly t0 = performance.now(),
  ) {}
}

/** A list whose items expire at once when due, recording when and in which order. */
function expiring(ms: number, order: string[] = []): DeadlineList<Item> {
  return new DeadlineList<Item>(ms, (item, now) => {
    item.expiredAt = now - item.t0;
    order.push(item.name);
    return undefined;
  });
}

t.test('an item expires once, ms after it was added at the earliest', async (t) => {
  const list = expiring(60);
  const item = new Item('a');
  list.add(item);
  t.equal(list.size, 1);
  const at = await waitFor('the deadline', () => item.expiredAt, 60 + LATE_MS);
  t.ok(at >= 59, `not before 60 ms (${at.toFixed(0)} ms; 1 ms of timer rounding)`);
  t.equal(list.size, 0, 'off the list once expired');
  t.equal(item.deadlineList, undefined);
  await sleep(100);
  t.equal(item.expiredAt, at, 'once');
});

t.test('a removed item never expires; the others still do, in the order they fall due', async (t) => {
  const order: string[] = [];
  const list = expiring(80, order);
  const a = new Item('a');
  list.add(a);
  await sleep(10);
  const b = new Item('b');
  list.add(b);
  await sleep(10);
  const c = new Item('c');
  list.add(c);
  list.remove(a); // the head: the armed timer finds nothing due and re-arms for b
  list.remove(a); // twice: nothing
  t.equal(list.size, 2);
  await waitFor('both deadlines', () => c.expiredAt, 80 + LATE_MS);
  t.same(order, ['b', 'c']);
  t.equal(a.expiredAt, undefined, 'the removed item never expired');
  t.ok(b.expiredAt! >= 79 && c.expiredAt! >= 79, `none early (b ${b.expiredAt!.toFixed(0)} ms, c ${c.expiredAt!.toFixed(0)} ms)`);
});

t.test('an earlier explicit deadline goes before later ones and re-arms the timer earlier', async (t) => {
  const order: string[] = [];
  const list = expiring(5000, order);
  const late = new Item('late');
  list.add(late); // the timer is armed 5 s away
  const early = new Item('early');
  list.add(early, performance.now() + 50);
  const at = await waitFor('the early deadline', () => early.expiredAt, 50 + LATE_MS);
  t.ok(at >= 49, `not before 50 ms (${at.toFixed(0)} ms)`);
  t.same(order, ['early']);
  t.equal(list.size, 1, 'the late one still waits');
  list.remove(late);
  t.equal(list.size, 0);
});

t.test('an item listed again is moved, not listed twice', async (t) => {
  const a = expiring(5000);
  const b = expiring(40);
  const item = new Item('x');
  a.add(item);
  b.add(item);
  t.equal(a.size, 0, 'off the first list');
  t.equal(b.size, 1);
  await waitFor('the second list', () => item.expiredAt, 40 + LATE_MS);
  t.equal(b.size, 0);
});

/** The body-idle rule: due again `ms` after the last activity, or later while held back. */
function idleList(ms: number, held: () => boolean): DeadlineList<Item> {
  return new DeadlineList<Item>(ms, (item, now) => {
    const next = held() ? now + ms : item.last + ms;
    if (next > now) return next;
    item.expiredAt = now - item.t0;
    return undefined;
  });
}

t.test('activity postpones the deadline; it falls ms after the last activity', async (t) => {
  // ms is 20 times the activity interval, so only a stall of the whole machine for 400 ms between
  // two touches can let it expire early; such an attempt is repeated (at most 3 times).
  const IDLE = 400;
  for (let attempt = 1; attempt <= 3; attempt++) {
    const list = idleList(IDLE, () => false);
    const item = new Item('body');
    list.add(item);
    t.teardown(() => list.remove(item));
    let last = 0;
    let maxGap = 0;
    // Activity every 20 ms for about 600 ms: longer than IDLE, never IDLE without a touch.
    for (let i = 0; i < 30; i++) {
      await sleep(20);
      item.last = performance.now();
      const now = item.last - item.t0;
      maxGap = Math.max(maxGap, now - last);
      last = now;
    }
    if (maxGap >= IDLE - 20) {
      list.remove(item);
      t.comment(`attempt ${attempt}: the machine stalled ${maxGap.toFixed(0)} ms between two touches; again`);
      continue;
    }
    t.equal(item.expiredAt, undefined, `not expired during ${last.toFixed(0)} ms of activity (longest gap ${maxGap.toFixed(0)} ms)`);
    const at = await waitFor('the idle deadline', () => item.expiredAt, IDLE + LATE_MS);
    t.ok(at - last >= IDLE - 1, `${(at - last).toFixed(0)} ms after the last activity, not before ${IDLE} ms`);
    return;
  }
  t.fail('three attempts in a row stalled for the whole deadline: no measurement');
});

t.test('while held back it never expires; released, it expires ms later', async (t) => {
  let held = true;
  const list = idleList(30, () => held);
  const item = new Item('held');
  list.add(item);
  await sleep(150);
  t.equal(item.expiredAt, undefined, 'not while held, 5 deadlines long');
  t.equal(list.size, 1, 'still listed');
  held = false;
  const releasedAt = performance.now() - item.t0;
  item.last = performance.now();
  const at = await waitFor('the deadline after release', () => item.expiredAt, 30 + LATE_MS);
  t.ok(at - releasedAt >= 29, `${(at - releasedAt).toFixed(0)} ms after the release`);
});

t.test('a due callback that answers the past cannot spin: the item is due again 1 ms on', async (t) => {
  let calls = 0;
  const list = new DeadlineList<Item>(10, (_item, now) => (++calls >= 3 ? undefined : now - 100));
  const item = new Item('past');
  list.add(item);
  await waitFor('three calls', () => calls >= 3, 10 + LATE_MS * 2);
  t.equal(calls, 3, 'called once per timer turn, not in a loop');
  t.equal(list.size, 0);
});
