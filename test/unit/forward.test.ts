/**
 * The forwarding layers (src/core/forward), each on its own: a fake transport the test drives by
 * hand, a handler that records what reaches it, and a clock the test moves. No sockets, no timers.
 */
import t from 'tap';
import { CircuitBreaker } from '../../src/core/breaker.js';
import type { GatewayError } from '../../src/core/errors.js';
import { bodyIdle } from '../../src/core/forward/body-idle.js';
import { breakerAccounting } from '../../src/core/forward/breaker.js';
import { buffering } from '../../src/core/forward/buffer.js';
import { headDeadline } from '../../src/core/forward/head-deadline.js';
import { compose, forwarding, type ForwardHandler, type Layer, type Send } from '../../src/core/forward/index.js';
import { retryReads } from '../../src/core/forward/retry.js';
import { totalDeadline } from '../../src/core/forward/total-deadline.js';
import { UpstreamFailure, type AbortReason, type Upstream, type UpstreamControl, type UpstreamHandler, type UpstreamRequest } from '../../src/core/upstream.js';
import { ManualClock } from '../helpers/clock.js';

/** One call the fake transport received, with the control it hands out. */
class FakeCall implements UpstreamControl {
  paused = false;
  aborted: AbortReason | 'none' | undefined = undefined;
  constructor(
    readonly request: UpstreamRequest,
    readonly handler: ForwardHandler,
  ) {}
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
  abort(reason?: AbortReason): void {
    this.aborted = reason ?? 'none';
  }
  start(): this {
    this.handler.onStart(this);
    return this;
  }
}

function transport(): { send: Send; calls: FakeCall[] } {
  const calls: FakeCall[] = [];
  return { calls, send: (request, handler) => void calls.push(new FakeCall(request, handler)) };
}

/** Records what reaches the exchange's side; `hold` is what its onHead answers. */
class Recorder implements ForwardHandler {
  events: string[] = [];
  control: UpstreamControl | undefined = undefined;
  failure: UpstreamFailure | undefined = undefined;
  body: Buffer | undefined = undefined;
  constructor(readonly hold = 0) {}
  onStart(control: UpstreamControl): void {
    this.control = control;
    this.events.push('start');
  }
  onHead(status: number): number {
    this.events.push(`head ${status}`);
    return this.hold;
  }
  onData(chunk: Buffer): void {
    this.events.push(`data ${chunk.toString()}`);
  }
  onBody(body: Buffer, truncated: boolean): void {
    this.body = body;
    this.events.push(`body ${body.toString()}${truncated ? ' truncated' : ''}`);
  }
  onEnd(): void {
    this.events.push('end');
  }
  onFailure(failure: UpstreamFailure): void {
    this.failure = failure;
    this.events.push(`failure ${failure.kind}`);
  }
  onRefused(err: GatewayError): void {
    this.events.push(`refused ${err.code}`);
  }
}

function request(method: 'GET' | 'POST' = 'GET'): UpstreamRequest {
  return { method, operation: method === 'GET' ? 'listPets' : 'createPet', param: undefined, query: '', pathname: '/v1/pets', path: '/v1/pets', headers: {}, body: undefined, native: undefined };
}

function stack(layers: Layer[]): { send: Send; calls: FakeCall[] } {
  const tr = transport();
  return { send: compose(tr.send, layers), calls: tr.calls };
}

function only(calls: FakeCall[], i = 0): FakeCall {
  const call = calls[i];
  if (call === undefined) throw new Error(`no call ${i}`);
  return call;
}

t.test('head deadline: fails the call ms after it left, not before; a head in time disarms it', async (t) => {
  const clock = new ManualClock();
  const { send, calls } = stack([headDeadline(100, clock)]);
  const late = new Recorder();
  send(request(), late);
  const call = only(calls).start();
  clock.advance(99);
  t.same(late.events, ['start'], 'nothing at 99 ms');
  clock.advance(1);
  t.same(late.events, ['start', 'failure headers_timeout']);
  t.equal(call.aborted, 'failed', 'the transport is stopped, as a failure');
  call.handler.onHead(200, {});
  t.same(late.events, ['start', 'failure headers_timeout'], 'a late head is dropped');

  const inTime = new Recorder();
  send(request(), inTime);
  const second = only(calls, 1).start();
  clock.advance(50);
  second.handler.onHead(200, {});
  clock.advance(500);
  second.handler.onEnd();
  t.same(inTime.events, ['start', 'head 200', 'end']);
  t.equal(second.aborted, undefined);
});

t.test('head deadline: a call the handler abandons is taken off the list', async (t) => {
  const clock = new ManualClock();
  const { send, calls } = stack([headDeadline(100, clock)]);
  const r = new Recorder();
  send(request(), r);
  const call = only(calls).start();
  r.control?.abort();
  t.equal(call.aborted, 'none', 'abandoned: no reason given below');
  clock.advance(1000);
  t.same(r.events, ['start'], 'no timeout reported for an abandoned call');
});

t.test('a call abandoned before the transport started it: every layer hears of it', async (t) => {
  const clock = new ManualClock();
  let now = 0;
  const cb = new CircuitBreaker({ failures: 1, coolDownMs: 100 }, () => now);
  cb.record(false);
  now = 200;
  // The breaker layer admits this request: it is the half-open probe.
  const { send, calls } = stack([breakerAccounting(cb), buffering(), totalDeadline(500, clock), bodyIdle(100, clock), headDeadline(100, clock), retryReads()]);
  const r = new Recorder();
  send(request('GET'), r);
  t.ok(r.control !== undefined, 'the handler holds a control before the transport started');
  r.control?.abort();
  const call = only(calls).start();
  t.equal(call.aborted, 'none', 'the transport’s late start is aborted at once');
  clock.advance(10_000);
  t.same(r.events, ['start'], 'no deadline fires for an abandoned call');
  t.equal(cb.admit(), undefined, 'the probe slot was freed, not counted as a failure');
});

t.test('body idle: counts silence between chunks, not while the gateway holds the body back', async (t) => {
  const clock = new ManualClock();
  const { send, calls } = stack([bodyIdle(100, clock)]);
  const r = new Recorder();
  send(request(), r);
  const call = only(calls).start();
  clock.advance(5000);
  t.same(r.events, ['start'], 'no body deadline before the head');
  call.handler.onHead(200, {});
  clock.advance(80);
  call.handler.onData(Buffer.from('a'));
  clock.advance(80);
  t.same(r.events, ['start', 'head 200', 'data a'], 'a chunk restarts the count');
  r.control?.pause();
  t.ok(call.paused);
  clock.advance(1000);
  t.same(r.events, ['start', 'head 200', 'data a'], 'held back by the gateway: not the upstream’s silence');
  r.control?.resume();
  clock.advance(99);
  t.same(r.events, ['start', 'head 200', 'data a'], 'counting again from the resume');
  clock.advance(2);
  t.same(r.events, ['start', 'head 200', 'data a', 'failure body_timeout']);
  t.equal(call.aborted, 'failed');
});

t.test('body idle: an ended body is off the list', async (t) => {
  const clock = new ManualClock();
  const { send, calls } = stack([bodyIdle(100, clock)]);
  const r = new Recorder();
  send(request(), r);
  const call = only(calls).start();
  call.handler.onHead(200, {});
  call.handler.onEnd();
  clock.advance(1000);
  t.same(r.events, ['start', 'head 200', 'end']);
});

t.test('total deadline: a body that keeps dripping is cut ms after the request left', async (t) => {
  const clock = new ManualClock();
  const { send, calls } = stack([totalDeadline(1000, clock), bodyIdle(150, clock)]);
  const r = new Recorder();
  send(request(), r);
  const call = only(calls).start();
  call.handler.onHead(200, {});
  let sent = 0;
  // One byte every 100 ms: never idle for bodyMs (150), for ever without the total deadline.
  for (let i = 0; i < 30 && r.failure === undefined; i++) {
    clock.advance(100);
    if (r.failure === undefined) {
      call.handler.onData(Buffer.from('x'));
      sent++;
    }
  }
  t.equal(r.failure?.kind, 'total_timeout');
  t.equal(sent, 9, 'the drip went on until the total deadline, not the idle one');
  t.equal(clock.time, 2000, 'cut at 1000 ms after the request left');
  t.equal(call.aborted, 'failed');
});

t.test('total deadline: an answer that ends in time is off the list; none before the head either', async (t) => {
  const clock = new ManualClock();
  const { send, calls } = stack([totalDeadline(1000, clock)]);
  const r = new Recorder();
  send(request(), r);
  const call = only(calls).start();
  clock.advance(999);
  call.handler.onHead(200, {});
  call.handler.onEnd();
  clock.advance(5000);
  t.same(r.events, ['start', 'head 200', 'end']);
  const slow = new Recorder();
  send(request(), slow);
  only(calls, 1).start();
  clock.advance(1000);
  t.same(slow.events, ['start', 'failure total_timeout'], 'a head that never comes is cut too');
});

t.test('retry: a read whose connection failed before any answer is sent once more', async (t) => {
  const { send, calls } = stack([retryReads()]);
  const r = new Recorder();
  send(request('GET'), r);
  only(calls).start().handler.onFailure(new UpstreamFailure('refused'));
  t.equal(calls.length, 2, 'a second attempt');
  const second = only(calls, 1);
  t.not(second.handler, only(calls).handler, 'each attempt is its own handler');
  second.start();
  t.same(r.events, ['start'], 'the handler saw one start');
  only(calls).handler.onHead(200, {});
  t.same(r.events, ['start'], 'the first attempt is over: its late callbacks are dropped');
  second.handler.onFailure(new UpstreamFailure('reset'));
  t.equal(calls.length, 2, 'at most one retry');
  t.same(r.events, ['start', 'failure reset']);
});

t.test('retry: never a write, never after an answer began, never a timeout', async (t) => {
  for (const [name, method, kind, answered] of [
    ['createPet', 'POST', 'refused', false],
    ['after a head', 'GET', 'reset', true],
    ['a timeout', 'GET', 'headers_timeout', false],
    ['an invalid answer', 'GET', 'invalid_response', false],
  ] as const) {
    const { send, calls } = stack([retryReads()]);
    const r = new Recorder();
    send(request(method), r);
    const call = only(calls).start();
    if (answered) call.handler.onHead(200, {});
    call.handler.onFailure(new UpstreamFailure(kind));
    t.equal(calls.length, 1, `${name}: not retried`);
    t.equal(r.failure?.kind, kind, `${name}: the failure reaches the handler`);
  }
});

t.test('retry: a request the handler abandoned is not retried', async (t) => {
  const { send, calls } = stack([retryReads()]);
  const r = new Recorder();
  send(request('GET'), r);
  const call = only(calls).start();
  r.control?.abort();
  t.equal(call.aborted, 'none');
  call.handler.onFailure(new UpstreamFailure('reset'));
  t.equal(calls.length, 1);
  t.same(r.events, ['start']);
});

/** A breaker on a hand-moved clock that opens after 2 failures. */
function breaker(): CircuitBreaker {
  return new CircuitBreaker({ failures: 2, coolDownMs: 1000 }, () => 0);
}

t.test('breaker accounting: each call tells its outcome once', async (t) => {
  const cases: Array<[string, (call: FakeCall, r: Recorder) => void, boolean]> = [
    ['a 200 answer', (c) => (c.handler.onHead(200, {}), c.handler.onEnd()), false],
    ['a 500 answer (one request can provoke it)', (c) => (c.handler.onHead(500, {}), c.handler.onEnd()), false],
    ['a 404 answer', (c) => (c.handler.onHead(404, {}), c.handler.onEnd()), false],
    ['a 502 answer', (c) => (c.handler.onHead(502, {}), c.handler.onEnd()), true],
    ['a 503 answer', (c) => (c.handler.onHead(503, {}), c.handler.onEnd()), true],
    ['a 504 answer', (c) => (c.handler.onHead(504, {}), c.handler.onEnd()), true],
    ['a 503 body held for the response phase', (c) => (c.handler.onHead(503, {}), c.handler.onBody(Buffer.from('x'), false)), true],
    ['a reset', (c) => c.handler.onFailure(new UpstreamFailure('reset')), true],
    ['an answer the gateway refused', (c, r) => (c.handler.onHead(999, {}), r.control?.abort('failed')), true],
    ['a client that left', (_c, r) => r.control?.abort(), false],
  ];
  for (const [name, act, counts] of cases) {
    const cb = breaker();
    const { send, calls } = stack([breakerAccounting(cb)]);
    for (let i = 0; i < 2; i++) {
      const r = new Recorder();
      send(request(), r);
      const call = only(calls, i).start();
      act(call, r);
      // A late end after the outcome must not count a second time.
      call.handler.onEnd();
      r.control?.abort('failed');
    }
    t.equal(cb.open, counts, `${name}: ${counts ? 'opens' : 'does not open'} the breaker after two`);
  }
});

t.test('breaker accounting: a client that leaves frees the half-open probe', async (t) => {
  let now = 0;
  const cb = new CircuitBreaker({ failures: 1, coolDownMs: 100 }, () => now);
  cb.record(false);
  const { send, calls } = stack([breakerAccounting(cb)]);
  const refused = new Recorder();
  send(request(), refused);
  t.same(refused.events, ['refused service_unavailable'], 'while open, the layer refuses: nothing is sent');
  t.equal(calls.length, 0);
  now = 200;
  const r = new Recorder();
  send(request(), r);
  t.same(r.events, ['start'], 'after the cool-down the probe is let through');
  const second = new Recorder();
  send(request(), second);
  t.same(second.events, ['refused service_unavailable'], 'one probe at a time');
  only(calls).start();
  r.control?.abort();
  t.equal(cb.admit(), undefined, 'the next request may probe');
});

t.test('buffering: holds what the handler asks for and delivers it whole', async (t) => {
  const { send, calls } = stack([buffering()]);
  const r = new Recorder(10);
  send(request(), r);
  const call = only(calls).start();
  t.equal(call.handler.onHead(200, {}), 0, 'the layers below are never asked to hold');
  call.handler.onData(Buffer.from('abc'));
  call.handler.onData(Buffer.from('def'));
  t.same(r.events, ['start', 'head 200'], 'nothing before the end');
  call.handler.onEnd();
  t.same(r.events, ['start', 'head 200', 'body abcdef']);
  t.equal(call.aborted, undefined);
});

t.test('buffering: past the cap, what was kept is delivered truncated and the rest not read', async (t) => {
  const { send, calls } = stack([buffering()]);
  const r = new Recorder(4);
  send(request(), r);
  const call = only(calls).start();
  call.handler.onHead(200, {});
  call.handler.onData(Buffer.from('abc'));
  call.handler.onData(Buffer.from('def'));
  t.same(r.events, ['start', 'head 200', 'body abcd truncated']);
  t.equal(call.aborted, 'none', 'the transport is stopped');
  call.handler.onData(Buffer.from('g'));
  call.handler.onEnd();
  t.equal(r.events.length, 3, 'nothing after the delivery');
});

t.test('buffering: one chunk is delivered as the very buffer received; no chunk as an empty body', async (t) => {
  const { send, calls } = stack([buffering()]);
  const one = new Recorder(10);
  send(request(), one);
  const call = only(calls).start();
  call.handler.onHead(200, {});
  const chunk = Buffer.from('abc');
  call.handler.onData(chunk);
  call.handler.onEnd();
  t.equal(one.body, chunk, 'not copied');
  const none = new Recorder(10);
  send(request(), none);
  const empty = only(calls, 1).start();
  empty.handler.onHead(200, {});
  empty.handler.onData(Buffer.alloc(0));
  empty.handler.onEnd();
  t.same(none.events, ['start', 'head 200', 'body ']);
  t.equal(none.body?.length, 0);
});

t.test('buffering: a body the handler does not hold streams through', async (t) => {
  const { send, calls } = stack([buffering()]);
  const r = new Recorder(0);
  send(request(), r);
  const call = only(calls).start();
  call.handler.onHead(200, {});
  call.handler.onData(Buffer.from('a'));
  call.handler.onEnd();
  t.same(r.events, ['start', 'head 200', 'data a', 'end']);
});

t.test('forwarding: the reference backend gets no layer; an upstream gets them all', async (t) => {
  const seen: UpstreamHandler[] = [];
  const upstream = (conforms: boolean): Upstream => ({ name: 'fake', conforms, send: (_req, handler) => void seen.push(handler), close: async () => {} });
  const r = new Recorder();
  const trusted = forwarding(upstream(true), { headersMs: 100, bodyMs: 100, totalMs: 1000, retryIdempotent: true }, breaker());
  trusted.send(request(), r);
  t.equal(seen[0], r, 'the handler itself reaches the backend');
  t.equal(trusted.policed, false);
  t.equal(trusted.breaker, undefined, 'no breaker guards it');
  const policed = forwarding(upstream(false), { headersMs: 100, bodyMs: 100, totalMs: 1000, retryIdempotent: true }, breaker());
  policed.send(request(), r);
  t.not(seen[1], r, 'wrapped');
  t.equal(policed.policed, true);
});

t.test('a call the handler abandons as it starts is never sent, and no deadline is set', async (t) => {
  const clock = new ManualClock();
  const { send, calls } = stack([totalDeadline(500, clock), bodyIdle(100, clock), headDeadline(100, clock), retryReads()]);
  const quitter = new Recorder();
  quitter.onStart = (control: UpstreamControl): void => control.abort();
  send(request('GET'), quitter);
  t.equal(calls.length, 0, 'nothing reached the transport');
  t.equal(clock.armed, 0, 'no deadline timer is armed');
  clock.advance(10_000);
  t.same(quitter.events, [], 'no failure reported');
});
