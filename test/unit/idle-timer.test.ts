/**
 * IdleTimer: the body-idle deadline of every engine. Activity only stamps the time; the one timer
 * re-arms itself for the rest when it fires early. Real timers, small durations, bounded waits.
 */
import t from 'tap';
import { IdleTimer } from '../../src/core/idle-timer.js';
import { sleep } from '../helpers/wait.js';


t.test('fires once, about idleMs after the start, when nothing happens', async (t) => {
  const started = performance.now();
  const fired: number[] = [];
  new IdleTimer(60, () => fired.push(performance.now() - started));
  await sleep(200);
  t.equal(fired.length, 1, 'once');
  t.ok(fired[0]! >= 59 && fired[0]! < 150, `after ${fired[0]!.toFixed(0)} ms for 60 ms`);
});

t.test('does not fire while activity keeps coming, then fires idleMs after the last', async (t) => {
  const started = performance.now();
  let fired: number | undefined;
  const idle = new IdleTimer(80, () => (fired = performance.now() - started));
  // Activity every 20 ms for 300 ms: never 80 ms without one.
  for (let i = 0; i < 15; i++) {
    await sleep(20);
    idle.touch();
  }
  const last = performance.now() - started;
  t.equal(fired, undefined, `no fire during ${last.toFixed(0)} ms of activity`);
  await sleep(200);
  t.ok(fired !== undefined, 'fires once activity stops');
  t.ok(fired! - last >= 79 && fired! - last < 170, `${(fired! - last).toFixed(0)} ms after the last activity, for 80 ms`);
});

t.test('stop: never fires', async (t) => {
  let fired = false;
  const idle = new IdleTimer(30, () => (fired = true));
  idle.touch();
  idle.stop();
  await sleep(100);
  t.equal(fired, false);
});
