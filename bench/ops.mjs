// The operations layer alone, no sockets: µs per request for what the exchange adds per request
// with the defaults on (metrics observer, access line on pino's asynchronous destination, request
// id, trace context), and the key lookup of the auth policy. Bounded: ROUNDS rounds of N calls per
// case, median of the rounds. A new id is measured as the upstream request uses it: checked once
// as a header value (undici's check), which is where a concatenated string pays to be made flat.
//
//   npm run build && node bench/ops.mjs
//
// Environment: BENCH_OPS_N (50000 calls per round), BENCH_OPS_ROUNDS (5).
import { hash, randomUUID } from 'node:crypto';
import { AccessLog, accessLine } from '../dist/ops/access-log.js';
import { GatewayMetrics } from '../dist/ops/metrics.js';
import { requestIdOf, traceContextOf } from '../dist/core/request-id.js';
import { KeyRing, hashKey, newKey } from '../dist/policies/auth/keys.js';
import { DeclaredFacts } from '../dist/core/facts.js';
import { DECLARES as LIST_DECLARES, LIMIT } from '../dist/policies/list-pets/facts.js';

const N = Number(process.env.BENCH_OPS_N ?? 50_000);
const ROUNDS = Number(process.env.BENCH_OPS_ROUNDS ?? 5);

// The facts list-pets leaves on a listPets exchange: the access log writes `limit` from them.
const facts = new DeclaredFacts(LIST_DECLARES.logFields);
facts.set(LIMIT, 20);
const base = {
  startedAt: Date.now(), durationMs: 1.234, requestId: '6f1c1f0e-9d0b-4c38-9a7e-5b8c1d2e3f40', method: 'GET', route: '/v1/pets',
  operation: 'listPets', status: 200, errorCode: undefined, rejectedBy: undefined, upstreamStatus: 200, upstreamMs: 0.9,
  upstreamFailure: undefined, bytesIn: 0, bytesOut: 2048, clientAddress: '127.0.0.1', consumer: 'team-a', facts,
};
// A realistic mix: listPets 200, getPet 200 and 404, auth 401 (no upstream).
const records = [
  base,
  { ...base, route: '/v1/pets/{petId}', operation: 'getPet' },
  { ...base, route: '/v1/pets/{petId}', operation: 'getPet', status: 404, errorCode: 'pet_not_found', upstreamStatus: 404 },
  { ...base, status: 401, errorCode: 'invalid_api_key', rejectedBy: 'auth', upstreamStatus: undefined, upstreamMs: undefined, consumer: undefined },
];

/**
 * Median µs per call over the rounds. Calls run in batches of 64 with a turn of the event loop in
 * between (counted), as in a server: pino's asynchronous destination writes between turns, so a
 * tight loop would measure a buffer growing without bound instead.
 */
async function measure(fn) {
  const perRound = [];
  for (let r = 0; r < ROUNDS + 1; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) {
      fn(i);
      if ((i & 63) === 63) await new Promise(setImmediate);
    }
    const us = Number(process.hrtime.bigint() - t0) / 1000 / N;
    if (r > 0) perRound.push(us); // round 0 warms up
  }
  perRound.sort((a, b) => a - b);
  return perRound[Math.floor(perRound.length / 2)];
}

const metrics = new GatewayMetrics();
const access = new AccessLog({ destination: '/dev/null' });
let counter = 0;
const prefix = randomUUID().slice(0, 8);
const tp = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7' };

// undici's check of a header value (lib/core/util.js isValidHeaderValue).
const HEADER_CHAR = /[^\t\x20-\x7e\x80-\xff]/;
const checked = (value) => HEADER_CHAR.test(value);
const ring = new KeyRing();
const key = newKey();
ring.add('bench', hashKey(key));

const cases = [
  ['metrics.onEnd (mix of 4 records)', (i) => metrics.onEnd(records[i & 3])],
  ['access.onEnd (line built here, batched writes, /dev/null)', (i) => access.onEnd(records[i & 3])],
  ['(reference) JSON.stringify of the same fields', (i) => JSON.stringify(accessLine(records[i & 3]))],
  ['requestIdOf(valid header) kept', () => requestIdOf('abc-123')],
  ['requestIdOf(undefined), checked as a header', () => checked(requestIdOf(undefined))],
  ['(reference) node randomUUID(), checked as a header', () => checked(randomUUID())],
  ['(alternative) prefix + counter id, checked as a header', () => checked(`${prefix}-${(counter++).toString(36)}`)],
  ['traceContextOf(valid traceparent + tracestate)', () => traceContextOf(tp)],
  ['traceContextOf({}) new traceparent, checked as a header', () => checked(traceContextOf({}).traceparent)],
  ['KeyRing.grant(valid key): SHA-256 as base64, compared', () => ring.grant(key)],
  ["(reference) crypto.hash('sha256', key, 'buffer'): a Buffer per digest", () => hash('sha256', key, 'buffer')],
];
console.log(`node ${process.version}, ${N} calls x ${ROUNDS} rounds, median µs per call`);
console.log(`${(await measure(() => {})).toFixed(3).padStart(8)} µs  (the loop and its event-loop turns alone)`);
for (const [name, fn] of cases) console.log(`${(await measure(fn)).toFixed(3).padStart(8)} µs  ${name}`);
await access.close();
