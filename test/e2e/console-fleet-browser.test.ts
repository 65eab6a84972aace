/**
 * The operator console over real parts: one redis-server, a stub upstream that answers as the pet
 * store does (and breaks the contract on purpose for getPet of id 13: an `id` that is a string),
 * and two gateway processes (`serve`, undici and fastify) sharing the Redis store, gateway B's
 * policy differing from A's in one value. Real traffic goes through both: getPet per consumer
 * (deprecated), listPets (shadowed to a `next` that differs for `limit=7`), 404s, 401s, 429s
 * and the violating getPet. Then Debian's headless Chromium opens gateway A's console, is given
 * the admin token in the page's form, and every view renders; its tables hold the JSON endpoint's
 * values, which are the traffic sent through both gateways; no console error, no CSP violation,
 * no request off the admin origin, no serious axe violation. The API needs the admin token.
 * Last, `--workers 2` without Redis: the primary's console counts its workers' traffic.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import tap from 'tap';
import type { Page } from 'puppeteer-core';
import { hashKey } from '../../src/policies/auth/keys.js';
import { policyFingerprint } from '../../src/ops/console/beat.js';
import type { BurndownView, FleetView, KeysView, MigrationView, TrafficView, ViolationsView } from '../../src/ops/console/types.js';
import { assertError, type TapTest } from '../helpers/assert.js';
import { answered, axeProblems, CHROMIUM, launch, open, readTables, rendered, sameOrigin, viewTables, WAIT_MS, watchedPage, type ViewJson, type ViewName, type Watched } from '../helpers/browser.js';
import { REDIS_SKIP, startRedis } from '../helpers/redis.js';
import { adminUrl, bearer, ensureBuilt, request, sendJson, spawnCliUntil, startStubUpstream, tempDir, testKey, type ProcessHandle, type StubUpstream } from '../helpers/servers.js';
import { until } from '../helpers/wait.js';

const ADMIN_TOKEN = randomBytes(32).toString('base64url');
const READY = /^(?=[\s\S]*petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) )(?=[\s\S]*"msg":"admin listening)/;
/** The rollup flushes every 2 s; the migration report's store likewise: a bounded wait well past it. */
const ROLLUP_WAIT_MS = 20_000;

// ---------------------------------------------------------------------------------------------
// The upstream: the pet store's shapes (openapi/pet-store.yaml), and one answer outside them.

const pet = (id: number, name = `pet-${id}`) => ({ id, name, categoryId: 1, status: 'available' });

/** legacy at /v1, `next` at /next/v1: the same answers, except next's listPets with limit=7 (pet 2 renamed). */
function petStore(t: TapTest): Promise<StubUpstream> {
  return startStubUpstream(t, (req, res) => {
    const url = new URL(req.url, 'http://upstream');
    const next = url.pathname.startsWith('/next/');
    const path = next ? url.pathname.slice('/next'.length) : url.pathname;
    if (req.method === 'GET' && path === '/v1/pets') {
      const seven = url.searchParams.get('limit') === '7';
      return sendJson(res, 200, [pet(1), pet(2, next && seven ? 'renamed-by-next' : 'pet-2')]);
    }
    if (req.method === 'POST' && path === '/v1/pets') return sendJson(res, 201, { ...(JSON.parse(req.body.toString('utf8')) as object), id: 101 });
    const m = /^\/v1\/pets\/(\d+)$/.exec(path);
    if (req.method === 'GET' && m !== null) {
      const id = Number(m[1]);
      // The legacy backend's bug: an id as a string (a contract violation: /id must be integer).
      if (id === 13) return sendJson(res, 200, '{"id":"13","name":"x","categoryId":1}');
      if (id >= 1 && id <= 10) return sendJson(res, 200, pet(id));
    }
    return sendJson(res, 404, { code: 'pet_not_found', message: 'No pet with this id.', status: 404 });
  });
}

// ---------------------------------------------------------------------------------------------
// The gateways

interface Gw {
  readonly url: string;
  readonly admin: string;
  readonly handle: ProcessHandle;
}

async function serve(t: TapTest, file: string, args: string[], env: Record<string, string> = {}): Promise<Gw> {
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--port', '0', ...args], READY, { env: { LOG_LEVEL: 'info', ...env }, timeoutMs: 30_000 });
  return { url: match[1]!, admin: adminUrl(handle), handle };
}

/** The keys: who calls, who to tell. `tiny` has a limit of 2 an hour; `idle` never calls and expires in 5 days. */
function keyring() {
  const secret = { acme: testKey(), globex: testKey(), batch: testKey(), tiny: testKey(), idle: testKey() };
  const expires = new Date(Date.now() + 5 * 86_400_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const keys = [
    { id: 'partner-acme', hash: hashKey(secret.acme), owner: 'Acme integrations', contact: 'api@acme.example' },
    { id: 'partner-globex', hash: hashKey(secret.globex), owner: 'Globex', contact: '#globex-api' },
    { id: 'svc-batch', hash: hashKey(secret.batch), owner: 'Batch jobs' },
    { id: 'svc-tiny', hash: hashKey(secret.tiny), contact: '@tiny-team' },
    { id: 'svc-idle', hash: hashKey(secret.idle), owner: 'Nobody yet', contact: 'https://wiki.example/idle', expires },
  ];
  const who: Record<string, { owner: string | null; contact: string | null }> = Object.fromEntries(keys.map((k) => [k.id, { owner: k.owner ?? null, contact: k.contact ?? null }]));
  who['-'] = { owner: null, contact: null };
  return { secret, keys, who, idleExpires: expires };
}

// ---------------------------------------------------------------------------------------------
// The traffic and what the console must say of it

type Outcome = 'ok' | 'client' | 'upstream' | 'rateLimited';

interface Sent {
  readonly consumer: string;
  readonly operation: string;
  readonly outcome: Outcome;
  readonly requestId: string;
}

function outcomeOf(status: number): Outcome {
  if (status === 429) return 'rateLimited';
  if (status >= 500) return 'upstream';
  if (status >= 400) return 'client';
  return 'ok';
}

interface Counts {
  requests: number;
  client: number;
  gateway: number;
  upstream: number;
  rateLimited: number;
}

const zero = (): Counts => ({ requests: 0, client: 0, gateway: 0, upstream: 0, rateLimited: 0 });

/** Requests and errors per `by` (consumer or operation) of what was sent. */
function tally(sent: readonly Sent[], by: 'consumer' | 'operation'): Record<string, Counts> {
  const out: Record<string, Counts> = {};
  for (const s of sent) {
    const c = (out[s[by]] ??= zero());
    c.requests++;
    if (s.outcome !== 'ok') c[s.outcome]++;
  }
  return out;
}

/** The same, as the traffic view says it. */
function counted(rows: TrafficView['operations'] | TrafficView['consumers'], by: 'consumer' | 'operation'): Record<string, Counts> {
  return Object.fromEntries(
    rows.map((r) => [(r as unknown as Record<string, string>)[by]!, { requests: r.requests, client: r.errors.client, gateway: r.errors.gateway, upstream: r.errors.upstream, rateLimited: r.rateLimited }]),
  );
}

const total = (rows: TrafficView['operations']) => rows.reduce((n, r) => n + r.requests, 0);

/** The view's JSON less what moves by itself (the time it was made, the window's ends, heartbeats). */
function steady(view: ViewName, json: unknown): unknown {
  const v = { ...(json as Record<string, unknown>) };
  delete v.generatedAt;
  if (view === 'traffic') {
    delete v.from;
    delete v.to;
    delete v.series;
  }
  if (view === 'fleet') v.instances = (v.instances as Array<Record<string, unknown>>).map(({ lastHeartbeat: _beat, ...rest }) => rest);
  return v;
}

/** A console endpoint's JSON, asked with the admin token (null: none). */
async function api<T>(gw: Gw, path: string, token: string | null = ADMIN_TOKEN): Promise<T> {
  const res = await request(`${gw.admin}/console/api/${path}`, { headers: token === null ? {} : bearer(token) });
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${res.body}`);
  return res.json as T;
}

/** Shows `view` on the page (a new load; the traffic's day window by its button) and returns the JSON the page drew. */
async function show(w: Watched, origin: string, view: ViewName, window: 'hour' | 'day' = 'hour'): Promise<unknown> {
  const since = w.answers.length;
  await open(w.page, origin, view);
  if (view === 'traffic' && window === 'day') {
    const before = w.answers.length;
    await w.page.click('button[data-window="day"]');
    await w.page.waitForFunction(() => document.querySelector('button[data-window="day"]')?.getAttribute('aria-pressed') === 'true', { timeout: WAIT_MS });
    await rendered(w.page, 'traffic');
    return answered(w, '/console/api/traffic?window=day', before);
  }
  const query = view === 'traffic' ? '?window=hour' : view === 'keys' ? '?unusedDays=30&expiringDays=14' : '';
  return answered(w, `/console/api/${view}${query}`, since);
}

/** The page's tables hold the JSON it was answered; the test's own request gets the same view. */
async function tablesHold(t: TapTest, page: Page, gw: Gw, view: ViewName, drawn: unknown, path: string): Promise<void> {
  t.strictSame(await readTables(page), viewTables(view, drawn as ViewJson[typeof view]), `${view}: every table cell holds the JSON's value`);
  t.strictSame(steady(view, await api(gw, path)), steady(view, drawn), `${view}: the endpoint answers the test what it answered the page`);
  t.strictSame(await axeProblems(page), [], `${view}: axe finds no serious or critical violation`);
}

// ---------------------------------------------------------------------------------------------

if (!existsSync(CHROMIUM)) {
  if (process.env.CI === 'true') tap.fail(`chromium is missing at ${CHROMIUM}: CI must install it (.ci/run)`);
  else tap.comment(`chromium is missing at ${CHROMIUM}: the console's fleet browser scenarios are skipped`);
} else {
  ensureBuilt();

  // parity: the console lives on the admin listener, which no engine is part of; the two
  // gateways run two engines (undici and fastify), and both count into the same rollup.
  tap.test('two gateways sharing Redis: every view of the console shows the traffic sent', { skip: REDIS_SKIP }, async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const upstream = await petStore(t);
    const dir = tempDir(t, 'console-fleet');
    const ring = keyring();
    const policy = (connectMs: number) => ({
      version: 1,
      upstream: { url: `${upstream.origin}/v1`, timeouts: { connectMs } },
      policies: {
        auth: { keys: ring.keys, keysFromEnv: null },
        'rate-limit': { perKey: { 'svc-tiny': { limit: 2, windowSeconds: 3600 } }, store: { redis: { url: redis.url } } },
      },
      migration: { next: { url: `${upstream.origin}/next/v1` }, operations: { listPets: { mode: 'shadow' } }, store: { url: redis.url } },
    });
    // B differs from A in one value. With two instances the majority is a tie, which the view
    // breaks by the smaller fingerprint: B's value is one whose fingerprint sorts after A's, so B is the odd one.
    const textA = JSON.stringify(policy(2000));
    let connectMsB = 2001;
    while (policyFingerprint(JSON.stringify(policy(connectMsB))) < policyFingerprint(textA) && connectMsB < 2100) connectMsB++;
    const textB = JSON.stringify(policy(connectMsB));
    t.ok(policyFingerprint(textB) > policyFingerprint(textA), `B's connectMs ${connectMsB}: its fingerprint sorts after A's`);
    writeFileSync(join(dir, 'a.json'), textA);
    writeFileSync(join(dir, 'b.json'), textB);
    const env = { PETSTORE_ADMIN_TOKENS: ADMIN_TOKEN };
    const [a, b] = await Promise.all([serve(t, join(dir, 'a.json'), ['--engine', 'undici'], env), serve(t, join(dir, 'b.json'), ['--engine', 'fastify'], env)]);

    // The traffic, in order, each answer checked as it comes.
    const sent: Sent[] = [];
    const badKey = testKey();
    const call = async (gw: Gw, key: string | null, consumer: string, operation: string, path: string, status: number, method = 'GET', body?: string) => {
      const headers = { ...bearer(key ?? badKey), ...(body === undefined ? {} : { 'content-type': 'application/json' }) };
      const res = await request(`${gw.url}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });
      t.equal(res.status, status, `${method} ${path} as ${consumer} on ${gw === a ? 'A' : 'B'}: ${status}`);
      sent.push({ consumer, operation, outcome: outcomeOf(res.status), requestId: String(res.headers['x-request-id']) });
      return res;
    };
    const { acme, globex, batch, tiny } = ring.secret;
    for (let i = 0; i < 3; i++) await call(a, acme, 'partner-acme', 'getPet', '/v1/pets/1', 200);
    for (let i = 0; i < 2; i++) await call(b, acme, 'partner-acme', 'getPet', '/v1/pets/3', 200);
    for (let i = 0; i < 2; i++) await call(a, acme, 'partner-acme', 'getPet', '/v1/pets/999', 404);
    await call(a, acme, 'partner-acme', 'createPet', '/v1/pets', 201, 'POST', JSON.stringify({ name: 'Rex', categoryId: 1 }));
    for (let i = 0; i < 2; i++) await call(a, globex, 'partner-globex', 'getPet', '/v1/pets/2', 200);
    await call(b, globex, 'partner-globex', 'getPet', '/v1/pets/2', 200);
    const violating = [await call(a, globex, 'partner-globex', 'getPet', '/v1/pets/13', 502)];
    for (let i = 0; i < 2; i++) violating.push(await call(b, globex, 'partner-globex', 'getPet', '/v1/pets/13', 502));
    for (const res of violating) assertError(t, res, 502, 'upstream_contract_violation');
    for (let i = 0; i < 4; i++) await call(a, batch, 'svc-batch', 'listPets', '/v1/pets', 200);
    for (let i = 0; i < 2; i++) await call(b, batch, 'svc-batch', 'listPets', '/v1/pets', 200);
    await call(b, batch, 'svc-batch', 'listPets', '/v1/pets?limit=7', 200);
    for (let i = 0; i < 3; i++) await call(a, null, '-', 'listPets', '/v1/pets', 401);
    for (let i = 0; i < 2; i++) await call(b, null, '-', 'listPets', '/v1/pets', 401);
    // svc-tiny: 2 an hour, one limit across both gateways (the Redis store).
    for (const [i, gw] of [a, b, a, b, a].entries()) await call(gw, tiny, 'svc-tiny', 'listPets', '/v1/pets', i < 2 ? 200 : 429);

    const byConsumer = tally(sent, 'consumer');
    const byOperation = tally(sent, 'operation');
    const getPetCalls = (consumer: string) => sent.filter((s) => s.consumer === consumer && s.operation === 'getPet').length;
    const shadowed = sent.filter((s) => s.operation === 'listPets' && s.outcome === 'ok').length;
    t.strictSame([getPetCalls('partner-acme'), getPetCalls('partner-globex'), shadowed], [7, 6, 9], 'the traffic as planned');

    // The rollup: both gateways flush every 2 s; the migration report's store likewise.
    await until('the fleet rollup holds every request sent', async () => total((await api<TrafficView>(a, 'traffic?window=hour')).operations) === sent.length, ROLLUP_WAIT_MS);
    await until('the deprecation ledger lists both consumers', async () => (await api<BurndownView>(a, 'deprecations')).operations[0]?.consumers.length === 2, ROLLUP_WAIT_MS);
    await until('the shadow comparisons are all in', async () => (await api<MigrationView>(a, 'migration')).operations.find((o) => o.operation === 'listPets')?.compared === shadowed, ROLLUP_WAIT_MS);
    await until('both instances have sent a heartbeat', async () => (await api<FleetView>(a, 'fleet')).instances.length === 2, ROLLUP_WAIT_MS);

    t.test('the API needs the admin token', async (t) => {
      for (const path of ['traffic', 'fleet', 'keys']) {
        assertError(t, await request(`${a.admin}/console/api/${path}`), 401, 'missing_api_key', { message: /admin token/ });
        assertError(t, await request(`${b.admin}/console/api/${path}`, { headers: bearer('not-the-admin-token-but-long-enough-0123456789') }), 401, 'invalid_api_key', { message: 'The admin token is not valid.' });
      }
      assertError(t, await request(`${a.admin}/console/api/traffic`, { headers: bearer(ring.secret.acme) }), 401, 'invalid_api_key', { message: 'The admin token is not valid.' });
      t.equal((await request(`${a.admin}/console/`)).status, 200, 'the page itself loads without a token (it holds no data)');
    });

    t.test('in the browser: the token form, then every view', async (t) => {
      const browser = await launch(t);
      const w = await watchedPage(t, browser, a.admin);

      // Without a token the page asks for one; a wrong one is refused; the right one opens it.
      await w.page.goto(`${a.admin}/console/#deprecations`, { waitUntil: 'load' });
      await w.page.waitForFunction(() => document.body.dataset.problem === '401' && !(document.getElementById('token-form') as HTMLFormElement).hidden, { timeout: WAIT_MS });
      t.match(await w.page.$eval('#status', (e) => e.textContent), /needs an admin token/, 'the page shows its token form');
      await w.page.type('#token', 'A-wrong-token-that-is-long-enough-0123456789');
      await w.page.keyboard.press('Enter');
      await w.page.waitForFunction(() => document.body.dataset.problem === '401' && /refused/.test(document.getElementById('status')?.textContent ?? ''), { timeout: WAIT_MS });
      t.pass('a wrong token is refused');
      const since = w.answers.length;
      await w.page.type('#token', ADMIN_TOKEN);
      await w.page.keyboard.press('Enter');
      await rendered(w.page, 'deprecations');
      t.ok(await w.page.evaluate(() => (document.getElementById('token-form') as HTMLFormElement).hidden), 'the right token: the form goes away');
      t.ok(w.answers.length > since, 'and the view is drawn from the API');

      await t.test('deprecations: getPet calls per consumer, through both gateways', async (t) => {
        const v = (await show(w, a.admin, 'deprecations')) as BurndownView;
        await tablesHold(t, w.page, a, 'deprecations', v, 'deprecations');
        t.equal(v.scope, 'fleet', 'the fleet, read from Redis');
        const op = v.operations[0]!;
        t.equal(op.operation, 'getPet');
        t.match(op.sunset, /^2030-12-05T/, 'with its sunset');
        const calls = Object.fromEntries(op.consumers.map((c) => [c.consumer, c.calls]));
        t.strictSame(calls, { 'partner-acme': getPetCalls('partner-acme'), 'partner-globex': getPetCalls('partner-globex') }, 'calls per consumer: what was sent through A and B together');
        t.equal(op.total.reduce((x, y) => x + y, 0), getPetCalls('partner-acme') + getPetCalls('partner-globex'), 'the days add up to it');
        for (const c of op.consumers) {
          t.strictSame({ owner: c.owner, contact: c.contact }, ring.who[c.consumer], `${c.consumer}: who to tell, from its key`);
          t.equal(c.stopped, false, `${c.consumer}: still calling`);
        }
      });

      for (const window of ['hour', 'day'] as const) {
        await t.test(`traffic, last ${window}: requests and errors per consumer and operation`, async (t) => {
          const v = (await show(w, a.admin, 'traffic', window)) as TrafficView;
          await tablesHold(t, w.page, a, 'traffic', v, `traffic?window=${window}`);
          t.equal(v.window, window);
          t.equal(v.scope, 'fleet');
          t.strictSame(counted(v.consumers, 'consumer'), byConsumer, 'per consumer: requests, 401/404 as client errors, the violations as the upstream\'s, 429 as rate limited');
          t.strictSame(counted(v.operations, 'operation'), byOperation, 'per operation: likewise');
          for (const c of v.consumers) t.strictSame({ owner: c.owner, contact: c.contact }, ring.who[c.consumer], `${c.consumer}: who to tell`);
          for (const r of [...v.operations, ...v.consumers]) t.ok(r.p50Ms !== null && r.p99Ms !== null && r.p50Ms <= r.p99Ms, `p50 ${r.p50Ms} <= p99 ${r.p99Ms}`);
          const charted = v.series.operations.reduce((n, o) => n + o.requests.reduce((x, y) => x + y, 0), 0);
          t.equal(charted, sent.length, "the charts' points add up to the requests sent");
          const errors = v.series.operations.reduce((n, o) => n + o.errors.reduce((x, y) => x + y, 0), 0);
          t.equal(errors, sent.filter((s) => s.outcome === 'client' || s.outcome === 'upstream').length, "and their errors to the client's and the upstream's");
        });
      }

      await t.test("traffic, this instance's: what A served alone", async (t) => {
        const v = await api<TrafficView>(a, 'traffic?window=hour&scope=instance');
        t.equal(v.scope, 'instance');
        t.ok(total(v.operations) > 0 && total(v.operations) < sent.length, `A served ${total(v.operations)} of the ${sent.length} requests`);
      });

      await t.test('violations: the rule the legacy backend breaks, as often as it did', async (t) => {
        const v = (await show(w, a.admin, 'violations')) as ViolationsView;
        await tablesHold(t, w.page, a, 'violations', v, 'violations');
        t.equal(v.total, violating.length, 'every violating answer counted, through both gateways');
        t.match(v.rules, [{ operation: 'getPet', field: '/id', kind: 'must be an integer within int64', count: violating.length }], 'one rule: getPet /id must be an integer within int64');
        t.equal(v.rules.length, 1, 'and no other');
        t.strictSame(v.samples.map((s) => s.requestId).sort(), violating.map((r) => String(r.headers['x-request-id'])).sort(), "a sample of each, by the client's request id");
        for (const s of v.samples) {
          t.equal(s.status, 200, 'the upstream answered 200');
          t.notMatch(JSON.stringify(s.problems), /"13"|\bx\b/, 'no value of the body in the sample');
        }
      });

      await t.test('keys: who to tell, last used, expiring', async (t) => {
        const v = (await show(w, a.admin, 'keys')) as KeysView;
        await tablesHold(t, w.page, a, 'keys', v, 'keys?unusedDays=30&expiringDays=14');
        t.strictSame(v.keys.map((k) => k.id), ring.keys.map((k) => k.id).sort(), 'every key of the policy');
        for (const k of v.keys) {
          t.equal(k.source, 'file');
          t.strictSame({ owner: k.owner, contact: k.contact }, ring.who[k.id], `${k.id}: owner and contact`);
          const used = sent.some((s) => s.consumer === k.id);
          t.equal(k.lastUsed !== null, used, `${k.id}: last used ${used ? 'known' : 'never'}`);
        }
        const idle = v.keys.find((k) => k.id === 'svc-idle')!;
        t.match(idle, { expires: ring.idleExpires, expiringSoon: true, expired: false }, 'svc-idle expires within 14 days');
        t.strictSame(v.keys.filter((k) => k.expiringSoon).map((k) => k.id), ['svc-idle'], 'and no other key');
      });

      await t.test('fleet: both instances, B runs another policy', async (t) => {
        const v = (await show(w, a.admin, 'fleet')) as FleetView;
        await tablesHold(t, w.page, a, 'fleet', v, 'fleet');
        t.equal(v.instances.length, 2, 'two instances');
        const pidA = a.handle.child.pid;
        const pidB = b.handle.child.pid;
        const ia = v.instances.find((i) => i.pid === pidA);
        const ib = v.instances.find((i) => i.pid === pidB);
        t.match(ia, { self: true, policyDiffers: false, policyFingerprint: policyFingerprint(textA), ready: true, stale: false, workers: 1 }, 'A: this instance, the majority policy');
        t.match(ib, { self: false, policyDiffers: true, policyFingerprint: policyFingerprint(textB), ready: true, stale: false, workers: 1 }, "B: the policy that differs");
        t.equal(v.majorityFingerprint, policyFingerprint(textA));
        t.match(await w.page.$eval('#view-fleet .alert', (e) => e.textContent), /1 instance runs another policy/, 'the page says so in words');
      });

      await t.test('migration: the shadowed listPets, one different', async (t) => {
        const v = (await show(w, a.admin, 'migration')) as MigrationView;
        await tablesHold(t, w.page, a, 'migration', v, 'migration');
        t.equal(v.enabled, true);
        const list = v.operations.find((o) => o.operation === 'listPets');
        t.match(list, { compared: shadowed, equal: shadowed - 1, different: 1, divergence: 1 / shadowed }, "listPets: every shadowed call compared, the limit=7 one differs");
        for (const o of v.operations.filter((x) => x.operation !== 'listPets')) t.equal(o.compared, 0, `${o.operation}: nothing compared`);
      });

      // Only the token-less and the wrong-token loads failed (the browser logs their 401s).
      t.strictSame(w.errors.filter((e) => !/status of 401/.test(e)), [], 'no other console error');
      t.strictSame(await w.csp(), [], 'no CSP violation');
      sameOrigin(t, w, a.admin);
    });
  });

  // parity: the console lives on the admin listener, which no engine is part of; --workers is the CLI's.
  tap.test('--workers 2 without Redis: the primary counts its workers\' traffic', async (t) => {
    const upstream = await petStore(t);
    const dir = tempDir(t, 'console-workers');
    const ring = keyring();
    const file = join(dir, 'w.json');
    writeFileSync(file, JSON.stringify({ version: 1, upstream: { url: `${upstream.origin}/v1` }, policies: { auth: { keys: ring.keys, keysFromEnv: null } } }));
    const gw = await serve(t, file, ['--engine', 'undici', '--workers', '2']);
    const sent: Sent[] = [];
    const send = async (key: string | null, consumer: string, operation: string, path: string, status: number) => {
      const res = await request(`${gw.url}${path}`, { headers: bearer(key ?? testKey()) });
      t.equal(res.status, status, `${path} as ${consumer}: ${status}`);
      sent.push({ consumer, operation, outcome: outcomeOf(res.status), requestId: String(res.headers['x-request-id']) });
    };
    // Each request on a new connection: the kernel spreads them over both workers.
    for (let i = 0; i < 12; i++) await send(ring.secret.acme, 'partner-acme', 'listPets', '/v1/pets', 200);
    for (let i = 0; i < 6; i++) await send(ring.secret.globex, 'partner-globex', 'getPet', '/v1/pets/2', 200);
    for (let i = 0; i < 3; i++) await send(ring.secret.globex, 'partner-globex', 'getPet', '/v1/pets/404', 404);
    for (let i = 0; i < 3; i++) await send(null, '-', 'listPets', '/v1/pets', 401);

    const v = await api<TrafficView>(gw, 'traffic?window=hour', null);
    t.equal(v.scope, 'instance', 'no Redis: the instance, its workers merged');
    t.strictSame(counted(v.consumers, 'consumer'), tally(sent, 'consumer'), 'per consumer: the traffic sent');
    t.strictSame(counted(v.operations, 'operation'), tally(sent, 'operation'), 'per operation: the traffic sent');
    const pids = new Set(
      gw.handle
        .output()
        .stdout.split('\n')
        .filter((l) => l.includes('"log":"access"'))
        .map((l) => (JSON.parse(l) as { pid?: number }).pid),
    );
    t.equal(pids.size, 2, `both workers served some (access lines from pids ${[...pids].join(', ')})`);

    const browser = await launch(t);
    const w = await watchedPage(t, browser, gw.admin);
    const since = w.answers.length;
    await open(w.page, gw.admin, 'traffic');
    const drawn = (await answered(w, '/console/api/traffic?window=hour', since)) as TrafficView;
    t.strictSame(await readTables(w.page), viewTables('traffic', drawn), 'the page draws the JSON it got');
    t.strictSame(counted(drawn.consumers, 'consumer'), tally(sent, 'consumer'), 'which is the traffic sent');
    t.strictSame(w.errors, [], 'no console error');
    t.strictSame(await w.csp(), [], 'no CSP violation');
    sameOrigin(t, w, gw.admin);
  });
}
