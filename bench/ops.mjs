// The operations layer alone, no sockets: µs per request for what the exchange adds per request
// with the defaults on (metrics observer, access line on pino's asynchronous destination, request
// id, trace context), and the key lookup of the auth policy. Bounded: ROUNDS rounds of N calls per
// case, median of the rounds. A new id is measured as the upstream request uses it: checked once
// as a header value (undici's check), which is where a concatenated string pays to be made flat.
//
//   npm run build && node bench/ops.mjs
//
// Environment: BENCH_OPS_N (50000 calls per round), BENCH_OPS_ROUNDS (5).
//
// Then the libraries by their public API against the code they replace (or that stays), as pairs
// measured in interleaved rounds (A, B, A, B...: a load from elsewhere hits both alike), with the
// median of each, B/A, B-A in µs, and that difference as a share of a route's CPU per request
// (BENCH_OPS_ROUTE_US, default 45 and 60 µs: the undici engine, BENCHMARKS.md).
// BENCH_OPS_BASE=<a built checkout> takes A of the metrics pair from that checkout's dist/.
import { hash, randomUUID } from 'node:crypto';
import { Readable, Stream, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { AccessLog, accessLine } from '../dist/ops/access-log.js';
import { logDestination } from '../dist/ops/log-destination.js';
import { GatewayMetrics } from '../dist/ops/metrics.js';
import { requestIdOf, traceContextOf } from '../dist/core/request-id.js';
import { KeyRing, hashKey, newKey } from '../dist/policies/auth/keys.js';
import { DeclaredFacts } from '../dist/core/facts.js';
import { declaresOf, paramSlot } from '../dist/policies/list-pets/facts.js';

const N = Number(process.env.BENCH_OPS_N ?? 50_000);
const ROUNDS = Number(process.env.BENCH_OPS_ROUNDS ?? 5);

// The facts list-pets leaves on a listPets exchange: the access log writes `limit` from them.
const LIST_DECLARES = declaresOf(['limit', 'status'], new Set(['status']));
const facts = new DeclaredFacts(LIST_DECLARES.logFields);
facts.set(paramSlot('limit'), 20);
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
await libraries();
await access.close();

/**
 * Median µs per call of `a` and of `b`, measured in alternating rounds, in CPU time of this
 * process (process.cpuUsage): on a shared machine, time spent waiting for a core is not counted.
 */
async function interleaved(a, b) {
  const ra = [];
  const rb = [];
  const round = async (fn, out, keep) => {
    const c0 = process.cpuUsage();
    for (let i = 0; i < N; i++) {
      fn(i);
      if ((i & 63) === 63) await new Promise(setImmediate);
    }
    const c = process.cpuUsage(c0);
    if (keep) out.push((c.user + c.system) / N);
  };
  for (let r = 0; r < ROUNDS + 1; r++) {
    await round(a, ra, r > 0); // round 0 warms up both
    await round(b, rb, r > 0);
  }
  const median = (xs) => xs.sort((x, y) => x - y)[Math.floor(xs.length / 2)];
  return [median(ra), median(rb)];
}

async function libraries() {
  const routeUs = (process.env.BENCH_OPS_ROUTE_US ?? '45,60').split(',').map(Number);
  const pairs = [];
  // pino: the access line as the gateway writes it, against logger.info() of the same fields on
  // the same kind of logger (ISO time, pid, child binding) and destination.
  const logger = pino({ level: 'info', base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, logDestination('/dev/null')).child({ log: 'access' });
  const ownLine = new AccessLog({ destination: '/dev/null' });
  pairs.push(['pino: own line writer (A) vs logger.info(fields) (B)', (i) => ownLine.onEnd(records[i & 3]), (i) => logger.info(accessLine(records[i & 3]), 'request')]);
  // http-proxy-3's `buffer` option: the request body handed over as the engine does (a Stream whose
  // pipe() ends the upstream request with the body, in per-call options) against a Readable per
  // request (Readable.from), piped into a Writable as http-proxy-3 pipes it into its ClientRequest.
  const proxyOptions = { target: { host: '127.0.0.1:1', port: 1 }, selfHandleResponse: true, toProxy: true, prependPath: false, secure: true };
  const body = Buffer.from('{"name":"Rex","categoryId":1,"status":"available"}');
  const sink = () => new Writable({ write: (_c, _e, done) => done() });
  class BodySource extends Stream {
    constructor(b) {
      super();
      this.b = b;
    }
    pipe(d) {
      d.end(this.b);
      return d;
    }
  }
  pairs.push([
    'http-proxy-3: body as a one-write Stream (A) vs Readable.from (B)',
    () => ({ ...proxyOptions, ...{ buffer: new BodySource(body) } }).buffer.pipe(sink()),
    () => ({ ...proxyOptions, ...{ buffer: Readable.from([body]) } }).buffer.pipe(sink()),
  ]);
  const baseDir = process.env.BENCH_OPS_BASE;
  if (baseDir !== undefined) {
    const base = await import(pathToFileURL(`${baseDir}/dist/ops/metrics.js`).href);
    const a = new base.GatewayMetrics({ defaultMetrics: false });
    const b = new GatewayMetrics({ defaultMetrics: false });
    pairs.push([`prom-client: metrics.onEnd of ${baseDir} (A) vs this build (B)`, (i) => a.onEnd(records[i & 3]), (i) => b.onEnd(records[i & 3])]);
  }
  console.log(`\nlibraries, interleaved, median CPU µs per call; share = (B-A) / a route's ${routeUs.join(' or ')} µs`);
  for (const [name, a, b] of pairs) {
    const [ua, ub] = await interleaved(a, b);
    const share = routeUs.map((u) => `${(((ub - ua) / u) * 100).toFixed(1)}%`).join(' / ');
    console.log(`${ua.toFixed(3).padStart(8)} ${ub.toFixed(3).padStart(8)}  B/A ${(ub / ua).toFixed(2)}  B-A ${(ub - ua).toFixed(3)} µs  share ${share}  ${name}`);
  }
  await ownLine.close();
}
