/**
 * The console's fleet rollup in a real redis-server (src/ops/console/fleet.ts): two instances (two
 * fake recorders) flush into one Redis and the fleet's read is exactly the sum of their snapshots;
 * heartbeats; Redis killed and back empty (each instance sends its whole snapshot once: nothing
 * lost, nothing counted twice); Redis frozen (answers lost, batches sent again, not added twice);
 * Redis away for hours (flush never throws, what waits stays bounded). The clock is injected.
 */
import { createClient } from 'redis';
import t, { type Test } from 'tap';
import { BATCH_UNITS, ConsoleFleet } from '../../src/ops/console/fleet.js';
import { DAY_MS, HOUR_MS, mergeSnapshots, MINUTE_MS, SnapshotSum } from '../../src/ops/console/merge.js';
import { HOURS_KEPT, MINUTES_KEPT, SLOT_WIDTH, type ConsoleSnapshot, type InstanceBeat, type SnapshotSource } from '../../src/ops/console/types.js';
import { fakeLog } from '../helpers/log.js';
import { REDIS_SKIP, startRedis, type TestRedis } from '../helpers/redis.js';

/** 2030-06-01T12:34:56.789Z */
const T0 = Date.UTC(2030, 5, 1, 12, 34, 56, 789);
const floor = (ms: number, step: number) => ms - (ms % step);

/** A recorder as the fleet sees it: a running total and the delta since the last take. */
class FakeSource implements SnapshotSource {
  private total = new SnapshotSum();
  private delta = new SnapshotSum();
  constructor(private readonly clock: { now: number }) {}

  /** `n` requests of `operation` by `consumer` at `atMs`, `errors` of them upstream 5xx, each in the 10 ms bucket. */
  request(operation: string, consumer: string, atMs: number, n = 1, errors = 0): void {
    const values = new Array<number>(SLOT_WIDTH).fill(0);
    values[0] = n;
    values[3] = errors;
    values[6 + 5] = n;
    for (const sum of [this.total, this.delta]) {
      sum.addSlot('m', operation, consumer, floor(atMs, MINUTE_MS), values);
      sum.addSlot('h', operation, consumer, floor(atMs, HOUR_MS), values);
      sum.addSeen(consumer, atMs, atMs);
      if (operation === 'getPet') sum.addDay(operation, consumer, floor(atMs, DAY_MS), n);
    }
  }

  violation(operation: string, field: string, atMs: number, requestId: string): void {
    for (const sum of [this.total, this.delta]) {
      sum.addRule({ operation, field, kind: 'must be integer', count: 1, lastSeenMs: atMs });
      sum.addSamples([{ atMs, operation, requestId, status: 200, problems: [`${field} must be integer`] }]);
    }
  }

  snapshot(nowMs = this.clock.now): ConsoleSnapshot {
    return this.total.snapshot(nowMs);
  }

  takeDelta(nowMs = this.clock.now): ConsoleSnapshot | undefined {
    if (this.delta.empty) return undefined;
    const d = this.delta.snapshot(nowMs);
    this.delta = new SnapshotSum();
    return d;
  }
}

function beatOf(id: string, clock: { now: number }): () => InstanceBeat {
  return () => ({ id, host: 'h', pid: 1, version: '1.0.0', policyFingerprint: 'abcd', ready: true, reason: null, startedAtMs: T0, lastReloadMs: null, workers: 0, atMs: clock.now });
}

interface Two {
  redis: TestRedis;
  clock: { now: number };
  prefix: string;
  sources: [FakeSource, FakeSource];
  fleets: [ConsoleFleet, ConsoleFleet];
  logs: [ReturnType<typeof fakeLog>, ReturnType<typeof fakeLog>];
}

/** Two instances on one Redis (their own key prefix), flushing only when told. */
async function two(t: Test): Promise<Two> {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const clock = { now: T0 };
  const prefix = `t${Math.random().toString(36).slice(2, 8)}:`;
  const sources: [FakeSource, FakeSource] = [new FakeSource(clock), new FakeSource(clock)];
  const logs: Two['logs'] = [fakeLog(), fakeLog()];
  const make = (i: 0 | 1) => new ConsoleFleet({ redis: { url: redis.url, connectTimeoutMs: 500, maxReconnectDelayMs: 100 }, prefix, source: sources[i], beat: beatOf(`i${i}`, clock), log: logs[i], now: () => clock.now, flushMs: 60_000, beatMs: 60_000 });
  const fleets: [ConsoleFleet, ConsoleFleet] = [make(0), make(1)];
  t.teardown(() => Promise.all(fleets.map((f) => f.close())));
  return { redis, clock, prefix, sources, fleets, logs };
}

/** Some traffic over the last two hours and a few days, both instances, overlapping cells. */
function traffic({ sources: [a, b], clock }: Two, round: number): void {
  for (let i = 0; i < 30; i++) {
    const at = clock.now - i * 4 * MINUTE_MS;
    a.request('getPet', `k${i % 3}`, at, 2 + round, i % 2);
    b.request('getPet', `k${i % 4}`, at - 1000, 1);
    b.request('listPets', '-', at, 3, 1);
  }
  a.request('getPet', 'k9', clock.now - 3 * DAY_MS, 5);
  b.request('getPet', 'k9', clock.now - 2 * DAY_MS, 7);
  a.violation('getPet', '/id', clock.now - 5000 - round, `a${round}`);
  b.violation('getPet', '/id', clock.now - 4000 - round, `b${round}`);
  b.violation('listPets', '/*/name', clock.now - 3000 - round, `c${round}`);
}

const expected = ({ sources: [a, b], clock }: Two) => mergeSnapshots([a.snapshot(), b.snapshot()], clock.now);
const requests = (s: ConsoleSnapshot) => s.cells.reduce((n, c) => n + c.hours.reduce((m, [, v]) => m + (v[0] ?? 0), 0), 0);

t.test('two instances flush; the fleet read is exactly the sum of their snapshots, and stays so', { skip: REDIS_SKIP }, async (t) => {
  const two_ = await two(t);
  const { fleets, prefix, redis } = two_;
  traffic(two_, 0);
  await Promise.all(fleets.map((f) => f.flush()));
  const first = await fleets[0].read();
  t.strictSame(first, expected(two_), 'the read equals mergeSnapshots of both');
  t.equal(requests(first), 30 * 2 + 30 * 1 + 30 * 3, 'every request of the last day counted once (k9\'s are older)');
  t.ok(
    first.cells.some((c) => c.minutes.length > 0 && c.hours.length > 1),
    'minute and hour slots',
  );
  t.equal(first.daily.find((d) => d.consumer === 'k9')?.days.length, 2, 'daily counts');
  t.strictSame(
    first.violations.map((v) => [v.operation, v.field, v.count]),
    [
      ['getPet', '/id', 2],
      ['listPets', '/*/name', 1],
    ],
  );
  t.equal(first.samples.length, 3);
  // Another round, flushed: only what is new is added.
  traffic(two_, 1);
  await fleets[1].flush();
  await fleets[0].flush();
  t.strictSame(await fleets[1].read(), expected(two_), 'after a second flush, still the sum: nothing counted twice');
  t.equal(fleets[0].errors + fleets[1].errors, 0);
  // The keys: one hash tag, the deployment's prefix, each with an expiry but `meta` and `dops`.
  const client = createClient({ url: redis.url });
  await client.connect();
  t.teardown(() => void client.destroy());
  const keys = (await client.keys(`${prefix}*`)).sort();
  t.ok(
    keys.length > 0 && keys.every((k) => k.startsWith(`${prefix}{console}:`)),
    `keys: ${keys.length}`,
  );
  for (const k of keys) {
    const ttl = await client.pTTL(k);
    if (k.endsWith(':meta') || k.endsWith(':dops')) t.equal(ttl, -1, `${k} does not expire`);
    else if (k.includes(':m:')) t.ok(ttl > 0 && ttl <= (MINUTES_KEPT + 5) * MINUTE_MS, `${k} expires after its window (${ttl} ms)`);
    else if (k.includes(':h:')) t.ok(ttl > 0 && ttl <= (HOURS_KEPT + 1) * HOUR_MS, `${k} expires after its window (${ttl} ms)`);
    else t.ok(ttl > 0, `${k} expires (${ttl} ms)`);
  }
});

t.test('started, an instance flushes and beats on its own; close sends the last counts', { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const clock = { now: T0 };
  const source = new FakeSource(clock);
  const reader = new ConsoleFleet({ redis: { url: redis.url }, prefix: 's:', source: new FakeSource(clock), beat: beatOf('r', clock), now: () => clock.now });
  t.teardown(() => reader.close());
  const fleet = new ConsoleFleet({ redis: { url: redis.url }, prefix: 's:', source, beat: beatOf('w', clock), now: () => clock.now, flushMs: 50, beatMs: 50 });
  fleet.start();
  source.request('getPet', 'k1', T0, 4);
  // Bounded: 100 polls of at most 50 ms.
  let seen = 0;
  for (let i = 0; i < 100 && seen !== 4; i++) {
    seen = requests(await reader.read());
    if (seen !== 4) await new Promise((r) => setTimeout(r, 50));
  }
  t.equal(seen, 4, 'flushed by its timer');
  t.ok(
    (await reader.instances()).some((b) => b.id === 'w'),
    'its heartbeat written by its timer',
  );
  source.request('getPet', 'k1', T0, 3);
  await fleet.close();
  t.equal(requests(await reader.read()), 7, 'close flushed the last counts');
  t.strictSame(await reader.read(), mergeSnapshots([source.snapshot()], clock.now));
});

t.test('heartbeats list both instances; a closed one stays listed, then goes after an hour', { skip: REDIS_SKIP }, async (t) => {
  const { fleets, clock } = await two(t);
  await Promise.all(fleets.map((f) => f.beat()));
  const both = await fleets[0].instances();
  t.strictSame(
    both.map((b) => [b.id, b.atMs, b.version]),
    [
      ['i0', T0, '1.0.0'],
      ['i1', T0, '1.0.0'],
    ],
  );
  await fleets[1].close();
  clock.now += 20_000;
  await fleets[0].beat();
  const later = await fleets[0].instances();
  t.strictSame(
    later.map((b) => [b.id, b.atMs]),
    [
      ['i0', T0 + 20_000],
      ['i1', T0],
    ],
    'the closed one keeps its last beat (the view calls it stale)',
  );
  clock.now += HOUR_MS - 19_000;
  t.strictSame(
    (await fleets[0].instances()).map((b) => b.id),
    ['i0'],
    'a beat older than an hour is removed when read',
  );
});

t.test('Redis killed, then back empty: each instance sends its whole snapshot once, the fleet read is the sum again', { skip: REDIS_SKIP }, async (t) => {
  const two_ = await two(t);
  const { fleets, redis, logs } = two_;
  traffic(two_, 0);
  await Promise.all(fleets.map((f) => f.flush()));
  t.strictSame(await fleets[0].read(), expected(two_));
  await redis.kill();
  // Counted while Redis is away: kept, nothing thrown, warned once.
  traffic(two_, 1);
  for (let i = 0; i < 3; i++) await Promise.all(fleets.map((f) => f.flush()));
  t.ok(fleets[0].errors > 0, 'the flushes failed');
  t.equal(logs[0].lines.length, 1, 'one warning per 10 s');
  await t.rejects(fleets[0].read(), 'the read rejects: the caller falls back to its own snapshot');
  await redis.restart();
  traffic(two_, 2);
  // Bounded: the connection comes back within a few reconnection delays (100 ms at most each).
  for (let i = 0; i < 50; i++) {
    await Promise.all(fleets.map((f) => f.flush()));
    if (fleets.every((f) => f.backlog().batches === 0 && f.backlog().cells === 0)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.strictSame(await fleets[1].read(), expected(two_), 'the sum of both again: nothing lost, nothing twice');
  traffic(two_, 3);
  await Promise.all(fleets.map((f) => f.flush()));
  t.strictSame(await fleets[0].read(), expected(two_), 'and deltas again after');
});

t.test('FLUSHALL on a live Redis: the heartbeat sees the epoch gone, the next flushes send everything', { skip: REDIS_SKIP }, async (t) => {
  const two_ = await two(t);
  const { fleets, redis } = two_;
  traffic(two_, 0);
  await Promise.all(fleets.map((f) => f.flush()));
  const client = createClient({ url: redis.url });
  await client.connect();
  t.teardown(() => void client.destroy());
  await client.flushAll();
  // Nothing new counted: without the heartbeat's check a flush would send nothing.
  await Promise.all(fleets.map((f) => f.flush()));
  t.strictSame((await client.keys('*')).length, 0, 'nothing new: no flush call');
  await Promise.all(fleets.map((f) => f.beat()));
  await Promise.all(fleets.map((f) => f.flush()));
  t.strictSame(await fleets[0].read(), expected(two_), 'everything back, once');
});

t.test('Redis frozen: answers lost, the batch sent again is not added twice', { skip: REDIS_SKIP }, async (t) => {
  const two_ = await two(t);
  const { fleets, redis } = two_;
  traffic(two_, 0);
  await Promise.all(fleets.map((f) => f.flush()));
  redis.pause();
  traffic(two_, 1);
  // Each flush's call waits its deadline (1 s); Redis runs them all when it thaws.
  await Promise.all(fleets.map((f) => f.flush()));
  traffic(two_, 2);
  await Promise.all(fleets.map((f) => f.flush()));
  t.ok(fleets[0].errors >= 2, `the frozen flushes failed (${fleets[0].errors})`);
  t.equal(fleets[0].backlog().batches, 1, 'the batch waits, the newer counts pending');
  redis.resume();
  for (let i = 0; i < 3; i++) await Promise.all(fleets.map((f) => f.flush()));
  t.strictSame(await fleets[0].read(), expected(two_), 'the sum exactly: the batches Redis ran late were not added again');
});

t.test('Redis away for hours: flush never throws, what waits stays bounded by the windows', { skip: REDIS_SKIP }, async (t) => {
  const two_ = await two(t);
  const { fleets, redis, sources, clock, logs } = two_;
  // Connected once first: before that a flush waits its whole deadline for the first connection.
  await fleets[0].flush();
  await redis.stop();
  const [a] = sources;
  // Three hours, a flush every simulated minute, 10 consumers calling each minute.
  for (let m = 0; m < 180; m++) {
    clock.now += MINUTE_MS;
    for (let k = 0; k < 10; k++) a.request('getPet', `k${k}`, clock.now, 1);
    await fleets[0].flush();
    const held = fleets[0].backlog();
    t.ok(held.slots <= 10 * (MINUTES_KEPT + HOURS_KEPT) && held.batches <= 1, `bounded: ${JSON.stringify(held)}`, { diagnostic: false });
  }
  const held = fleets[0].backlog();
  t.ok(held.slots <= 10 * (MINUTES_KEPT + 4), `after 3 hours: ${held.slots} slots held (10 cells x 60 minutes + 4 hours at most)`);
  t.equal(logs[0].lines.length, 180, 'a warning per flush a minute apart');
  for (let i = 0; i < 5; i++) await fleets[0].flush();
  t.equal(logs[0].lines.length, 180, 'none within 10 s of the last');
  clock.now += 10_000;
  await fleets[0].flush();
  t.equal(logs[0].lines.at(-1)?.fields.suppressed, 5, 'the next says how many were not');
  await redis.restart();
  for (let i = 0; i < 50; i++) {
    await fleets[0].flush();
    if (fleets[0].backlog().batches === 0 && fleets[0].backlog().cells === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.strictSame(await fleets[0].read(), expected(two_), 'caught up: the windows as the instance holds them');
});

t.test('size: 1,000 consumers x 4 operations x 24 hour slots (and 30 minute slots): flush and read times', { skip: REDIS_SKIP }, async (t) => {
  const two_ = await two(t);
  const { fleets, sources, clock } = two_;
  const [a] = sources;
  for (let h = 0; h < 24; h++) {
    const at = clock.now - h * HOUR_MS;
    for (let c = 0; c < 1000; c++) for (const op of ['getPet', 'listPets', 'createPet', '-']) a.request(op, `key-${c}`, h === 0 ? at - (c % 30) * MINUTE_MS : at, 1 + (c % 7), c % 3);
  }
  let started = performance.now();
  for (let i = 0; i < 20; i++) {
    await fleets[0].flush();
    if (fleets[0].backlog().batches === 0) break;
  }
  const flushMs = performance.now() - started;
  t.equal(fleets[0].backlog().batches, 0, 'all sent');
  const times: number[] = [];
  let read: ConsoleSnapshot | undefined;
  for (let i = 0; i < 3; i++) {
    started = performance.now();
    read = await fleets[1].read();
    times.push(Math.round(performance.now() - started));
  }
  const cells = read?.cells.length ?? 0;
  const hourSlots = read?.cells.reduce((n, c) => n + c.hours.length, 0) ?? 0;
  t.comment(`whole snapshot flushed in ${Math.round(flushMs)} ms (batches of ${BATCH_UNITS}); read() ${times.join(', ')} ms; ${cells} cells, ${hourSlots} hour slots`);
  t.equal(cells, 4000);
  t.equal(hourSlots, 4000 * 24);
  t.ok(JSON.stringify(read) === JSON.stringify(expected(two_)), 'the same numbers');
  // Well under 1 s on an idle machine; the bound leaves room for a loaded one (2 cores shared).
  t.ok(Math.min(...times) < 2500, `read within its deadline with room (${Math.min(...times)} ms)`);
});
