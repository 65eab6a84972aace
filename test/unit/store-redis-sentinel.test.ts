/**
 * The rate-limit store on Redis Sentinel through a failover (src/stores/connection.ts): two
 * instances (two stores on two connections) share one limit before and after it.
 */
import t from 'tap';
import type { TapTest as Tap } from '../helpers/assert.js';
import { RedisStore } from '../../src/stores/redis.js';
import type { RedisStoreConfig } from '../../src/stores/types.js';
import { REDIS_SKIP } from '../helpers/redis.js';
import { allowedAcross, cli, RULE_OF_FOUR as RULE, startSentinel, twoInstances } from '../helpers/redis-forms.js';
import { sleep } from '../helpers/wait.js';



/** Two instances (see twoInstances), closed at the end of the test. */
async function instancesOf(t: Tap, config: RedisStoreConfig): Promise<[RedisStore, RedisStore]> {
  const made: RedisStore[] = [];
  t.teardown(() => Promise.all(made.map((s) => s.close())));
  return twoInstances((c) => {
    const s = new RedisStore(c);
    made.push(s);
    return s;
  }, config);
}

t.test('Redis Sentinel: one limit across two instances, before and after a failover', { skip: REDIS_SKIP }, async (t) => {
  const s = await startSentinel(t);
  const config = { sentinel: { masterName: s.masterName, nodes: [`127.0.0.1:${s.sentinelPort}`] } };
  const both = await instancesOf(t, config);
  t.equal(await allowedAcross(both, 'before'), 4, 'limit 4 across both');
  const oldMaster = s.master();
  t.match(cli(['-p', String(s.sentinelPort), 'SENTINEL', 'failover', s.masterName]), /OK/);
  // Bounded and generous: on a loaded machine the client hears of the new master late. Until the
  // old master is a replica it may still take a write that its resync then drops (Redis
  // replication is asynchronous), so the count is checked from then on; `demote` makes it one at
  // once instead of at the sentinel's next INFO round, up to 10 s later.
  const deadline = Date.now() + 45_000;
  let working = false;
  while (!working && Date.now() < deadline) {
    if (s.demote(oldMaster)) {
      const results = await Promise.all(both.map((st) => st.take(`probe-${Date.now()}`, RULE).then(() => true, () => false)));
      working = results.every(Boolean);
    }
    if (!working) await sleep(200);
  }
  t.not(s.master(), oldMaster, 'the sentinel promoted the replica');
  t.ok(working, 'both instances decide again through the new master');
  t.equal(await allowedAcross(both, 'after'), 4, 'limit 4 across both after the failover');
  t.equal(await allowedAcross(both, 'before', 2), 0, 'the counter from before the failover was replicated: still spent');
});
