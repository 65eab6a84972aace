/**
 * Traces as an operator runs them: the built CLI (`petstore-gateway serve`), each gateway its own
 * process on 127.0.0.1 port 0, configured by a policy file and the OTEL_* environment, exporting
 * to a real OTLP/HTTP receiver (test/helpers/otlp-receiver.ts) that misbehaves on demand. What it
 * covers (docs/operations.md, "Traces"):
 *
 * 1. The environment alone (no `telemetry` section): endpoint, protocol, headers, service name and
 *    resource reach the collector; the header's secret appears in no output; the file's endpoint
 *    wins over the environment's.
 * 2. A hostile collector (hang, 503, reset, slow, then ok): every request answered, its latency
 *    that of a gateway without tracing measured in the same run; the process stays up; the trace
 *    metrics on the admin port move and the queue stays bounded; the collector back gets spans.
 * 3. SIGTERM: what is queued is exported before the process exits 0, within the grace period; a
 *    hanging collector does not hold the stop past it.
 * 4. SIGHUP: sampleRatio takes effect (the keep classes still kept), the endpoint does not.
 * 5. --workers 2: spans from each worker, each its own service.instance.id; the primary's
 *    metrics sum the workers'.
 * 6. A malformed OTEL_* variable: a warning at start that names it, never a header's value.
 */
import t from 'tap';
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { parseExposition, value, type Scrape } from '../helpers/prom.js';
import {
  adminUrl,
  bearer,
  ensureBuilt,
  request,
  sendJson,
  sleep,
  spawnCliUntil,
  startStubUpstream,
  tempDir,
  testKey,
  waitFor,
  type ProcessHandle,
  type StubUpstream,
  type TeardownHost,
  logEntries,
  type LogEntry,
} from '../helpers/servers.js';
import { within } from '../helpers/wait.js';

ensureBuilt();

const dir = tempDir(t, 'traces-cli');
const KEY = testKey();
const READY = /petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) /;
const RELOADED = 'policy reloaded';
const REFUSED = 'policy reload refused; the previous policy stays';
const SETTINGS_IGNORED = 'telemetry.traces: settings ignored';

/** A policy file text (JSON, which is YAML 1.2) in front of `upstream` (a base URL, or builtin). */
function policy(upstream: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ version: 1, upstream: { url: upstream }, policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' } }, ...extra }, null, 2) + '\n';
}

/** Replaces a file atomically (write then rename), as a config management tool would. */
function writeAtomic(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, file);
}

interface Gw {
  /** The API listener, http://127.0.0.1:PORT. */
  readonly url: string;
  /** The admin listener. */
  readonly admin: string;
  readonly handle: ProcessHandle;
  readonly file: string;
  /** Rewrites the policy file, sends SIGHUP and returns the reload outcome logged. */
  reload(text: string): Promise<LogEntry>;
  /** SIGTERM; the exit and how long it took from the signal (bounded by `ms`, then SIGKILL). */
  stop(ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

/** `serve --policy FILE` with LOG_LEVEL=info and `env` (OTEL_* included), once it listens. */
async function serve(t: TeardownHost, name: string, text: string, env: Record<string, string> = {}, args: string[] = []): Promise<Gw> {
  const sub = mkdtempSync(join(dir, `${name}-`));
  const file = join(sub, 'policy.yaml');
  writeFileSync(file, text);
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--host', '127.0.0.1', '--port', '0', ...args], READY, {
    env: { PETSTORE_API_KEYS: KEY, LOG_LEVEL: 'info', ...env },
    timeoutMs: 30_000,
  });
  return {
    url: match[1]!,
    admin: await waitFor('the admin line', () => {
      try {
        return adminUrl(handle);
      } catch {
        return undefined;
      }
    }, 10_000),
    handle,
    file,
    async reload(next) {
      const since = handle.output().stdout.length;
      writeAtomic(file, next);
      handle.child.kill('SIGHUP');
      return waitFor('a reload outcome', () => logEntries(handle, since).find((e) => e.msg === RELOADED || e.msg === REFUSED), 10_000);
    },
    async stop(ms) {
      const since = performance.now();
      handle.child.kill('SIGTERM');
      const exit = await within(handle.exited, ms, 'timeout' as const);
      if (exit === 'timeout') {
        handle.child.kill('SIGKILL');
        await handle.exited;
        return { code: null, signal: 'SIGKILL', ms: Math.round(performance.now() - since) };
      }
      return { ...exit, ms: Math.round(performance.now() - since) };
    },
  };
}

async function receiver(t: TeardownHost, options: Parameters<typeof startOtlpReceiver>[0] = {}): Promise<OtlpReceiver> {
  const r = await startOtlpReceiver(options);
  t.teardown(() => r.close());
  return r;
}

const PET = '{"id":7,"name":"Rex","categoryId":9,"status":"available"}';

/** A pet store upstream: 200 for every read, 500 at /v1/pets/500 (an error: a keep class). */
function petStore(t: TeardownHost): Promise<StubUpstream> {
  return startStubUpstream(t, (req, res) => {
    const path = req.url.split('?')[0];
    if (path === '/v1/pets/500') return sendJson(res, 500, '{"error":"boom"}');
    if (path === '/v1/pets') return sendJson(res, 200, `[${PET}]`);
    return sendJson(res, 200, PET);
  });
}

const ask = (gw: Gw, path: string, id: string) => request(`${gw.url}${path}`, { headers: { ...bearer(KEY), 'x-request-id': id } });

async function scrape(gw: Gw): Promise<Scrape> {
  const res = await request(`${gw.admin}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return parseExposition(res.body);
}

const SPANS = 'petstore_gateway_trace_spans_total';
const EXPORTS = 'petstore_gateway_trace_exports_total';
const QUEUE = 'petstore_gateway_trace_queue_spans';

function traceCounts(s: Scrape) {
  return {
    exported: value(s, SPANS, { outcome: 'exported' }) ?? NaN,
    dropped: value(s, SPANS, { outcome: 'dropped' }) ?? NaN,
    failed: value(s, SPANS, { outcome: 'failed' }) ?? NaN,
    ok: value(s, EXPORTS, { result: 'ok' }) ?? NaN,
    retried: value(s, EXPORTS, { result: 'retried' }) ?? NaN,
    exportsFailed: value(s, EXPORTS, { result: 'failed' }) ?? NaN,
    queued: value(s, QUEUE) ?? NaN,
  };
}

const serverSpans = (spans: ReceivedSpan[]) => spans.filter((s) => s.span.kind === 2);
const requestIds = (spans: ReceivedSpan[]) => serverSpans(spans).map((s) => String(s.attributes['gateway.request.id']));

function p(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

// ---------------------------------------------------------------------------------------------
// 1. The environment alone

// parity: tracing is opened by the process's gateway holder and exported alike whatever the engine; the engines' part is test/e2e/traces.test.ts
t.test('1. OTEL_* alone, no telemetry section: JSON, the header, the resource; no secret in the output; the file wins', async (t) => {
  const SECRET = `sk_${testKey()}`;
  const [collector, other] = await Promise.all([receiver(t), receiver(t)]);
  const up = await petStore(t);
  const env = {
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.url.origin,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_HEADERS: `x-api-key=${SECRET}`,
    OTEL_SERVICE_NAME: 'checkout-gw',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
    OTEL_BSP_SCHEDULE_DELAY: '50',
  };
  // LOG_LEVEL=debug: whatever the gateway says, the secret must not be in it.
  const [gw, filed] = await Promise.all([
    serve(t, 'env-only', policy(`${up.origin}/v1`), { ...env, LOG_LEVEL: 'debug' }),
    serve(t, 'env-and-file', policy(`${up.origin}/v1`, { telemetry: { traces: { endpoint: other.url.href } } }), env),
  ]);
  t.equal((await ask(gw, '/v1/pets', 'env-1')).status, 200);
  const spans = await collector.waitForSpans(2, 10_000);
  const req = collector.requests[0]!;
  t.equal(req.path, '/v1/traces', 'v1/traces appended to the base URL');
  t.match(req.headers['content-type'], /^application\/json/, 'http/json');
  t.equal(req.headers['x-api-key'], SECRET, 'the header from OTEL_EXPORTER_OTLP_HEADERS');
  t.ok(req.raw.toString('utf8').startsWith('{'), 'a JSON body');
  const server = serverSpans(spans).find((s) => s.attributes['gateway.request.id'] === 'env-1');
  t.ok(server, 'the SERVER span');
  t.equal(server?.resource['service.name'], 'checkout-gw');
  t.equal(server?.resource['deployment.environment.name'], 'test');
  t.type(server?.resource['service.instance.id'], 'string');

  // The collector refuses for a while: the warnings it causes hold no secret either.
  collector.mode = 'status400';
  t.equal((await ask(gw, '/v1/pets', 'env-2')).status, 200);
  await collector.waitForRequests(2, 10_000);
  await waitFor('the export failure warning', () => logEntries(gw.handle).find((e) => e.msg === 'span export failed'), 10_000);
  collector.mode = 'ok';

  // Both set: the file's endpoint; the environment's protocol and headers still apply.
  t.equal((await ask(filed, '/v1/pets', 'filed-1')).status, 200);
  const theirs = await other.waitForSpans(2, 10_000);
  t.same(requestIds(theirs), ['filed-1'], "the file's endpoint gets the spans");
  t.match(other.requests[0]?.headers['content-type'], /^application\/json/);
  t.equal(other.requests[0]?.headers['x-api-key'], SECRET);
  t.equal(theirs[0]?.resource['service.name'], 'checkout-gw');
  await sleep(200);
  t.notOk(requestIds(collector.spans()).includes('filed-1'), "the environment's endpoint gets none of them");

  const [a, b] = await Promise.all([gw.stop(15_000), filed.stop(15_000)]);
  t.equal(a.code, 0);
  t.equal(b.code, 0);
  for (const g of [gw, filed]) {
    const { stdout, stderr } = g.handle.output();
    t.ok(stdout.length > 0, 'the gateway did log');
    t.notOk(stdout.includes(SECRET), 'the secret is not on stdout');
    t.notOk(stderr.includes(SECRET), 'the secret is not on stderr');
  }
});

// ---------------------------------------------------------------------------------------------
// 2. A hostile collector

/** How the traced gateway of (2) exports: short bounds, so that every misbehaviour shows within a phase. */
const HOSTILE_TRACES = {
  timeoutMs: 300,
  batch: { delayMs: 20, maxQueueSpans: 40, maxBatchSpans: 10, timeoutMs: 1500 },
  retry: { maxAttempts: 3, initialBackoffMs: 50, maxBackoffMs: 200 },
};

interface PhaseResult {
  readonly traced: number[];
  readonly plain: number[];
  readonly statuses: Map<number, number>;
  /** The queue gauge's largest value seen during the phase. */
  readonly maxQueue: number;
}

/**
 * Requests to both gateways for at least `ms` (at most `maxPairs` pairs): `lanes` loops, each
 * sending one request to the traced gateway and one to the plain, in turn (which goes first
 * alternates), so both are measured under the same load. The traced gateway's queue gauge is
 * scraped meanwhile.
 */
async function phase(traced: Gw, plain: Gw, ms: number, lanes = 4, maxPairs = 3000): Promise<PhaseResult> {
  const out: PhaseResult & { maxQueue: number } = { traced: [], plain: [], statuses: new Map(), maxQueue: 0 };
  const end = performance.now() + ms;
  let pairs = 0;
  const timed = async (gw: Gw, into: number[]) => {
    const start = performance.now();
    const res = await request(`${gw.url}/v1/pets`, { headers: bearer(KEY), timeoutMs: 5000 });
    into.push(performance.now() - start);
    out.statuses.set(res.status, (out.statuses.get(res.status) ?? 0) + 1);
  };
  const lane = async (i: number) => {
    for (let n = 0; performance.now() < end && pairs < maxPairs; n++) {
      pairs++;
      if ((n + i) % 2 === 0) {
        await timed(traced, out.traced);
        await timed(plain, out.plain);
      } else {
        await timed(plain, out.plain);
        await timed(traced, out.traced);
      }
    }
  };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      out.maxQueue = Math.max(out.maxQueue, traceCounts(await scrape(traced)).queued);
      await sleep(100);
    }
  })();
  await Promise.all(Array.from({ length: lanes }, (_, i) => lane(i)));
  sampling = false;
  await sampler;
  return out;
}

// parity: tracing is opened by the process's gateway holder and exported alike whatever the engine; the engines' part is test/e2e/traces.test.ts
t.test('2. a hostile collector: requests unaffected, the process up, the metrics move, the queue bounded, recovery', async (t) => {
  const collector = await receiver(t, { slowMs: 100, drip: true, padBytes: 16 });
  const [traced, plain] = await Promise.all([
    serve(t, 'hostile', policy('builtin', { telemetry: { traces: { endpoint: collector.url.href, ...HOSTILE_TRACES } } })),
    serve(t, 'untraced', policy('builtin')),
  ]);
  // Warm both up (connections, JIT) before anything is measured.
  await phase(traced, plain, 300, 2);
  const all = { traced: [] as number[], plain: [] as number[] };
  // `slow`: the head at once, then a byte of the body every 100 ms: past timeoutMs (300).
  const expected: Record<string, Array<keyof ReturnType<typeof traceCounts>>> = { hang: ['retried', 'dropped'], status503: ['retried'], reset: ['retried'], slow: ['retried'] };
  let before = traceCounts(await scrape(traced));
  for (const mode of ['hang', 'status503', 'reset', 'slow'] as const) {
    collector.mode = mode;
    const r = await phase(traced, plain, 1500);
    const after = traceCounts(await scrape(traced));
    const [tr, pl] = [[...r.traced].sort((a, b) => a - b), [...r.plain].sort((a, b) => a - b)];
    t.comment(`${mode}: ${r.traced.length} pairs; traced p50 ${p(tr, 0.5).toFixed(1)} p99 ${p(tr, 0.99).toFixed(1)} ms; untraced p50 ${p(pl, 0.5).toFixed(1)} p99 ${p(pl, 0.99).toFixed(1)} ms; queue max ${r.maxQueue}; ${JSON.stringify(after)}`);
    t.same([...r.statuses.keys()], [200], `${mode}: every request answered 200`);
    t.ok(r.maxQueue <= HOSTILE_TRACES.batch.maxQueueSpans, `${mode}: the queue gauge (at most ${r.maxQueue}) within maxQueueSpans`);
    t.ok(after.queued <= HOSTILE_TRACES.batch.maxQueueSpans);
    for (const k of expected[mode]!) t.ok(after[k] > before[k], `${mode}: ${k} moved (${before[k]} -> ${after[k]})`);
    t.equal(traced.handle.child.exitCode, null, `${mode}: the gateway is still up`);
    all.traced.push(...r.traced);
    all.plain.push(...r.plain);
    before = after;
  }
  t.ok(before.failed > 0, `spans given up: ${before.failed}`);
  t.ok(before.exportsFailed > 0, `exports given up: ${before.exportsFailed}`);
  t.ok(before.dropped > 0, `spans dropped: ${before.dropped}`);
  const [tr, pl] = [all.traced.sort((a, b) => a - b), all.plain.sort((a, b) => a - b)];
  const bound = 2 * p(pl, 0.99) + 20;
  t.ok(p(tr, 0.99) <= bound, `traced p99 ${p(tr, 0.99).toFixed(1)} ms <= 2 x untraced p99 + 20 ms = ${bound.toFixed(1)} ms (p50 ${p(tr, 0.5).toFixed(1)} vs ${p(pl, 0.5).toFixed(1)})`);

  // The collector back: what waits is sent, and later spans arrive. (Sent at once, they could
  // find the queue still full, and be dropped as the queue says.)
  collector.mode = 'ok';
  let drained = traceCounts(await scrape(traced));
  for (let i = 0; i < 150 && drained.queued > 0; i++) {
    await sleep(100);
    drained = traceCounts(await scrape(traced));
  }
  t.equal(drained.queued, 0, 'the queue drains');
  const marked = Array.from({ length: 5 }, (_, i) => `recovered-${i}`);
  for (const id of marked) t.equal((await ask(traced, '/v1/pets', id)).status, 200);
  await waitFor('the spans after recovery', () => marked.every((id) => requestIds(collector.spans()).includes(id)), 15_000);
  const last = traceCounts(await scrape(traced));
  t.ok(last.exported >= marked.length, `exported: ${last.exported}`);
  t.ok(last.ok > 0);

  const { stderr } = traced.handle.output();
  t.notMatch(stderr, /unhandled|uncaught|TypeError|RangeError/i, 'nothing unhandled on stderr');
  const exit = await traced.stop(15_000);
  t.equal(exit.code, 0, 'and it stops cleanly');
  t.equal((await plain.stop(15_000)).code, 0);
});

// ---------------------------------------------------------------------------------------------
// 3. SIGTERM

// parity: tracing is opened by the process's gateway holder and exported alike whatever the engine; the engines' part is test/e2e/traces.test.ts
t.test('3. SIGTERM exports what is queued before the process exits 0, within shutdownGraceMs', async (t) => {
  const GRACE = 3000;
  const N = 25;
  const collector = await receiver(t);
  // delayMs 60 s and batches of 512: nothing is exported before the stop.
  const gw = await serve(t, 'sigterm', policy('builtin', { server: { shutdownGraceMs: GRACE }, telemetry: { traces: { endpoint: collector.url.href, batch: { delayMs: 60_000 } } } }));
  const ids = Array.from({ length: N }, (_, i) => `term-${i}`);
  for (const id of ids) t.equal((await ask(gw, '/v1/pets', id)).status, 200);
  await sleep(300);
  t.equal(collector.requests.length, 0, 'nothing exported before the stop');
  const exit = await gw.stop(GRACE + 5000);
  // The receiver recorded each request before answering it, and the gateway waited for the answer.
  t.same(requestIds(collector.spans()).sort(), [...ids].sort(), `all ${N} SERVER spans arrived before the process exited`);
  t.equal(exit.code, 0, 'exit code 0');
  t.ok(exit.ms < GRACE, `stopped in ${exit.ms} ms, within shutdownGraceMs (${GRACE})`);
});

// parity: tracing is opened by the process's gateway holder and exported alike whatever the engine; the engines' part is test/e2e/traces.test.ts
t.test('3b. SIGTERM with a hanging collector: the process still exits within shutdownGraceMs and a margin', async (t) => {
  const GRACE = 1500;
  const MARGIN = 1000;
  const collector = await receiver(t, { mode: 'hang' });
  const gw = await serve(t, 'sigterm-hang', policy('builtin', { server: { shutdownGraceMs: GRACE }, telemetry: { traces: { endpoint: collector.url.href, batch: { delayMs: 60_000 } } } }));
  for (let i = 0; i < 10; i++) t.equal((await ask(gw, '/v1/pets', `hang-${i}`)).status, 200);
  const exit = await gw.stop(GRACE + 10_000);
  t.ok(collector.requests.length >= 1, 'the last flush was tried');
  t.equal(exit.code, 0, 'exit code 0');
  t.ok(exit.ms <= GRACE + MARGIN, `stopped in ${exit.ms} ms, within shutdownGraceMs (${GRACE}) + ${MARGIN} ms`);
  t.ok(exit.ms >= GRACE - 100, `the flush had the grace period (${exit.ms} ms)`);
});

// parity: tracing is opened by the process's gateway holder and exported alike whatever the engine; the engines' part is test/e2e/traces.test.ts
t.test('3c. SIGTERM with a request in flight and a hanging collector: one grace period for both, not one each', async (t) => {
  const GRACE = 1500;
  const MARGIN = 1000;
  const collector = await receiver(t, { mode: 'hang' });
  // The upstream answers /v1/pets/77 after 1.2 s: the request ends inside the grace period.
  const up = await startStubUpstream(t, (req, res) => {
    if (req.url.startsWith('/v1/pets/77')) return void setTimeout(() => sendJson(res, 200, PET), 1200);
    sendJson(res, 200, PET);
  });
  const gw = await serve(t, 'sigterm-inflight', policy(`${up.origin}/v1`, { server: { shutdownGraceMs: GRACE }, telemetry: { traces: { endpoint: collector.url.href, batch: { delayMs: 60_000 } } } }));
  const slow = ask(gw, '/v1/pets/77', 'in-flight');
  await waitFor('the request upstream', () => up.requests.some((r) => r.url.startsWith('/v1/pets/77')), 5000);
  const exit = await gw.stop(2 * GRACE + 10_000);
  t.equal((await slow).status, 200, 'the request in flight finished');
  t.equal(exit.code, 0, 'exit code 0');
  t.ok(exit.ms <= GRACE + MARGIN, `stopped in ${exit.ms} ms, within shutdownGraceMs (${GRACE}) + ${MARGIN} ms`);
});

// ---------------------------------------------------------------------------------------------
// 4. SIGHUP

// parity: tracing is opened by the process's gateway holder and exported alike whatever the engine; the engines' part is test/e2e/traces.test.ts
t.test('4. SIGHUP: sampleRatio 1 -> 0 takes effect, errors still kept; a new endpoint is refused and the old settings stay', async (t) => {
  const [collector, other] = await Promise.all([receiver(t), receiver(t)]);
  const up = await petStore(t);
  const traces = (extra: Record<string, unknown>) => policy(`${up.origin}/v1`, { telemetry: { traces: { endpoint: collector.url.href, batch: { delayMs: 20 }, ...extra } } });
  const gw = await serve(t, 'sighup', traces({ sampleRatio: 1 }));
  t.equal((await ask(gw, '/v1/pets', 'before')).status, 200);
  await waitFor('the span before', () => requestIds(collector.spans()).includes('before'), 10_000);

  const reloaded = await gw.reload(traces({ sampleRatio: 0 }));
  t.equal(reloaded.msg, RELOADED, JSON.stringify(reloaded));
  t.equal((await ask(gw, '/v1/pets', 'plain-1')).status, 200);
  t.equal((await ask(gw, '/v1/pets/500', 'error-1')).status, 500);
  await waitFor('the error span', () => requestIds(collector.spans()).includes('error-1'), 10_000);
  // Spans leave in the order their requests ended: a kept plain-1 would be there by now.
  t.notOk(requestIds(collector.spans()).includes('plain-1'), 'a plain request is no longer sampled');
  t.equal(serverSpans(collector.spans()).find((s) => s.attributes['gateway.request.id'] === 'error-1')?.attributes['gateway.sampling'], 'tail', 'the error kept by its class');

  const since = gw.handle.output().stdout.length;
  const refused = await gw.reload(traces({ sampleRatio: 1, endpoint: other.url.href }));
  t.equal(refused.msg, REFUSED, 'a new endpoint is refused');
  t.match(JSON.stringify(refused.problems), /\$\.telemetry\.traces: changed: only sampleRatio, keep and maxTailPerSecond take effect on a reload/, 'the log line says why');
  t.notOk(gw.handle.output().stdout.slice(since).includes(other.url.href), "the refusal does not print the new endpoint");
  t.equal((await ask(gw, '/v1/pets', 'plain-2')).status, 200);
  t.equal((await ask(gw, '/v1/pets/500', 'error-2')).status, 500);
  await waitFor('the second error span, at the old endpoint', () => requestIds(collector.spans()).includes('error-2'), 10_000);
  t.notOk(requestIds(collector.spans()).includes('plain-2'), 'the ratio in force is still 0 (the refused file said 1)');
  t.equal(other.requests.length, 0, 'nothing went to the refused endpoint');
  t.equal((await gw.stop(15_000)).code, 0);
});

// parity: tracing is opened by the process's gateway holder and exported alike whatever the engine; the engines' part is test/e2e/traces.test.ts
t.test('4b. SIGHUP on a gateway traced by the environment: adding telemetry.traces.sampleRatio alone takes effect', async (t) => {
  const collector = await receiver(t);
  const up = await petStore(t);
  const gw = await serve(t, 'sighup-env', policy(`${up.origin}/v1`), { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: collector.url.href, OTEL_BSP_SCHEDULE_DELAY: '20' });
  t.equal((await ask(gw, '/v1/pets', 'before')).status, 200);
  await waitFor('the span before', () => requestIds(collector.spans()).includes('before'), 10_000);
  const reloaded = await gw.reload(policy(`${up.origin}/v1`, { telemetry: { traces: { sampleRatio: 0 } } }));
  t.equal(reloaded.msg, RELOADED, JSON.stringify(reloaded));
  t.equal((await ask(gw, '/v1/pets', 'plain')).status, 200);
  t.equal((await ask(gw, '/v1/pets/500', 'error')).status, 500);
  await waitFor('the error span', () => requestIds(collector.spans()).includes('error'), 10_000);
  t.notOk(requestIds(collector.spans()).includes('plain'), 'the ratio 0 is in force');
  t.equal((await gw.stop(15_000)).code, 0);
});

// ---------------------------------------------------------------------------------------------
// 5. --workers 2

// parity: tracing is opened by the process's gateway holder and exported alike whatever the engine; the engines' part is test/e2e/traces.test.ts
t.test('5. --workers 2: spans from both workers, each its own service.instance.id; the primary sums their metrics', async (t) => {
  const N = 40;
  const collector = await receiver(t);
  const up = await petStore(t);
  // An exporter the gateway has not: a warning (from each worker: each opens its own exporter).
  const gw = await serve(t, 'workers', policy(`${up.origin}/v1`, { telemetry: { traces: { endpoint: collector.url.href, batch: { delayMs: 20 } } } }), { OTEL_TRACES_EXPORTER: 'otlp,zipkin' }, ['--workers', '2']);
  const warned = logEntries(gw.handle).filter((e) => e.msg === SETTINGS_IGNORED);
  t.comment(`warning lines: ${warned.length}, from pids ${warned.map((e) => e.pid).join(', ')}`);
  t.ok(warned.length >= 1 && warned.every((e) => JSON.stringify(e.problems).includes('zipkin')), 'the ignored exporter is warned of');
  for (let i = 0; i < N; i++) t.equal((await ask(gw, '/v1/pets', `w-${i}`)).status, 200);
  // A SERVER and a CLIENT span per request.
  const spans = await collector.waitForSpans(2 * N, 15_000);
  const instances = new Set(serverSpans(spans).map((s) => String(s.resource['service.instance.id'])));
  t.equal(instances.size, 2, `two workers, two instance ids: ${[...instances].join(', ')}`);
  const pids = new Set([...instances].map((id) => id.split('/')[1]));
  t.equal(pids.size, 2, 'two processes');
  t.notOk(pids.has(String(gw.handle.child.pid)), 'neither is the primary');
  let last = traceCounts(await scrape(gw));
  for (let i = 0; i < 50 && last.exported < 2 * N; i++) {
    await sleep(100);
    last = traceCounts(await scrape(gw));
  }
  t.equal(last.exported, collector.spans().length, `the primary's /metrics: exported = every span the collector took (${last.exported})`);
  t.ok(last.ok >= 2, 'at least one export request per worker');
  t.equal(last.dropped, 0);
  t.equal(last.failed, 0);
  t.equal((await gw.stop(20_000)).code, 0);
});

// ---------------------------------------------------------------------------------------------
// 6. Warnings at start

// parity: tracing is opened by the process's gateway holder and exported alike whatever the engine; the engines' part is test/e2e/traces.test.ts
t.test('6. a malformed OTEL_* variable: a warning at start naming it, never a header value', async (t) => {
  const SECRET = `sk_${testKey()}`;
  const SECRET2 = `sk_${testKey()}`;
  const SECRET3 = `sk_${testKey()}`;
  const collector = await receiver(t);
  const gw = await serve(t, 'warnings', policy('builtin'), {
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.url.origin,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: 'abc',
    // A good pair, a pair without "=" (a bare value), a value with a control character.
    OTEL_EXPORTER_OTLP_HEADERS: `x-api-key=${SECRET},${SECRET2},x-other=${SECRET3}%07`,
    OTEL_BSP_SCHEDULE_DELAY: '20',
  });
  // One line with every problem: the operator log throttles warn lines by message (one per 5 s),
  // so a line per problem showed the first alone.
  const warnings = logEntries(gw.handle).filter((e) => e.msg === SETTINGS_IGNORED);
  t.equal(warnings.length, 1, 'one warning line');
  t.equal(warnings[0]?.level, 40, 'at level warn');
  const problems = (warnings[0]?.problems as string[] | undefined) ?? [];
  t.comment(problems.join('\n'));
  t.equal(problems.length, 4, 'every problem in it');
  t.ok(problems.some((p) => p.includes('OTEL_EXPORTER_OTLP_PROTOCOL') && p.includes('grpc')), 'the protocol named');
  t.ok(problems.some((p) => p.includes('OTEL_TRACES_SAMPLER_ARG') && p.includes('abc')), 'the sampler argument named');
  t.ok(problems.some((p) => p.includes('OTEL_EXPORTER_OTLP_HEADERS') && p.includes('pair 2')), 'the pair without "=" named by its place');
  t.ok(problems.some((p) => p.includes('OTEL_EXPORTER_OTLP_HEADERS') && p.includes('x-other')), 'the bad value named by its header');
  // The gateway traces anyway: protobuf (grpc ignored), the good header, ratio 1.0.
  t.equal((await ask(gw, '/v1/pets', 'warned')).status, 200);
  await collector.waitForSpans(1, 10_000);
  t.match(collector.requests[0]?.headers['content-type'], /^application\/x-protobuf/);
  t.equal(collector.requests[0]?.headers['x-api-key'], SECRET);
  t.equal(collector.requests[0]?.headers['x-other'], undefined);
  t.equal((await gw.stop(15_000)).code, 0);
  const { stdout, stderr } = gw.handle.output();
  for (const s of [SECRET, SECRET2, SECRET3]) {
    t.notOk(stdout.includes(s), 'no header value on stdout');
    t.notOk(stderr.includes(s), 'no header value on stderr');
  }
});
