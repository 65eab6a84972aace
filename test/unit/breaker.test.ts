/**
 * Decision tables for the circuit breaker (src/core/breaker.ts), on an injected clock: closed ->
 * open after N consecutive failures, a success resets the count, open -> 503 service_unavailable
 * with Retry-After in whole seconds rounded up, half-open lets exactly one probe through, the
 * probe's success closes the circuit and its failure opens it again for a full cool-down.
 */
import t from 'tap';
import { CircuitBreaker, type BreakerConfig } from '../../src/core/breaker.js';
import { CATALOGUE, GatewayError, renderError } from '../../src/core/errors.js';

type TapTest = Parameters<Parameters<typeof t.test>[0]>[0];

/** A breaker on a clock the test moves by hand. */
function breakerAt(config: BreakerConfig, start = 1_000_000) {
  let now = start;
  const cb = new CircuitBreaker(config, () => now);
  return {
    cb,
    advance(ms: number) {
      now += ms;
    },
  };
}

/** Asserts that `admit()` refuses with 503 service_unavailable and this Retry-After. */
function assertRefused(t: TapTest, err: GatewayError | undefined, retryAfter: string, what: string): void {
  t.ok(err instanceof GatewayError, `${what}: refused`);
  if (!(err instanceof GatewayError)) return;
  t.equal(err.code, 'service_unavailable', `${what}: code`);
  t.equal(err.status, 503, `${what}: status`);
  t.equal(CATALOGUE[err.code].status, 503, `${what}: the catalogue agrees`);
  t.strictSame(err.headers, { 'retry-after': retryAfter }, `${what}: Retry-After ${retryAfter}`);
  const body = JSON.parse(renderError(err)) as Record<string, unknown>;
  t.strictSame(Object.keys(body).sort(), ['code', 'message', 'status'], `${what}: the Error shape`);
  t.equal(body.status, 503, `${what}: status field`);
}

t.test('closed: admits everything until N consecutive failures', async (t) => {
  for (const failures of [1, 2, 3, 5]) {
    const { cb } = breakerAt({ failures, coolDownMs: 1000 });
    for (let i = 1; i < failures; i++) {
      t.equal(cb.admit(), undefined, `failures=${failures}: admitted after ${i - 1} failure(s)`);
      cb.record(false);
      t.equal(cb.open, false, `failures=${failures}: still closed after ${i}`);
    }
    t.equal(cb.admit(), undefined, `failures=${failures}: the N-th request is admitted`);
    cb.record(false);
    t.equal(cb.open, true, `failures=${failures}: open after ${failures} consecutive failures`);
    assertRefused(t, cb.admit(), '1', `failures=${failures}: next request`);
  }
});

t.test('a success resets the count of consecutive failures', async (t) => {
  const { cb } = breakerAt({ failures: 3, coolDownMs: 1000 });
  // Never three in a row: the circuit stays closed however many failures there are in total.
  const outcomes = [false, false, true, false, false, true, false, false, true, false, false];
  for (const [i, ok] of outcomes.entries()) {
    t.equal(cb.admit(), undefined, `request ${i + 1} admitted`);
    cb.record(ok);
  }
  t.equal(cb.open, false, 'closed after 7 failures, never 3 consecutive');
  cb.record(false);
  t.equal(cb.open, true, 'the third consecutive failure opens it');
});

t.test('a new breaker is closed and admits', async (t) => {
  const { cb } = breakerAt({ failures: 1, coolDownMs: 100 });
  t.equal(cb.open, false);
  for (let i = 0; i < 5; i++) t.equal(cb.admit(), undefined, `admit ${i + 1}`);
  cb.record(true);
  t.equal(cb.open, false, 'successes keep it closed');
});

t.test('open: 503 with Retry-After in whole seconds, rounded up, at least 1', async (t) => {
  // [cool-down, ms elapsed since opening, expected Retry-After]
  const table: [number, number, string][] = [
    [500, 0, '1'],
    [500, 499, '1'],
    [1000, 0, '1'],
    [1000, 999, '1'],
    [1001, 0, '2'],
    [1500, 0, '2'],
    [1500, 499, '2'],
    [1500, 500, '1'],
    [1500, 501, '1'],
    [2000, 0, '2'],
    [2000, 1, '2'],
    [2001, 0, '3'],
    [30_000, 0, '30'],
    [30_000, 100, '30'],
    [30_000, 1000, '29'],
    [30_000, 1001, '29'],
    [3_600_000, 0, '3600'],
  ];
  for (const [coolDownMs, elapsed, expected] of table) {
    const { cb, advance } = breakerAt({ failures: 2, coolDownMs });
    cb.record(false);
    cb.record(false);
    advance(elapsed);
    assertRefused(t, cb.admit(), expected, `coolDown ${coolDownMs} ms, ${elapsed} ms later`);
  }
});

t.test('open: every request is refused until the cool-down ends, and refusing does not extend it', async (t) => {
  const { cb, advance } = breakerAt({ failures: 3, coolDownMs: 5000 });
  for (let i = 0; i < 3; i++) cb.record(false);
  for (let i = 0; i < 49; i++) {
    t.ok(cb.admit() instanceof GatewayError, `refused at +${i * 100} ms`);
    advance(100);
  }
  // 4900 ms elapsed: 100 ms left.
  assertRefused(t, cb.admit(), '1', '100 ms before the end');
  advance(100);
  t.equal(cb.admit(), undefined, 'exactly at the end of the cool-down the probe goes through');
});

t.test('half-open: exactly one probe at a time', async (t) => {
  const { cb, advance } = breakerAt({ failures: 3, coolDownMs: 1000 });
  for (let i = 0; i < 3; i++) cb.record(false);
  advance(1000);
  t.equal(cb.admit(), undefined, 'the first request after the cool-down probes');
  for (let i = 0; i < 10; i++) assertRefused(t, cb.admit(), '1', `concurrent request ${i + 1} while the probe runs`);
  advance(60_000);
  assertRefused(t, cb.admit(), '1', 'still one probe at a time a minute later (no outcome yet)');
  t.equal(cb.open, true, 'open while probing');
});

t.test('half-open: the probe succeeds -> closed', async (t) => {
  const { cb, advance } = breakerAt({ failures: 3, coolDownMs: 1000 });
  for (let i = 0; i < 3; i++) cb.record(false);
  advance(1500);
  t.equal(cb.admit(), undefined, 'probe admitted');
  cb.record(true);
  t.equal(cb.open, false, 'closed');
  for (let i = 0; i < 5; i++) t.equal(cb.admit(), undefined, `admitted ${i + 1} after closing`);
  // The count starts from zero again: it takes N new consecutive failures to reopen.
  cb.record(false);
  cb.record(false);
  t.equal(cb.open, false, 'two failures after closing: still closed');
  cb.record(false);
  t.equal(cb.open, true, 'the third reopens it');
});

t.test('half-open: the probe fails -> open again for a whole cool-down from the failure', async (t) => {
  const { cb, advance } = breakerAt({ failures: 3, coolDownMs: 2000 });
  for (let i = 0; i < 3; i++) cb.record(false);
  advance(2500);
  t.equal(cb.admit(), undefined, 'probe admitted');
  advance(300); // the probe takes 300 ms to fail
  cb.record(false);
  t.equal(cb.open, true, 'open again');
  assertRefused(t, cb.admit(), '2', 'right after the failed probe: a full cool-down');
  advance(1999);
  assertRefused(t, cb.admit(), '1', '1 ms before the new cool-down ends');
  advance(1);
  t.equal(cb.admit(), undefined, 'the next probe after the new cool-down');
  assertRefused(t, cb.admit(), '1', 'and only one');
  cb.record(true);
  t.equal(cb.open, false, 'its success closes the circuit');
  t.equal(cb.admit(), undefined);
});

t.test('a full cycle as a table: [action, expected]', async (t) => {
  const { cb, advance } = breakerAt({ failures: 2, coolDownMs: 1000 });
  type Step = ['admit', 'pass' | string] | ['ok' | 'fail', boolean] | ['wait', number];
  const steps: Step[] = [
    ['admit', 'pass'],
    ['fail', false],
    ['admit', 'pass'],
    ['ok', false],
    ['admit', 'pass'],
    ['fail', false],
    ['admit', 'pass'],
    ['fail', true],
    ['admit', '1'],
    ['wait', 999],
    ['admit', '1'],
    ['wait', 1],
    ['admit', 'pass'],
    ['admit', '1'],
    ['fail', true],
    ['admit', '1'],
    ['wait', 1000],
    ['admit', 'pass'],
    ['ok', false],
    ['admit', 'pass'],
    ['admit', 'pass'],
  ];
  for (const [i, [action, expected]] of steps.entries()) {
    const what = `step ${i + 1}: ${action}`;
    if (action === 'wait') advance(expected);
    else if (action === 'admit') {
      const err = cb.admit();
      if (expected === 'pass') t.equal(err, undefined, `${what} passes`);
      else t.equal(err?.headers['retry-after'], expected, `${what} refused, Retry-After ${expected}`);
    } else {
      cb.record(action === 'ok');
      t.equal(cb.open, expected, `${what}: open=${String(expected)}`);
    }
  }
});

t.test('the default clock is Date.now', async (t) => {
  const cb = new CircuitBreaker({ failures: 1, coolDownMs: 60_000 });
  cb.record(false);
  assertRefused(t, cb.admit(), '60', 'a minute of cool-down on the real clock');
});
