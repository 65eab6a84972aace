/**
 * Traces under attack (docs/operations.md, "Traces"): a client that controls what the spans say
 * (its target, its trace context, its credentials), that tries to force sampling or invent span
 * names, or that leaves mid-answer; a gateway whose deadline fires. Each scenario runs a gateway
 * on 127.0.0.1 with `telemetry.traces` pointed at a real OTLP/HTTP receiver
 * (test/helpers/otlp-receiver.ts) and reads what was exported, raw bytes included. A hostile
 * collector, and a flood of kept spans, are in test/unit/traces-attack.test.ts and the end of this file.
 */
import { Agent, request as httpRequest } from 'node:http';
import tap from 'tap';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { bearer, forEachEngine, listenEngine, policyText, rawExchange, request, sendJson, startGateway, startStubUpstream, testKey, type Engine, type TeardownHost } from '../helpers/servers.js';
import { sleep } from '../helpers/wait.js';

const PET = '{"id":7,"name":"Rex","categoryId":9,"status":"available"}';
const CLIENT_SPAN = 'b7ad6b7169203331';

async function receiver(t: TeardownHost): Promise<OtlpReceiver> {
  const r = await startOtlpReceiver();
  t.teardown(() => r.close());
  return r;
}

/** A pet store upstream; /v1/pets/9 streams its answer slowly (a chunk, then one more after 3 s). */
async function petStore(t: TeardownHost) {
  const timers = new Set<NodeJS.Timeout>();
  t.teardown(() => {
    for (const timer of timers) clearTimeout(timer);
  });
  return startStubUpstream(t, (req, res) => {
    const path = req.url.split('?')[0];
    if (path === '/v1/pets/9') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"id":9,');
      const timer = setTimeout(() => res.end('"name":"Slow"}'), 3000);
      timers.add(timer);
      res.on('close', () => clearTimeout(timer));
      return;
    }
    if (path === '/v1/pets') return sendJson(res, 200, `[${PET}]`);
    return sendJson(res, 200, PET);
  });
}

function tracesPolicy(upstream: string, collector: OtlpReceiver, traces: Record<string, unknown> = {}, more: Record<string, unknown> = {}) {
  return { upstream: { url: `${upstream}/v1` }, ...more, telemetry: { traces: { endpoint: collector.url.href, batch: { delayMs: 20 }, ...traces } } };
}

function serverOf(spans: ReceivedSpan[], requestId: string): ReceivedSpan | undefined {
  return spans.find((s) => s.span.kind === 2 && s.attributes['gateway.request.id'] === requestId);
}

function nanos(s: ReceivedSpan, field: 'startTimeUnixNano' | 'endTimeUnixNano'): bigint {
  return BigInt(s.span[field] as string);
}

/** Every byte the collector received, as latin1 text (protobuf and JSON alike), to search for a secret. */
function everything(collector: OtlpReceiver): string {
  return Buffer.concat(collector.requests.map((r) => r.raw)).toString('latin1');
}

forEachEngine(tap, async (t, engine) => {
  t.test('an absolute-form target with user:password@ and a query: neither reaches a span', async (t) => {
    const collector = await receiver(t);
    const up = await petStore(t);
    const gw = await startGateway(t, tracesPolicy(up.origin, collector), { engine });
    const port = Number(new URL(gw.url).port);
    const head = (id: string, target: string) => `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${gw.key}\r\nx-request-id: ${id}\r\nConnection: close\r\n\r\n`;
    await rawExchange(port, head('abs', `http://alice:HUNTER2PASS@127.0.0.1:${port}/v1/pets?api_key=QUERYSECRET1`));
    await rawExchange(port, head('abs-pet', `http://bob:HUNTER3PASS@127.0.0.1:${port}/v1/pets/7`));
    await rawExchange(port, head('odd', `ftp://carol:HUNTER4PASS@x/y`));
    await collector.waitForSpans(3, 10_000);
    await sleep(100);
    const spans = collector.spans();
    const raw = everything(collector);
    for (const secret of ['HUNTER2PASS', 'HUNTER3PASS', 'HUNTER4PASS', 'alice', 'QUERYSECRET1', gw.key]) t.notOk(raw.includes(secret), `${secret === gw.key ? 'the key' : secret}: in no exported byte`);
    for (const id of ['abs', 'abs-pet', 'odd']) {
      const s = serverOf(spans, id);
      t.ok(s, `${id}: a SERVER span`);
      const path = s?.attributes['url.path'];
      t.ok(path === undefined || (typeof path === 'string' && path.startsWith('/')), `${id}: url.path is a path, or absent (${String(path)})`);
    }
  });

  t.test("the span's tracestate is what the upstream was sent: an invalid one is not exported", async (t) => {
    const collector = await receiver(t);
    const up = await petStore(t);
    const gw = await startGateway(t, tracesPolicy(up.origin, collector), { engine });
    const port = Number(new URL(gw.url).port);
    const tp = (i: number) => `00-${(0xabc0 + i).toString(16).padStart(32, '0')}-${CLIENT_SPAN}-00`;
    const cases: Array<[string, string[]]> = [
      ['bad', ['a=b, NOT A MEMBER \u00e9\u00ff']],
      ['dup', ['k=1,k=2']],
      ['ok', ['vendor=abc']],
      ['two', ['a=1', 'b=2']],
    ];
    let i = 0;
    for (const [id, values] of cases) {
      const lines = values.map((v) => `tracestate: ${v}\r\n`).join('');
      await rawExchange(port, Buffer.from(`GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${gw.key}\r\nx-request-id: ${id}\r\ntraceparent: ${tp(i++)}\r\n${lines}Connection: close\r\n\r\n`, 'latin1'));
    }
    const spans = await collector.waitForSpans(8, 10_000);
    const sent = (id: string) => up.requests.find((q) => q.headers['x-request-id'] === id)?.headers.tracestate;
    for (const [id] of cases) {
      const server = serverOf(spans, id);
      t.ok(server, `${id}: a SERVER span`);
      const client = spans.find((s) => s.span.kind === 3 && s.span.parentSpanId === server?.span.spanId);
      t.equal(server?.span.traceState ?? undefined, sent(id) || undefined, `${id}: the SERVER span's tracestate is the upstream's (${String(sent(id))})`);
      t.equal(client?.span.traceState ?? undefined, sent(id) || undefined, `${id}: the CLIENT span's too`);
    }
    t.equal(serverOf(spans, 'ok')?.span.traceState, 'vendor=abc');
    t.equal(serverOf(spans, 'two')?.span.traceState, 'a=1,b=2', 'two headers are one list');
  });

  t.test('a client cannot force sampling: neither its flag nor a trace id it picked counts', async (t) => {
    const collector = await receiver(t);
    const up = await petStore(t);
    const gw = await startGateway(t, tracesPolicy(up.origin, collector, { sampleRatio: 0.01, keep: [] }), { engine });
    const n = 60;
    for (let i = 0; i < n; i++) {
      // The last 56 bits of the trace id are what a trace-id ratio compares: all zero is under any ratio.
      const traceId = `${(i + 1).toString(16).padStart(18, '0')}00000000000000`;
      const res = await request(`${gw.url}/v1/pets`, { headers: { ...bearer(gw.key), traceparent: `00-${traceId}-${CLIENT_SPAN}-01` } });
      t.equal(res.status, 200, `${res.status} ${res.body.slice(0, 80)}`);
    }
    await sleep(200);
    const told = up.requests.filter((q) => String(q.headers.traceparent).endsWith('-01')).length;
    const exported = collector.spans().filter((s) => s.span.kind === 2).length;
    // At 0.01, 6 or more of 60 has odds below 1e-4.
    t.ok(told <= 5, `${told} of ${n} upstream requests told "sampled"`);
    t.ok(exported <= 5, `${exported} of ${n} traces exported`);
  });

  t.test('no key, no Authorization and no upstream credential in any exported byte, protobuf or JSON', async (t) => {
    const CREDENTIAL = 'Basic dXBzdHJlYW06VVBTVFJFQU1TRUNSRVQ=';
    for (const protocol of ['http/protobuf', 'http/json']) {
      const collector = await receiver(t);
      const up = await petStore(t);
      const gw = await startGateway(t, tracesPolicy(up.origin, collector, { protocol }, { policies: { auth: { upstreamAuthorization: { fromEnv: 'UP_CRED' } } } }), { engine, env: { UP_CRED: CREDENTIAL } });
      await request(`${gw.url}/v1/pets?limit=2`, { headers: { ...bearer(gw.key), 'x-request-id': 'ok' } });
      await request(`${gw.url}/v1/pets/7?api_key=QUERYSECRET2`, { headers: { ...bearer(gw.key), 'x-request-id': 'q' } });
      await request(`${gw.url}/v1/pets/7`, { headers: { authorization: 'Bearer WRONGKEYSECRET3', 'x-request-id': 'wrong' } });
      await request(`${gw.url}/v1/pets/7`, { headers: { authorization: `Basic ${Buffer.from(`u:${gw.key}`).toString('base64')}`, 'x-request-id': 'basic' } });
      await request(`${gw.url}/v1/nowhere`, { headers: { authorization: 'Bearer WRONGKEYSECRET4', 'x-request-id': 'nf' } });
      const spans = await collector.waitForSpans(6, 10_000);
      await sleep(100);
      t.equal(up.requests[0]?.headers.authorization, CREDENTIAL, `${protocol}: the upstream did get the credential`);
      t.ok(serverOf(spans, 'wrong'), `${protocol}: the refused request has its span`);
      const raw = everything(collector);
      t.notOk(raw.includes(gw.key), `${protocol}: no key`);
      for (const secret of [CREDENTIAL, 'dXBzdHJlYW06VVBTVFJFQU1TRUNSRVQ', 'QUERYSECRET2', 'WRONGKEYSECRET3', 'WRONGKEYSECRET4', 'Bearer', 'Basic']) t.notOk(raw.includes(secret), `${protocol}: no ${secret}`);
    }
  });

  t.test('hostile targets and trace context: spans stay bounded, names stay the route templates', async (t) => {
    const collector = await receiver(t);
    const up = await petStore(t);
    const gw = await startGateway(t, tracesPolicy(up.origin, collector), { engine });
    const huge = 'x'.repeat(10 * 1024);
    const contexts = [
      `00-${huge}`,
      `00-0AF7651916CD43DD8448EB211C80319C-${CLIENT_SPAN.toUpperCase()}-01`,
      `00-${'0'.repeat(32)}-${CLIENT_SPAN}-01`,
      `00-0af7651916cd43dd8448eb211c80319c-${'0'.repeat(16)}-01`,
      `ff-0af7651916cd43dd8448eb211c80319c-${CLIENT_SPAN}-01`,
      `01-0af7651916cd43dd8448eb211c80319c-${CLIENT_SPAN}-01-${huge}`,
    ];
    let n = 0;
    for (const traceparent of contexts) {
      await request(`${gw.url}/v1/pets/${n}`, { headers: { ...bearer(gw.key), traceparent, tracestate: `a=${huge}` } });
      n++;
    }
    // Paths a client invents: long ones, encoded ones, ones that look like templates.
    const paths = [`/v1/pets/${'9'.repeat(4000)}`, `/v1/${'a/'.repeat(2000)}`, '/v1/pets/%7BpetId%7D', '/v1/pets/{petId}x', '/%00%ff', '/v1/pets/7/../../admin', '*'];
    for (let i = 0; i < 40; i++) paths.push(`/v1/random-${i}-${Math.random().toString(36).slice(2)}`);
    for (const p of paths) {
      await request(`${gw.url}${p.startsWith('/') ? p : `/${p}`}`, { headers: bearer(gw.key) }).catch(() => undefined);
      n++;
    }
    await request(`${gw.url}/v1/pets`, { method: 'PROPFIND', headers: bearer(gw.key) }).catch(() => undefined);
    n++;
    const spans = await collector.waitForSpans(n, 15_000);
    await sleep(100);
    const names = new Set(collector.spans().map((s) => s.span.name));
    t.same([...names].sort(), ['GET', 'GET /v1/pets/{petId}', 'HTTP', 'HTTP /v1/pets'].filter((x) => names.has(x)), `span names are route templates or methods: ${[...names].join(' | ')}`);
    t.ok(names.size <= 4, `${names.size} distinct span names for ${n} distinct requests`);
    for (const s of spans) {
      for (const [k, v] of Object.entries(s.attributes)) if (typeof v === 'string') t.ok(v.length <= 600, `${k}: ${v.length} characters`);
      t.ok(((s.span.traceState as string | undefined) ?? '').length <= 512, 'tracestate bounded');
      t.ok(nanos(s, 'startTimeUnixNano') <= nanos(s, 'endTimeUnixNano'), 'start <= end');
    }
    for (const r of collector.requests) t.ok(r.raw.length < 256 * 1024, `an export of ${r.raw.length} bytes`);
    // Every upstream got a valid traceparent the gateway made or continued, in lower-case hex.
    for (const q of up.requests) t.match(q.headers.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
  });

  t.test('a client that leaves mid-answer, and a deadline that fires: the spans end, in order, and say why', async (t) => {
    const collector = await receiver(t);
    const up = await petStore(t);
    const gw = await startGateway(t, tracesPolicy(up.origin, collector, {}, { upstream: { url: `${up.origin}/v1`, timeouts: { totalMs: 400 } }, policies: { 'response-contract': { mode: 'off' } } }), { engine });
    // The client reads the first chunk, then leaves.
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(`${gw.url}/v1/pets/9`, { headers: { ...bearer(gw.key), 'x-request-id': 'left' }, agent: false });
      const timer = setTimeout(() => {
        req.destroy();
        reject(new Error('no first chunk within 2 s'));
      }, 2000);
      req.on('response', (res) => {
        res.once('data', () => {
          clearTimeout(timer);
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => undefined);
      req.end();
    });
    await sleep(100);
    // The deadline: totalMs fires while the body is still coming.
    const started = Date.now();
    await request(`${gw.url}/v1/pets/9`, { headers: { ...bearer(gw.key), 'x-request-id': 'deadline' }, timeoutMs: 3000 }).catch(() => undefined);
    t.ok(Date.now() - started < 2500, 'cut by totalMs, not by the upstream');
    const spans = await collector.waitForSpans(4, 10_000);
    for (const id of ['left', 'deadline']) {
      const server = serverOf(spans, id);
      const clients = spans.filter((s) => s.span.kind === 3 && s.span.parentSpanId === server?.span.spanId);
      t.ok(server, `${id}: a SERVER span`);
      t.equal(clients.length, 1, `${id}: one CLIENT span`);
      const client = clients[0]!;
      t.ok(nanos(server!, 'startTimeUnixNano') <= nanos(client, 'startTimeUnixNano'), `${id}: the CLIENT span starts inside the SERVER span`);
      t.ok(nanos(client, 'startTimeUnixNano') <= nanos(client, 'endTimeUnixNano'), `${id}: CLIENT start <= end`);
      t.ok(nanos(client, 'endTimeUnixNano') <= nanos(server!, 'endTimeUnixNano'), `${id}: the CLIENT span ends inside the SERVER span`);
      const ms = Number(nanos(client, 'endTimeUnixNano') - nanos(client, 'startTimeUnixNano')) / 1e6;
      t.ok(ms < 2500, `${id}: the CLIENT span ended when the attempt did (${Math.round(ms)} ms), not at the upstream's end`);
    }
    const left = spans.find((s) => s.span.kind === 3 && s.span.parentSpanId === serverOf(spans, 'left')?.span.spanId);
    t.equal(left?.attributes['gateway.abandoned'], true, 'the client left: the attempt says abandoned');
    const cut = spans.find((s) => s.span.kind === 3 && s.span.parentSpanId === serverOf(spans, 'deadline')?.span.spanId);
    t.type(cut?.attributes['error.type'], 'string', `the deadline: the attempt has an error type (${String(cut?.attributes['error.type'])})`);
    t.equal((cut?.span.status as { code?: number } | undefined)?.code, 2, 'the deadline: the attempt is an error');
  });
});

/** A gateway through its holder (which opens tracing), so that the exporter's counts can be read; closed at teardown. */
async function tracedGateway(t: TeardownHost, policy: Record<string, unknown>, engine: Engine) {
  const key = testKey();
  const env = { PETSTORE_API_KEYS: key };
  const [{ formatProblems, parsePolicy }, { compileGateway, GatewayHolder }] = await Promise.all([import('../../src/config/load.js'), import('../../src/gateway.js')]);
  const loaded = parsePolicy(policyText(policy), { env });
  if (!loaded.ok) throw new Error('invalid test policy:\n' + formatProblems('policy', loaded.problems));
  const holder = new GatewayHolder(compileGateway(loaded.config, { env }), { env: {} });
  t.teardown(() => holder.close());
  const { url } = await listenEngine(t, engine, holder);
  return { url, key, holder };
}

/** `n` GETs over `lanes` keep-alive connections; each request's latency in ms. */
async function hammer(url: string, headers: Record<string, string>, n: number, lanes: number): Promise<{ statuses: Map<number, number>; ms: number[] }> {
  const agent = new Agent({ keepAlive: true, maxSockets: lanes });
  const statuses = new Map<number, number>();
  const ms: number[] = [];
  let next = 0;
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const t0 = performance.now();
      const req = httpRequest(url, { headers, agent }, (res) => {
        res.resume();
        res.on('end', () => {
          ms.push(performance.now() - t0);
          statuses.set(res.statusCode ?? 0, (statuses.get(res.statusCode ?? 0) ?? 0) + 1);
          resolve();
        });
      });
      req.setTimeout(5000, () => req.destroy(new Error('no answer within 5 s')));
      req.on('error', reject);
      req.end();
    });
  const lane = async () => {
    while (next < n) {
      next++;
      await one();
    }
  };
  try {
    await Promise.all(Array.from({ length: lanes }, lane));
  } finally {
    agent.destroy();
  }
  return { statuses, ms: ms.sort((a, b) => a - b) };
}

// parity: the exporter's queue is behind every engine alike; one engine shows its bound.
tap.test('a client that makes every request a keep class, against a collector that hangs: the queue bound holds, drops are counted, latency stays', async (t) => {
  const collector = await receiver(t);
  collector.mode = 'hang';
  const up = await petStore(t);
  const maxQueueSpans = 200;
  const maxBatchSpans = 50;
  const { url, key, holder } = await tracedGateway(
    t,
    tracesPolicy(up.origin, collector, { sampleRatio: 0, keep: ['rate_limited'], batch: { delayMs: 20, maxQueueSpans, maxBatchSpans }, timeoutMs: 60_000 }, { policies: { 'rate-limit': { limit: 1, windowSeconds: 3600 } } }),
    'undici',
  );
  const n = 1500;
  const { statuses, ms } = await hammer(`${url}/v1/pets`, { authorization: `Bearer ${key}` }, n, 8);
  t.equal(statuses.get(429), n - 1, 'all but the first refused: every one a kept rate_limited trace');
  await collector.waitForRequests(1, 5000);
  const s = holder.traces!.stats();
  t.ok(s.queued <= maxQueueSpans, `queued ${s.queued} <= ${maxQueueSpans}`);
  const hung = collector.requests[0]?.decoded?.resourceSpans?.[0]?.scopeSpans?.[0]?.spans?.length ?? 0;
  t.ok(hung >= 1 && hung <= maxBatchSpans, `the hung export holds ${hung} spans`);
  t.equal(s.queued + hung + s.dropped + s.tailLimited, n - 1, `every kept span is queued, in the hung export, dropped or past the tail budget, and counted (${JSON.stringify(s)})`);
  t.ok(s.dropped + s.tailLimited >= n - 1 - maxQueueSpans - maxBatchSpans, 'the overflow was dropped, not held');
  // maxTailPerSecond (100 by default): a flood faster than that is mostly not even queued.
  t.ok(s.tailLimited > 0, `the tail budget limited ${s.tailLimited} spans`);
  t.equal(collector.requests.length, 1, 'one export in flight at most');
  const p99 = ms[Math.floor(ms.length * 0.99)]!;
  // Were a request to wait on the export, it would wait the export's timeout (60 s).
  t.ok(p99 < 1000, `p99 of a refused request ${p99.toFixed(1)} ms while the collector hangs (median ${ms[ms.length >> 1]!.toFixed(2)} ms)`);
});
