// How the response cache serves a hit, without sockets: the pipeline of a real compiled gateway
// (auth, list-pets, response-contract, cache) over an in-memory upstream, with one more response
// policy that counts how often the response phase runs. The answer is stored after the response
// phase: the miss runs it once, and neither its coalesced waiters nor later hits run it again, nor
// parse or filter the body; they write the miss's bytes with their own request id, Age and Cache-Status.
import t, { type Test } from 'tap';
import { parsePolicy, formatProblems } from '../../src/config/load.js';
import { Chain } from '../helpers/chain.js';
import { Pipeline, type ClientResponse, type FrontHooks, type GatewayView } from '../../src/core/exchange.js';
import type { HeaderValue, Policy, RequestHead, ResponseBody } from '../../src/core/policy.js';
import type { ExchangeRecord } from '../../src/core/record.js';
import type { Upstream, UpstreamHandler, UpstreamRequest } from '../../src/core/upstream.js';
import { GatewayHolder, compileGateway } from '../../src/gateway.js';
import { policyText, testKey } from '../helpers/servers.js';

/** What the exchange writes: node's ServerResponse, reduced to what a test reads. */
class FakeResponse implements ClientResponse {
  headersSent = false;
  writableFinished = false;
  destroyed = false;
  status = 0;
  headers: Record<string, HeaderValue | number> = {};
  body = Buffer.alloc(0);
  private closers: (() => void)[] = [];
  writeHead(status: number, headers: Record<string, HeaderValue | number> | (string | string[])[]): this {
    this.status = status;
    // node's raw form, a flat list `[name, value, ...]` (what a hit writes): one field a pair, and a
    // name given twice would be two fields, which a test must see.
    if (Array.isArray(headers)) {
      const fields: Record<string, HeaderValue | number> = {};
      for (let i = 0; i < headers.length; i += 2) {
        const name = String(headers[i]);
        if (name in fields) throw new Error(`field ${name} written twice`);
        fields[name] = headers[i + 1] as HeaderValue;
      }
      this.headers = fields;
    } else this.headers = headers as Record<string, HeaderValue | number>;
    this.headersSent = true;
    return this;
  }
  write(chunk: Buffer): boolean {
    this.body = Buffer.concat([this.body, chunk]);
    return true;
  }
  end(chunk?: Buffer | string, encoding?: 'latin1'): this {
    if (chunk !== undefined) this.write(typeof chunk === 'string' ? Buffer.from(chunk, encoding ?? 'utf8') : chunk);
    this.writableFinished = true;
    for (const close of this.closers.splice(0)) close.call(this);
    return this;
  }
  destroy(): this {
    this.destroyed = true;
    return this;
  }
  once(event: string, listener: () => void): this {
    return this.on(event, listener);
  }
  on(event: string, listener: () => void): this {
    if (event === 'close') this.closers.push(listener);
    return this;
  }
  setHeader(): this {
    return this;
  }
}

// Three animals where two were asked for, an int64 beyond 2^53, and a field the interface does not define.
const UPSTREAM_BODY = Buffer.from(
  '[{"id":9007199254740993,"name":"Rex","categoryId":1,"internalNote":"x"},{"id":2,"name":"Tom","categoryId":1},{"id":3,"name":"Kit","categoryId":2}]',
);

/** An upstream in memory: answers every call on the next turn of the event loop, and counts them and the trace context each was sent with. */
function memoryUpstream(extra: Readonly<Record<string, string>> = {}): Upstream & { calls: number; traces: unknown[] } {
  return {
    name: 'memory',
    conforms: false,
    calls: 0,
    traces: [],
    send(request: UpstreamRequest, handler: UpstreamHandler): void {
      this.calls++;
      this.traces.push(request.headers.traceparent);
      setImmediate(() => {
        handler.onStart({ pause() {}, resume() {}, abort() {} });
        handler.onHead(200, { 'content-type': 'application/json', 'content-length': String(UPSTREAM_BODY.length), 'cache-control': 'public, max-age=60', ...extra });
        handler.onData(UPSTREAM_BODY);
        handler.onEnd();
      });
    },
    close: () => Promise.resolve(),
  };
}

const front: FrontHooks = {
  proceed: (request) => request.forward(undefined),
  discard: () => undefined,
};

t.test('a hit writes the stored answer: the response phase ran once, for the miss', async (t) => {
  const key = testKey();
  const env = { PETSTORE_API_KEYS: key };
  const loaded = parsePolicy(policyText({ upstream: { url: 'http://127.0.0.1:9/v1' }, policies: { cache: { ttlSeconds: { listPets: 30, getPet: 30 } } } }), { env });
  if (!loaded.ok) throw new Error(formatProblems("policy", loaded.problems));
  const gw = compileGateway(loaded.config, { env });
  const holder = new GatewayHolder(gw);
  t.teardown(() => holder.close());

  let phases = 0;
  const counter: Policy = {
    name: 'count-response-phase',
    wantsResponseBody: () => true,
    onResponseBody(_ex, res: ResponseBody): ResponseBody {
      phases++;
      return res;
    },
  };
  const view: GatewayView = { chain: new Chain([...gw.chain.policies, counter]), bodyLimit: gw.bodyLimit, headerRules: gw.headerRules, answerRules: gw.answerRules };
  const upstream = memoryUpstream();
  const pipeline = new Pipeline({
    gateways: { current: view, breaker: undefined, sendWrapper: holder.sendWrapper },
    upstream,
    settings: { basePath: '/v1', headersMs: 5000, bodyMs: 5000, totalMs: 10_000, maxBufferedBytes: 1 << 20, retryIdempotent: false },
    front,
  });
  const head = (id: string): RequestHead => ({ method: 'GET', target: '/v1/pets?limit=2', headers: { authorization: `Bearer ${key}`, 'x-request-id': id }, remoteAddress: '127.0.0.1', httpVersion: '1.1' });
  const ask = (id: string): FakeResponse => {
    const res = new FakeResponse();
    pipeline.handle(head(id), res, res);
    return res;
  };
  const settled = async (res: FakeResponse): Promise<void> => {
    for (let i = 0; i < 100 && !res.writableFinished; i++) await new Promise((r) => setImmediate(r));
  };

  // Three identical misses at once: one upstream call, one response phase.
  const first = [ask('req-1'), ask('req-2'), ask('req-3')];
  for (const res of first) await settled(res);
  const miss = first[0]!;
  t.equal(miss.status, 200, miss.body.toString());
  const expected = '[{"id":9007199254740993,"name":"Rex","categoryId":1},{"id":2,"name":"Tom","categoryId":1}]';
  t.equal(miss.body.toString(), expected, 'the miss: filtered to the limit, the unknown field dropped, the int64 exact');
  t.equal(upstream.calls, 1, 'one upstream call for three identical misses');
  t.equal(phases, 1, 'the response phase ran once, for the miss that filled the entry');
  t.match(miss.headers['cache-status'], /fwd=uri-miss; fwd-status=200; stored/);

  // A later request is a hit: nothing of the response phase, the same bytes.
  const hit = ask('req-4');
  await settled(hit);
  t.equal(phases, 1, 'a hit does not run the response phase');
  t.equal(upstream.calls, 1, 'a hit makes no upstream call');
  for (const res of [...first, hit]) {
    t.equal(res.status, 200);
    t.same(res.body, miss.body, 'the same bytes as the miss');
    t.equal(Number(res.headers['content-length']), res.body.length, 'Content-Length is the stored body length');
    t.equal(res.headers['cache-control'], 'private, max-age=60', 'the answer to an authenticated request stays private (RFC 9111 section 3.5)');
    t.equal(res.headers['content-type'], 'application/json');
    t.ok(typeof res.headers.age === 'string', 'Age on every answer');
  }
  t.same(
    [...first, hit].map((r) => r.headers['x-request-id']),
    ['req-1', 'req-2', 'req-3', 'req-4'],
    'each answer carries its own request id',
  );
  t.match(first[1]!.headers['cache-status'], /collapsed/, 'a coalesced waiter says so');
  t.match(hit.headers['cache-status'], /^petstore-gateway; hit; ttl=\d+$/);
  t.equal(holder.cache?.counts.hit, 1);
  t.equal(holder.cache?.counts.coalesced, 2);

  // The request phase still applies to hits: a wrong key gets 401, not the stored list.
  const denied = new FakeResponse();
  pipeline.handle({ ...head('req-5'), headers: { authorization: 'Bearer wrong-key', 'x-request-id': 'req-5' } }, denied, denied);
  await settled(denied);
  t.equal(denied.status, 401);
  t.equal(holder.cache?.counts.hit, 1, 'a denied request never reaches the cache');
});

t.test('answers made under other rules are not served: the key carries the rules', async (t) => {
  const key = testKey();
  const env = { PETSTORE_API_KEYS: key };
  const text = (mode: string) => policyText({ upstream: { url: 'http://127.0.0.1:9/v1' }, policies: { 'response-contract': { mode }, cache: { ttlSeconds: { listPets: 30, getPet: 30 } } } });
  const a = parsePolicy(text('enforce'), { env });
  const b = parsePolicy(text('off'), { env });
  if (!a.ok || !b.ok) throw new Error('policy');
  t.not(compileGateway(a.config, { env }).answerRules, compileGateway(b.config, { env }).answerRules, 'another response contract: other rules');
  t.equal(compileGateway(a.config, { env }).answerRules, compileGateway(a.config, { env }).answerRules, 'the same file: the same rules');
});

t.test('a fresh hit is no upstream call; its Age and Cache-Status follow the clock', async (t) => {
  const key = testKey();
  const env = { PETSTORE_API_KEYS: key };
  const loaded = parsePolicy(policyText({ upstream: { url: 'http://127.0.0.1:9/v1' }, policies: { cache: { ttlSeconds: { listPets: 30, getPet: 30 } } } }), { env });
  if (!loaded.ok) throw new Error(formatProblems('policy', loaded.problems));
  const gw = compileGateway(loaded.config, { env });
  let now = 1_700_000_000_000;
  const holder = new GatewayHolder(gw, { now: () => now });
  t.teardown(() => holder.close());
  const records: ExchangeRecord[] = [];
  const upstream = memoryUpstream();
  const pipeline = new Pipeline({
    gateways: holder,
    upstream,
    settings: { basePath: '/v1', headersMs: 5000, bodyMs: 5000, totalMs: 10_000, maxBufferedBytes: 1 << 20, retryIdempotent: false },
    front,
    observer: { onEnd: (r) => records.push(r) },
  });
  const ask = async (): Promise<FakeResponse> => {
    const res = new FakeResponse();
    pipeline.handle({ method: 'GET', target: '/v1/pets?limit=2', headers: { authorization: `Bearer ${key}` }, remoteAddress: '127.0.0.1', httpVersion: '1.1' }, res, res);
    for (let i = 0; i < 100 && !res.writableFinished; i++) await new Promise((r) => setImmediate(r));
    return res;
  };

  const miss = await ask();
  t.match(miss.headers['cache-status'], /fwd=uri-miss; fwd-status=200; stored; ttl=30$/);
  const said: [unknown, unknown][] = [];
  for (const ms of [0, 999, 1000, 1999, 12_345, 29_999]) {
    now = 1_700_000_000_000 + ms;
    const hit = await ask();
    t.same(hit.body, miss.body, 'the bytes of the miss');
    said.push([hit.headers.age, hit.headers['cache-status']]);
  }
  // RFC 9111 section 5.1 (Age: whole seconds, rounded down) and RFC 9211 section 2 (ttl: seconds
  // of freshness left, rounded down): the same second says the same, the next says the next.
  t.same(said, [
    ['0', 'petstore-gateway; hit; ttl=30'],
    ['0', 'petstore-gateway; hit; ttl=29'],
    ['1', 'petstore-gateway; hit; ttl=29'],
    ['1', 'petstore-gateway; hit; ttl=28'],
    ['12', 'petstore-gateway; hit; ttl=17'],
    ['29', 'petstore-gateway; hit; ttl=0'],
  ]);
  t.equal(upstream.calls, 1);

  t.equal(records.length, 7);
  t.equal(records[0]?.upstreamStatus, 200, 'the miss called the upstream: its status');
  t.match(upstream.traces, [/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/], 'the miss sent a trace context');
  // The record's facts are the exchange itself: its upstream fields as the request phase left them.
  t.match(records[1]?.facts, { upstreamHeaders: { traceparent: null } }, 'a hit sends nothing: no trace context was made for it');
  t.ok(records[0]?.upstreamMs !== undefined, 'and its duration');
  for (const r of records.slice(1)) {
    t.equal(r.status, 200);
    t.equal(r.upstreamStatus, undefined, 'a hit has no upstream status');
    t.equal(r.upstreamMs, undefined, 'nor an upstream duration (no client histogram, no access-line field)');
  }
});

/**
 * A cached gateway (listPets and getPet, 30 s) whose chain starts with `own`, in front of an upstream
 * that answers with its own Vary and ETag; `ask(id)` sends listPets with that request id.
 */
function ownFieldsGateway(t: Test, own: Policy): { upstream: ReturnType<typeof memoryUpstream>; ask: (id: string) => Promise<FakeResponse> } {
  const key = testKey();
  const env = { PETSTORE_API_KEYS: key };
  const loaded = parsePolicy(policyText({ upstream: { url: 'http://127.0.0.1:9/v1' }, policies: { cache: { ttlSeconds: { listPets: 30, getPet: 30 } } } }), { env });
  if (!loaded.ok) throw new Error(formatProblems('policy', loaded.problems));
  const gw = compileGateway(loaded.config, { env });
  const holder = new GatewayHolder(gw);
  t.teardown(() => holder.close());
  const view: GatewayView = { chain: new Chain([own, ...gw.chain.policies]), bodyLimit: gw.bodyLimit, headerRules: gw.headerRules, answerRules: gw.answerRules };
  const upstream = memoryUpstream({ vary: 'Accept-Encoding', etag: '"upstream"' });
  const pipeline = new Pipeline({
    gateways: { current: view, breaker: undefined, sendWrapper: holder.sendWrapper },
    upstream,
    settings: { basePath: '/v1', headersMs: 5000, bodyMs: 5000, totalMs: 10_000, maxBufferedBytes: 1 << 20, retryIdempotent: false },
    front,
  });
  const ask = async (id: string): Promise<FakeResponse> => {
    const res = new FakeResponse();
    pipeline.handle({ method: 'GET', target: '/v1/pets?limit=2', headers: { authorization: `Bearer ${key}`, 'x-request-id': id }, remoteAddress: '127.0.0.1', httpVersion: '1.1' }, res, res);
    for (let i = 0; i < 100 && !res.writableFinished; i++) await new Promise((r) => setImmediate(r));
    return res;
  };
  return { upstream, ask };
}

t.test("a hit writes each field once: the exchange's own field replaces a stored one, Vary is merged", async (t) => {
  // The exchange's own fields, named as two of the upstream's (as CORS adds Vary: Origin).
  const own: Policy = {
    name: 'own-fields',
    annotate(ex) {
      ex.responseHeaders.vary = 'Origin';
      ex.responseHeaders.etag = '"own"';
    },
  };
  const { upstream, ask } = ownFieldsGateway(t, own);
  // FakeResponse refuses a field written twice, so each answer below has every field once.
  const miss = await ask('req-1');
  const hit = await ask('req-2');
  t.equal(upstream.calls, 1);
  t.match(hit.headers['cache-status'], /; hit; /);
  for (const res of [miss, hit]) {
    t.equal(res.status, 200);
    t.equal(res.headers.vary, 'Accept-Encoding, Origin', "the upstream's Vary and the exchange's, merged (RFC 9110 section 12.5.5)");
    t.equal(res.headers.etag, '"own"', "the exchange's own field replaces the stored one");
    t.equal(res.headers['x-request-id'], res === miss ? 'req-1' : 'req-2');
  }
});

t.test('a hit whose own fields are not those the entry was kept with is written field by field, as exact', async (t) => {
  // Own fields that depend on the request (as CORS's depend on Origin): the entry's plan is made
  // for the names of the miss that filled it; other requests name more, fewer or others.
  const own: Policy = {
    name: 'own-fields',
    annotate(ex) {
      const id = ex.requestId ?? '';
      if (id !== 'no-vary') ex.responseHeaders.vary = 'Origin';
      if (id === 'other-etag') ex.responseHeaders.etag = '"own"';
      else ex.responseHeaders['x-own'] = id;
      if (id === 'extra') ex.responseHeaders['x-extra'] = 'yes';
    },
  };
  const { upstream, ask } = ownFieldsGateway(t, own);
  const miss = await ask('first');
  const names = (res: FakeResponse): string[] => Object.keys(res.headers);
  const base = names(miss).filter((n) => n !== 'x-own' && n !== 'age' && n !== 'cache-status');
  t.same(names(miss).slice(-3), ['x-own', 'age', 'cache-status'], "the exchange's new fields after the stored ones, then Age and Cache-Status");
  // FakeResponse refuses a field written twice, so each answer below has every field once.
  for (const [id, vary, etag, extra] of [
    ['same', 'Accept-Encoding, Origin', '"upstream"', ['x-own']],
    ['extra', 'Accept-Encoding, Origin', '"upstream"', ['x-own', 'x-extra']],
    ['no-vary', 'Accept-Encoding', '"upstream"', ['x-own']],
    ['other-etag', 'Accept-Encoding, Origin', '"own"', []],
    ['again', 'Accept-Encoding, Origin', '"upstream"', ['x-own']],
  ] as const) {
    const hit = await ask(id);
    t.match(hit.headers['cache-status'], /; hit; /, id);
    t.equal(hit.headers['x-request-id'], id);
    t.equal(hit.headers.vary, vary, `${id}: Vary merged with the stored one only when the exchange sets it`);
    t.equal(hit.headers.etag, etag, `${id}: an own field replaces the stored one`);
    t.equal(hit.headers['x-own'], extra.length > 0 ? id : undefined, `${id}: this request's own value, never another's`);
    t.equal(hit.headers['x-extra'], id === 'extra' ? 'yes' : undefined);
    t.same(names(hit), [...base, ...extra, 'age', 'cache-status'], `${id}: the stored fields in their order, then the new own ones, Age, Cache-Status`);
    t.same(hit.body, miss.body);
  }
  t.equal(upstream.calls, 1);
});
