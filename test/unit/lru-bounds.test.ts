/**
 * The tables bounded by count (`lruOfAtMost`): the brute-force table and the admin guard keep at
 * most their bound whatever a flood of distinct addresses does, forget the least recently failed
 * first, and still lock the address that keeps guessing.
 */
import t from 'tap';
import { FailureLimiter } from '../../src/policies/auth/brute-force.js';
import { AdminAuthGuard } from '../../src/ops/admin-guard.js';
import { lruOfAtMost } from '../../src/stores/memory.js';

const T0 = Date.parse('2027-03-01T12:00:00Z');

t.test('lruOfAtMost: at most `max` keys, the least recently used dropped first', async (t) => {
  const lru = lruOfAtMost<number>(100);
  for (let i = 0; i < 1000; i++) lru.set(`k${i}`, i);
  t.equal(lru.size, 100);
  t.equal(lru.get('k0'), undefined, 'the oldest is gone');
  t.equal(lru.get('k999'), 999, 'the newest is kept');
  lru.get('k900');
  lru.set('new', 1);
  t.equal(lru.get('k900'), 900, 'a key read recently outlives one that was not');
  t.equal(lru.get('k901'), undefined);
});

t.test('brute-force table: a flood of distinct addresses stays within maxAddresses', async (t) => {
  const limiter = new FailureLimiter({ maxFailures: 3, windowSeconds: 60 }, () => T0, 100);
  for (let i = 0; i < 4; i++) limiter.fail('198.51.100.1');
  t.ok(limiter.lockedFor('198.51.100.1') > 0, 'locked before the flood');
  for (let i = 0; i < 5000; i++) limiter.fail(`10.0.${i >> 8}.${i & 255}`);
  t.equal(limiter.size, 100);
  for (let i = 0; i < 4; i++) limiter.fail('192.0.2.1');
  t.ok(limiter.lockedFor('192.0.2.1') > 0, 'the guesser is locked');
  t.equal(limiter.size, 100, 'still within the bound');
  t.equal(limiter.lockedFor('198.51.100.1'), 0, 'the least recently failed address was forgotten (an unbounded table would keep its lock)');
});

t.test('admin guard: a flood of distinct clients stays within maxAddresses', async (t) => {
  const guard = new AdminAuthGuard({ maxFailures: 2, windowSeconds: 60, maxAddresses: 50, now: () => T0 });
  for (let i = 0; i < 3; i++) guard.failed('198.51.100.9', 'invalid');
  t.ok(guard.lockedFor('198.51.100.9') > 0, 'locked before the flood');
  for (let i = 0; i < 1000; i++) guard.failed(`10.1.${i >> 8}.${i & 255}`, 'invalid');
  for (let i = 0; i < 3; i++) guard.failed('192.0.2.7', 'invalid');
  t.ok(guard.lockedFor('192.0.2.7') > 0, 'the guesser is locked');
  t.equal(guard.lockedFor('198.51.100.9'), 0, 'the least recently failed client was forgotten (an unbounded table would keep its lock)');
  const text = await guard.metrics();
  t.match(text, /reason="invalid"\} 1006/, 'every failure counted, kept or not');
});
