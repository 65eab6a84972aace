/**
 * The split's sides (src/migration/side.ts): over 1,000 key ids, each on one side every
 * time, the share on next within binomial bounds at several percents, monotone as the percent
 * rises (no key ever moves back to legacy), and a place that is a fixed function of the id (every
 * instance, worker and version agrees).
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { placeOf, splitSide } from '../../src/migration/side.js';

const ids = Array.from({ length: 1000 }, (_, i) => (i % 2 === 0 ? `key-${i}` : randomBytes(6).toString('hex')));

t.test('each key on one side every time; the share within binomial bounds', async (t) => {
  for (const percent of [1, 10, 30, 50, 90]) {
    const sides = ids.map((id) => splitSide(id, percent));
    t.same(ids.map((id) => splitSide(id, percent)), sides, `${percent}%: the same side on a second look`);
    const onNext = sides.filter((s) => s === 'next').length;
    const mean = (ids.length * percent) / 100;
    const sd = Math.sqrt(ids.length * (percent / 100) * (1 - percent / 100));
    // 4.5 standard deviations: a false alarm about once in 150,000 runs.
    t.ok(Math.abs(onNext - mean) <= 4.5 * sd + 1, `${percent}%: ${onNext} of 1,000 on next (expected ${mean} ± ${(4.5 * sd).toFixed(1)})`);
  }
  t.equal(ids.filter((id) => splitSide(id, 0) === 'next').length, 0, '0%: nobody on next');
  t.equal(ids.filter((id) => splitSide(id, 100) === 'next').length, 1000, '100%: everybody on next');
  t.equal(splitSide(undefined, 99.9), 'legacy', 'no consumer: legacy below 100%');
  t.equal(splitSide(undefined, 100), 'next', 'no consumer: next at 100%');
});

t.test('monotone: raising the percent only moves keys from legacy to next', async (t) => {
  let previous = ids.map((id) => splitSide(id, 0));
  let movedBack = 0;
  for (let percent = 0.5; percent <= 100; percent += 0.5) {
    const now = ids.map((id) => splitSide(id, percent));
    movedBack += now.filter((s, i) => s === 'legacy' && previous[i] === 'next').length;
    previous = now;
  }
  t.equal(movedBack, 0, 'over 200 steps from 0% to 100%, no key moved back');
});

t.test('the place is a fixed function of the id: the same in every process and version', async (t) => {
  // Computed once and written here: a change of the hash would move consumers between sides
  // across an upgrade, which the split promises never happens.
  t.same(
    ['alice', 'PETSTORE_API_KEYS#1', 'ops'].map((id) => placeOf(id)),
    [17.12650529798836, 92.46944311690403, 66.0830909017157],
  );
});
