/**
 * GCRA in the memory store, with a fake clock: exact bursts, no 2x at a window boundary, a
 * Retry-After never shorter than the real wait, the sustained rate, bounded memory; and the
 * memory deprecation ledger.
 */
import fc from 'fast-check';
import t from 'tap';
import { gcra } from '../../src/stores/gcra.js';
import { MemoryDeprecationLedger, MemoryRateLimitStore } from '../../src/stores/memory.js';

const T0 = Date.parse('2027-03-01T12:00:00Z');

function clock(start = T0) {
  let now = start;
  return {
    now: () => now,
    advance: (ms: number) => void (now += ms),
    set: (ms: number) => void (now = ms),
  };
}

const RULE = { limit: 50, windowMs: 60_000 };

t.test('limit 50 in 60 s: exactly 50 pass in a burst, then the 51st is refused with the exact wait', async (t) => {
  const c = clock();
  const store = new MemoryRateLimitStore({ now: c.now });
  const decisions = Array.from({ length: 200 }, () => store.take('k', RULE));
  t.equal(decisions.filter((d) => d.allowed).length, 50);
  t.ok(decisions.slice(0, 50).every((d) => d.allowed), 'the first 50');
  t.strictSame(
    decisions.slice(0, 3).map((d) => d.remaining),
    [49, 48, 47],
  );
  t.equal(decisions[49]!.remaining, 0);
  const refused = decisions[50]!;
  t.equal(refused.allowed, false);
  t.equal(refused.retryAfterMs, 1200, 'one emission interval: 60 s / 50');
  t.equal(refused.resetMs, 60_000, 'the whole allowance is back after one window');
  // Another key is not affected.
  t.equal(store.take('other', RULE).allowed, true);
});

t.test('no 2x at a window boundary: a burst spent at the end of a window is not given again at the start of the next', async (t) => {
  const c = clock();
  const store = new MemoryRateLimitStore({ now: c.now });
  // Quiet until 1 ms before a 60 s boundary, then a burst, then 2 ms later another.
  c.advance(59_999);
  let first = 0;
  for (let i = 0; i < 100; i++) if (store.take('k', RULE).allowed) first++;
  c.advance(2);
  let second = 0;
  for (let i = 0; i < 100; i++) if (store.take('k', RULE).allowed) second++;
  t.equal(first, 50);
  t.equal(second, 0, 'a fixed window would allow 50 more here');
  // Over the next window the sustained rate: one per 1.2 s, not a second burst.
  let later = 0;
  for (let ms = 0; ms < 60_000; ms += 100) {
    c.advance(100);
    if (store.take('k', RULE).allowed) later++;
  }
  t.ok(later <= 50 && later >= 49, `one per 1.2 s over the next 60 s (${later})`);
});

t.test('Retry-After is never shorter than the real wait', async (t) => {
  const rules = [RULE, { limit: 7, windowMs: 60_000 }, { limit: 3, windowMs: 1_000 }, { limit: 1000, windowMs: 3_600_000 }];
  for (const rule of rules) {
    const c = clock();
    const store = new MemoryRateLimitStore({ now: c.now });
    let d = store.take('k', rule);
    for (let i = 0; d.allowed && i < rule.limit + 1; i++) d = store.take('k', rule);
    t.equal(d.allowed, false, `${rule.limit}/${rule.windowMs}: refused after the burst`);
    const waitMs = d.retryAfterMs;
    // Just before the announced wait: still refused (and a refusal does not push the wait further).
    c.advance(Math.ceil(waitMs) - 1);
    t.equal(store.take('k', rule).allowed, false, 'one millisecond early: refused');
    c.advance(1);
    t.equal(store.take('k', rule).allowed, true, 'at the announced moment: allowed');
    // Whole seconds rounded up (what Retry-After carries) are never shorter either.
    t.ok(Math.ceil(waitMs / 1000) * 1000 >= waitMs);
  }
});

t.test('property: over any run of requests, allowed ones never exceed the burst plus the sustained rate', async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 100 }),
      fc.integer({ min: 1, max: 120 }),
      fc.array(fc.integer({ min: 0, max: 5_000 }), { minLength: 1, maxLength: 300 }),
      (limit, windowSeconds, gaps) => {
        const rule = { limit, windowMs: windowSeconds * 1000 };
        const c = clock();
        const store = new MemoryRateLimitStore({ now: c.now, max: 10 });
        let allowed = 0;
        let elapsed = 0;
        for (const gap of gaps) {
          c.advance(gap);
          elapsed += gap;
          const d = store.take('k', rule);
          if (d.allowed) allowed++;
          else if (d.retryAfterMs <= 0) return false;
          if (d.remaining < 0 || d.remaining > limit - 1) return false;
        }
        // GCRA: at most `limit` at once, then one per windowMs / limit.
        return allowed <= limit + Math.floor((elapsed * limit) / rule.windowMs);
      },
    ),
    { numRuns: 200 },
  );
  t.pass('held for 200 random runs');
});

t.test('the pure step agrees with the store and never counts a refusal', async (t) => {
  const first = gcra(undefined, T0, RULE);
  t.equal(first.allowed, true);
  t.equal(first.tat, T0 + 1200);
  const full = gcra(T0 + 60_000, T0, RULE);
  t.equal(full.allowed, false);
  t.equal(full.tat, T0 + 60_000, 'a refusal leaves the TAT as it was');
  const stale = gcra(T0 - 999_999, T0, RULE);
  t.equal(stale.remaining, 49, 'a TAT in the past counts as a fresh start');
  // At a limit whose interval (0.06 µs) is below the slack, remaining would exceed the limit unclamped.
  const huge = gcra(undefined, T0, { limit: 1_000_000_000, windowMs: 60_000 });
  t.equal(huge.remaining, 999_999_999, 'never more than limit - 1 after a request');
});

t.test('memory stays bounded: at most `max` keys, least recently used dropped first', async (t) => {
  const c = clock();
  const store = new MemoryRateLimitStore({ now: c.now, max: 1000 });
  for (let i = 0; i < 5000; i++) store.take(`key-${i}`, RULE);
  t.equal(store.size, 1000);
  // An entry expires with its TAT, in the store's own clock.
  const one = new MemoryRateLimitStore({ now: c.now });
  one.take('k', RULE);
  t.equal(one.size, 1);
  c.advance(1202);
  t.equal(one.take('k', RULE).remaining, 49, 'after its TAT the key starts afresh');
});

t.test('storage grows with the keys held, not with `max`', async (t) => {
  // With lru-cache's `max`, a store of the default million keys took 15 MB of heap before its
  // first key: twenty such stores would take 300 MB. Kept in a list so none is collected early.
  const before = process.memoryUsage().heapUsed;
  const stores = Array.from({ length: 20 }, () => new MemoryRateLimitStore());
  for (const s of stores) s.take('one-consumer', RULE);
  const grown = process.memoryUsage().heapUsed - before;
  t.ok(grown < 50 * 1024 * 1024, `20 stores of a million keys, one key each: ${(grown / 1048576).toFixed(1)} MB of heap`);
  t.equal(stores[19]?.size, 1);
});

t.test('the memory deprecation ledger: count, first and last seen per operation and consumer', async (t) => {
  const ledger = new MemoryDeprecationLedger();
  t.strictSame(await ledger.report(), []);
  ledger.record('getPet', 'ops', T0 + 5000);
  ledger.record('getPet', 'ops', T0);
  ledger.record('getPet', 'ops', T0 + 10_000);
  ledger.record('getPet', 'mobile', T0 + 1);
  t.strictSame(await ledger.report(), [
    { operation: 'getPet', consumer: 'ops', count: 3, firstSeen: new Date(T0).toISOString(), lastSeen: new Date(T0 + 10_000).toISOString() },
    { operation: 'getPet', consumer: 'mobile', count: 1, firstSeen: new Date(T0 + 1).toISOString(), lastSeen: new Date(T0 + 1).toISOString() },
  ]);
});
