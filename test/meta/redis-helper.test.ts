/**
 * `npm test` on a machine without redis-server: the tests that need it are skipped with one line
 * saying how to get it (or REDIS_SERVER), and a start attempt fails with that line, not with an
 * uncaught `spawn redis-server ENOENT`; with CI=true nothing is skipped.
 */
import t from 'tap';
import { redisSkipReason, startRedis } from '../helpers/redis.js';

const MISSING = '/nonexistent/redis-server';

t.test('a missing redis-server: skipped with how to install it or set REDIS_SERVER; with CI=true, not skipped', async (t) => {
  const reason = redisSkipReason(MISSING, {});
  t.type(reason, 'string');
  t.match(String(reason), /^needs redis-server, not found as '\/nonexistent\/redis-server': install it \(Debian\/Ubuntu: apt-get install redis-server.*\) or set REDIS_SERVER to its path$/);
  t.notMatch(String(reason), /\n/, 'one line');
  t.equal(redisSkipReason(MISSING, { CI: 'true' }), false, 'CI runs the Redis tests, so a missing server fails them');
});

t.test('starting a missing redis-server rejects with the same advice, fast, nothing uncaught', async (t) => {
  const started = performance.now();
  await t.rejects(startRedis(MISSING), /^cannot start '\/nonexistent\/redis-server' \(ENOENT\): install it .* or set REDIS_SERVER to its path$/);
  t.ok(performance.now() - started < 5000, 'without waiting for 100 pings');
});
