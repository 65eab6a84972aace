/**
 * Request ids and W3C trace context (src/core/request-id.ts): tables of kept and replaced values,
 * the format of what is generated, and the Trace Context rules for versions, ids and tracestate.
 */
import t from 'tap';
import { MAX_TRACESTATE_LENGTH, isValidRequestId, newTraceparent, parseTraceparent, parseTracestate, requestIdOf, traceContextOf } from '../../src/core/request-id.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const TRACEPARENT_00 = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;
const VALID_TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

t.test('X-Request-Id: kept when 1-128 characters of [A-Za-z0-9._:-]', async (t) => {
  const kept = ['a', 'Z', '0', 'abc-DEF_123.456:789', '550e8400-e29b-41d4-a716-446655440000', 'x'.repeat(128), '...', '::'];
  for (const id of kept) t.equal(requestIdOf(id), id, `kept: ${id.slice(0, 40)}`);
  const replaced: Array<string | string[] | undefined> = [
    undefined,
    '',
    'x'.repeat(129),
    'has space',
    'semi;colon',
    'new\nline',
    'tab\t',
    'quote"',
    'slash/',
    'plus+',
    'ümlaut',
    '%41',
    ['a', 'b'],
    ['same'],
  ];
  for (const id of replaced) {
    const got = requestIdOf(id);
    t.not(got, id, `replaced: ${JSON.stringify(id)}`);
    t.match(got, UUID, 'replaced by a UUID');
    t.ok(isValidRequestId(got), 'what we generate we would keep');
  }
  const many = new Set(Array.from({ length: 1000 }, () => requestIdOf(undefined)));
  t.equal(many.size, 1000, 'generated ids are distinct');
});

t.test('traceparent: valid version 00 kept as is', async (t) => {
  for (const tp of [VALID_TP, '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00', '00-00000000000000000000000000000001-0000000000000001-ff']) {
    t.equal(parseTraceparent(tp), tp, tp);
    const ctx = traceContextOf({ traceparent: tp, tracestate: 'congo=t61rcWkgMzE' });
    t.same(ctx, { traceparent: tp, tracestate: 'congo=t61rcWkgMzE', continued: true });
  }
});

t.test('traceparent: invalid ones replaced', async (t) => {
  const invalid = [
    '',
    'garbage',
    '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01', // uppercase
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01',
    '00-00000000000000000000000000000000-00f067aa0ba902b7-01', // zero trace id
    '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01', // zero parent id
    'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', // version ff is invalid
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra', // 00 has nothing after
    `${VALID_TP} `,
    '00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01', // dash misplaced
    '00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01',
    '0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7', // short
    `${VALID_TP}, ${VALID_TP}`, // two headers joined by node
    '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x', // higher version: next char must be '-'
  ];
  for (const tp of invalid) {
    t.equal(parseTraceparent(tp), undefined, `invalid: ${JSON.stringify(tp)}`);
    const ctx = traceContextOf({ traceparent: tp, tracestate: 'congo=t61rcWkgMzE' });
    t.match(ctx.traceparent, TRACEPARENT_00, 'a new one');
    t.not(ctx.traceparent.slice(3, 35), tp.slice(3, 35), 'with a new trace id');
    t.equal(ctx.tracestate, undefined, 'tracestate dropped without a valid traceparent');
    t.equal(ctx.continued, false);
  }
  const arr = traceContextOf({ traceparent: [VALID_TP, VALID_TP] });
  t.equal(arr.continued, false, 'a repeated header is invalid');
  const none = traceContextOf({});
  t.match(none.traceparent, TRACEPARENT_00, 'made when absent');
  t.equal(none.traceparent.slice(53), '00', 'not sampled: the gateway records no trace');
});

t.test('traceparent: a higher version is read by the rules for the future and sent as 00', async (t) => {
  t.equal(parseTraceparent('01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'), VALID_TP);
  t.equal(parseTraceparent('cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what-the-future-holds'), VALID_TP, 'sampled bit kept, others cleared, tail dropped');
  t.equal(parseTraceparent('cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe'), '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00');
});

t.test('new traceparents are well formed and distinct', async (t) => {
  const seen = new Set<string>();
  for (let i = 0; i < 2000; i++) {
    const tp = newTraceparent();
    t.equal(parseTraceparent(tp), tp, 'valid by our own parser');
    seen.add(tp.slice(3, 35));
  }
  t.equal(seen.size, 2000, 'distinct trace ids across pool refills');
});

t.test('tracestate: forwarded only when well formed and within limits', async (t) => {
  const kept: Array<[string | string[], string]> = [
    ['congo=t61rcWkgMzE', 'congo=t61rcWkgMzE'],
    ['rojo=00f067aa0ba902b7,congo=t61rcWkgMzE', 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE'],
    ['rojo=00f067aa0ba902b7 ,\t congo=t61rcWkgMzE', 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE'],
    ['rojo=1,,congo=2', 'rojo=1,congo=2'],
    [['rojo=1', 'congo=2'], 'rojo=1,congo=2'],
    ['tenant@vendor=v', 'tenant@vendor=v'],
    ['a=b c', 'a=b c'],
    ['k=trailing ', 'k=trailing'], // optional white space around a member is not part of it
  ];
  for (const [input, want] of kept) t.equal(parseTracestate(input), want, `kept: ${JSON.stringify(input)}`);
  const dropped: Array<string | undefined> = [
    undefined,
    '',
    ',',
    'Upper=1',
    'k=',
    'k=v=w',
    'k=a,k=b',
    '=v',
    '1abc=v',
    'tenant@Vendor=v',
    'k=\u00e9',
    Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(','),
    `k=${'v'.repeat(257)}`, // a value is at most 256 characters
    Array.from({ length: 10 }, (_, i) => `k${i}=${'v'.repeat(60)}`).join(','),
  ];
  for (const input of dropped) t.equal(parseTracestate(input), undefined, `dropped: ${JSON.stringify(input)?.slice(0, 60)}`);
  const thirtyTwo = Array.from({ length: 32 }, (_, i) => `k${i}=v`).join(',');
  t.equal(parseTracestate(thirtyTwo), thirtyTwo, '32 members are allowed');
  t.ok((parseTracestate(Array.from({ length: 8 }, (_, i) => `k${i}=${'v'.repeat(60)}`).join(',')) ?? '').length <= MAX_TRACESTATE_LENGTH);
});
