// The operator console attacked through real parts: gateway processes (the built CLI), a real
// redis-server, a hostile upstream on 127.0.0.1 and Debian's headless Chromium. With admin tokens
// in force no path, method, scheme or query trick reads /console/api/* without the token, failures
// count toward the listener's lock, a foreign Host is refused first; hostile text from keys (owner,
// contact), from the upstream (member names under unknownFields: refuse) and from Redis (beats,
// slots, rules, samples) is shown as text, never run, and breaks no view; Redis stopped, the views
// answer `degraded` within their deadline; Redis back empty, the counts come back.
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { createClient } from 'redis';
import { hashKey } from '../../src/policies/auth/keys.js';
import type { TapTest } from '../helpers/assert.js';
import { REDIS_SKIP, startRedis } from '../helpers/redis.js';
import { adminUrl, bearer, ensureBuilt, request, runCli, spawnCliUntil, tempDir, testKey, type ProcessHandle } from '../helpers/servers.js';
import { until } from '../helpers/wait.js';
import { CHROMIUM, launch } from '../helpers/browser.js';

ensureBuilt();

const CHROMIUM_SKIP = process.env.CI !== 'true' && !existsSync(CHROMIUM) ? `needs chromium at ${CHROMIUM}` : false;
const dir = tempDir(t, 'console-attack');
const ADMIN_TOKEN = randomBytes(32).toString('base64url');
const READY = /^(?=[\s\S]*petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) )(?=[\s\S]*"msg":"admin listening)/;
const PREFIX = 'petstore-gateway:{console}:';
const VIEWS = ['traffic', 'deprecations', 'violations', 'keys', 'fleet', 'migration'] as const;
const TOKEN_KEY = 'petstore-gateway.console.adminToken';

interface Gw {
  readonly url: string;
  readonly admin: string;
  readonly handle: ProcessHandle;
}

async function serve(t: TapTest, file: string): Promise<Gw> {
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--port', '0'], READY, { env: { LOG_LEVEL: 'info', PETSTORE_ADMIN_TOKENS: ADMIN_TOKEN }, timeoutMs: 30_000 });
  return { url: match[1]!, admin: adminUrl(handle), handle };
}

/** One request written as raw bytes (any request target, any header), the answer read until the server closes. */
function raw(origin: string, head: string, timeoutMs = 5000): Promise<{ status: number; text: string }> {
  const { hostname, port } = new URL(origin);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms to ${head.split('\r\n')[0]}`));
    }, timeoutMs);
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (text += d));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0), text });
    });
    socket.write(head);
  });
}

/** A hostile upstream: every pet carries member names the interface does not define (markup, a bidi override, \x1f, \x1e). */
const HOSTILE_NAMES = ['<img src=x onerror="window.__pwned=41">', '\u202eexe.gnp', 'a\u001fb', 'c\u001ed', '"><script>window.__pwned=42</script>'];
async function hostileUpstream(t: TapTest): Promise<string> {
  const pet = (id: number) => `{"id":${id},"name":"Rex","categoryId":1,"status":"available",${HOSTILE_NAMES.map((n, i) => `${JSON.stringify(n)}:${i}`).join(',')}}`;
  const server: Server = createServer((req, res) => {
    const one = /^\/v1\/pets\/\d+/.test(req.url ?? '');
    const body = one ? pet(7) : `[${pet(1)},${pet(2)}]`;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  server.unref();
  return `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`;
}

function policy(file: string, upstream: string, redisUrl: string, keys: Array<{ id: string; key: string; owner?: string; contact?: string }>): void {
  writeFileSync(
    file,
    JSON.stringify({
      version: 1,
      upstream: { url: upstream },
      policies: {
        auth: { keys: keys.map(({ key, ...k }) => ({ ...k, hash: hashKey(key) })), keysFromEnv: null },
        'rate-limit': { limit: 100_000, windowSeconds: 60, store: { redis: { url: redisUrl } } },
        'response-contract': { mode: 'monitor', unknownFields: 'refuse' },
      },
    }),
  );
}

const admin = () => bearer(ADMIN_TOKEN);

async function timed<T>(f: () => Promise<T>): Promise<[T, number]> {
  const start = performance.now();
  const v = await f();
  return [v, performance.now() - start];
}

// parity: the console is the admin listener's (no engine serves it); auth and the guard are the listener's own
t.test('no way around the admin token to /console/api/*; failures lock the address; a foreign Host is refused first', { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const upstream = await hostileUpstream(t);
  const key = testKey();
  const file = join(dir, 'auth.json');
  policy(file, upstream, redis.url, [{ id: 'partner-secretive', key, owner: 'Partner Secretive', contact: 'ops@partner.example' }]);
  const gw = await serve(t, file);
  t.equal((await request(`${gw.url}/v1/pets`, { headers: bearer(key) })).status, 200, 'a request counted under the consumer');
  const ok = await request(`${gw.admin}/console/api/traffic`, { headers: admin() });
  t.equal(ok.status, 200, 'with the token: 200');
  t.match(ok.body, /partner-secretive/, 'the data names the consumer');
  const host = new URL(gw.admin).host;
  /** Nothing of the data in a refusal. */
  const leaks = (text: string) => /partner-secretive|Partner Secretive|ops@partner|listPets"|"operations"|"instances"/.test(text);

  // Paths, queries, methods, schemes: each refused (401, 404, 405), none answered with data. Failures count: 9 of 10 here.
  const attempts: Array<[string, string, number[]]> = [
    ['path variant: a trailing slash', `GET /console/api/traffic/ HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, [404]],
    ['path variant: a double slash', `GET //console/api/traffic HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, [404]],
    ['path variant: a dot segment', `GET /console/./api/traffic HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, [404]],
    ['path variant: percent-encoded', `GET /console/api/%74raffic HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, [404]],
    ['path variant: upper case', `GET /CONSOLE/api/traffic HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, [404]],
    ['path variant: an absolute-form target', `GET http://${host}/console/api/traffic HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, [404]],
    ['path variant: a matrix parameter', `GET /console/api/traffic;x=1 HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, [404]],
    ['OPTIONS', `OPTIONS /console/api/traffic HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, [405]],
    ['HTTP/1.0 without Host', `GET /console/api/traffic HTTP/1.0\r\n\r\n`, [401]],
  ];
  for (const [what, head, statuses] of attempts) {
    const r = await raw(gw.admin, head);
    t.ok(statuses.includes(r.status), `${what}: ${r.status}`);
    t.notOk(leaks(r.text), `${what}: no data in the answer`);
  }
  const tries: Array<[string, string, Record<string, string>]> = [
    ['the token in the query', `/console/api/traffic?access_token=${ADMIN_TOKEN}&token=${ADMIN_TOKEN}`, {}],
    ['Basic', '/console/api/keys', { authorization: `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString('base64')}` }],
    ['Token scheme', '/console/api/keys', { authorization: `Token ${ADMIN_TOKEN}` }],
    ['the token twice', '/console/api/keys', { authorization: `Bearer ${ADMIN_TOKEN}, Bearer ${ADMIN_TOKEN}` }],
    ['a prefix of the token', '/console/api/fleet', { authorization: `Bearer ${ADMIN_TOKEN.slice(0, -1)}` }],
    ['HEAD without a token', '/console/api/fleet', {}],
    ['a cookie', '/console/api/fleet', { cookie: `token=${ADMIN_TOKEN}` }],
  ];
  // A wrong credential is charged to the address; a missing one (no Authorization) is counted only (admin-guard.ts).
  let charged = 0;
  for (const [what, path, headers] of tries) {
    const r = await request(`${gw.admin}${path}`, { method: what.startsWith('HEAD') ? 'HEAD' : 'GET', headers });
    t.equal(r.status, 401, `${what}: 401`);
    t.notOk(leaks(r.body), `${what}: no data`);
    if (headers.authorization !== undefined) charged++;
  }
  const long = await raw(gw.admin, `GET /console/api/traffic HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${'A'.repeat(60_000)}\r\nConnection: close\r\n\r\n`);
  t.ok([400, 431].includes(long.status), `a 60 KB Authorization header: ${long.status}`);
  t.equal(charged, 4);
  // Up to the limit (10 wrong tokens a minute by default), then 429 for this address, the right token too, /keys too.
  let locked = 0;
  for (let i = 0; i < 12 && locked === 0; i++) {
    const r = await request(`${gw.admin}/console/api/traffic`, { headers: bearer('x'.repeat(43)) });
    if (r.status === 429) locked = charged + i + 1;
    else t.equal(r.status, 401);
  }
  t.ok(locked === 11, `locked at the 11th wrong credential (${locked})`);
  const after = await request(`${gw.admin}/console/api/traffic`, { headers: admin() });
  t.equal(after.status, 429, 'the right token is refused while locked');
  t.ok(Number(after.headers['retry-after']) > 0, 'with Retry-After');
  t.notOk(leaks(after.body), 'no data in the 429');
  t.equal((await request(`${gw.admin}/keys`, { headers: admin() })).status, 429, 'the lock is the listener\'s: /keys too');

  // DNS rebinding: a foreign Host is refused before the console (with the right token too).
  for (const h of ['evil.example', 'evil.example:1234', `${host}.evil.example`, '127.0.0.1.nip.io']) {
    const r = await raw(gw.admin, `GET /console/api/traffic HTTP/1.1\r\nHost: ${h}\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\nConnection: close\r\n\r\n`);
    t.equal(r.status, 400, `Host ${h}: 400`);
    t.notOk(leaks(r.text), `Host ${h}: no data`);
  }
  const page = await raw(gw.admin, `GET /console/ HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`);
  t.equal(page.status, 400, 'the page too');
});

/** Hostile values written straight into the console's keys in Redis (what a corrupt or hostile writer leaves). */
async function corrupt(url: string, nowMs: number): Promise<void> {
  const client = createClient({ url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const beat = { id: 'evil', host: '<img src=x onerror="window.__pwned=11">', pid: 1, version: '"><script>window.__pwned=12</script>', policyFingerprint: '</code><img src=x onerror="window.__pwned=13">', ready: false, reason: '<svg onload="window.__pwned=14">', startedAtMs: nowMs, lastReloadMs: null, workers: 1, atMs: nowMs };
    const fleet = PREFIX + 'fleet';
    await client.hSet(fleet, 'evil', JSON.stringify(beat));
    // Times no Date can hold: 1e300 (JSON reads a number), a negative one, a fraction.
    await client.hSet(fleet, 'huge-start', JSON.stringify({ ...beat, id: 'huge-start', startedAtMs: 1e300 }));
    await client.hSet(fleet, 'future', JSON.stringify({ ...beat, id: 'future', atMs: 1e300 }));
    await client.hSet(fleet, 'reload', `${JSON.stringify({ ...beat, id: 'reload' }).slice(0, -1)},"lastReloadMs":1e400}`);
    await client.hSet(fleet, 'types', JSON.stringify({ ...beat, id: 'types', pid: 'x', workers: [], ready: 'yes' }));
    await client.hSet(fleet, 'not-json', '{"atMs":');
    await client.hSet(fleet, 'huge', JSON.stringify({ ...beat, id: 'huge', host: 'h'.repeat(1_000_000) }));
    // Counts: a minute slot with bad numbers, a huge field, \x1e inside a field.
    const minute = Math.floor(nowMs / 60_000) * 60_000;
    const slotKey = `${PREFIX}m:${minute}`;
    await client.hSet(slotKey, { 'listPets\x1fnan': '1,NaN,3', 'listPets\x1fneg': '-5,1', 'listPets\x1fbig': '99999999999999999999', ['listPets\x1f' + 'y'.repeat(100_000)]: '1', 'listPets\x1fa\x1eb': '1', 'listPets\x1f<b>bold</b>': '2' });
    await client.hSet(PREFIX + 'seen', { nan: 'NaN,-1', neg: '-1,-2', text: 'x' });
    await client.hSet(PREFIX + 'v', { 'listPets\x1f(other)\x1f<img src=x onerror="window.__pwned=21">': '3,' + nowMs, bad: 'x,y', 'listPets\x1f/x\x1fkind': '-1,NaN' });
    const sample = { atMs: nowMs, operation: '<img src=x onerror="window.__pwned=31">', requestId: '"><script>window.__pwned=32</script>', status: 200, problems: Array.from({ length: 10_000 }, (_, i) => `p${i} ${'z'.repeat(1000)}`) };
    await client.zAdd(PREFIX + 'vs', [
      { score: nowMs, value: JSON.stringify(sample) },
      { score: nowMs - 1, value: 'not json' },
      { score: nowMs - 2, value: JSON.stringify({ ...sample, requestId: 'r2', problems: 'not a list' }) },
    ]);
  } finally {
    await client.quit();
  }
}

// parity: what the console shows is read by the admin listener from keys, Redis and the recorder, whatever the engine
t.test('hostile text from keys, the upstream and Redis: every view answers, the page runs none of it', { skip: REDIS_SKIP || CHROMIUM_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const upstream = await hostileUpstream(t);
  const keys = [
    { id: 'markup-owner', key: testKey(), owner: '<img src=x onerror="window.__pwned=1">', contact: 'https://example.com/"><svg/onload=window.__pwned=2>' },
    { id: '<script>window.__pwned=3</script>', key: testKey(), owner: "' onmouseover='window.__pwned=4", contact: "https://example.com/'onfocus='window.__pwned=5'autofocus='" },
  ];
  const file = join(dir, 'hostile.json');
  policy(file, upstream, redis.url, keys);
  const gw = await serve(t, file);
  for (const k of keys) for (const path of ['/v1/pets', '/v1/pets/7']) t.equal((await request(`${gw.url}${path}`, { headers: bearer(k.key) })).status, 200, `${k.id} ${path}: passed on (monitor)`);
  const violations = await request(`${gw.admin}/console/api/violations?scope=instance`, { headers: admin() });
  t.equal(violations.status, 200);
  const v = violations.json as { rules: Array<{ field: string; kind: string }>; samples: Array<{ problems: string[] }> };
  t.ok(v.rules.length > 0, `the unknown fields are counted (${v.rules.length} rules)`);
  for (const r of v.rules) t.notMatch(r.kind, /[\x00-\x1f\u202e]/, `rule ${JSON.stringify(r.kind)}: no hidden character`);
  // Wait until the instance flushed its counts to Redis (every 2 s; later on a loaded machine), then spoil what Redis holds.
  await until(
    'the fleet counts markup-owner\'s 2 requests',
    async () => {
      const r = await request(`${gw.admin}/console/api/traffic`, { headers: admin() });
      const view = r.json as { scope: string; consumers: Array<{ consumer: string; requests: number }> };
      return view.scope === 'fleet' && view.consumers.some((c) => c.consumer === 'markup-owner' && c.requests === 2);
    },
    15_000,
  );
  await corrupt(redis.url, Date.now());

  for (const view of VIEWS) {
    const [r, ms] = await timed(() => request(`${gw.admin}/console/api/${view}`, { headers: admin(), timeoutMs: 10_000 }));
    t.equal(r.status, 200, `${view}: 200 over the corrupt values (${Math.round(ms)} ms)`);
    t.ok(ms < 3500, `${view}: within the read deadline`);
    if (view === 'traffic') {
      const consumers = (r.json as { consumers: Array<{ consumer: string; requests: number }> }).consumers;
      t.ok(consumers.some((c) => c.consumer === 'markup-owner' && c.requests === 2), 'the fleet counts survive the corrupt fields beside them');
    }
    if (view === 'violations') {
      for (const s of (r.json as { samples: Array<{ problems: string[] }> }).samples) {
        t.ok(s.problems.length <= 5, `a sample from Redis keeps at most 5 problems (${s.problems.length})`);
        t.ok(s.problems.every((p) => p.length <= 200), 'each at most 200 characters');
      }
    }
    if (view === 'fleet') {
      const ids = (r.json as { instances: Array<{ id: string; host: string }> }).instances.map((i) => i.id);
      t.ok(ids.includes('evil'), 'the hostile beat is listed (as text)');
      t.notOk(ids.includes('types'), 'a beat of the wrong types is not');
    }
  }

  const browser = await launch(t);
  const page = await browser.newPage();
  t.teardown(() => page.close().catch(() => undefined));
  page.setDefaultTimeout(15_000);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  const origin = gw.admin;
  await page.setRequestInterception(true);
  const elsewhere: string[] = [];
  page.on('request', (r) => {
    if (r.url().startsWith(`${origin}/`) || r.url().startsWith('data:')) void r.continue();
    else {
      elsewhere.push(r.url());
      void r.abort();
    }
  });
  await page.evaluateOnNewDocument(
    (key: string, token: string) => {
      sessionStorage.setItem(key, token);
      const w = window as unknown as { __csp: string[] };
      w.__csp = [];
      document.addEventListener('securitypolicyviolation', (e) => w.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
    },
    TOKEN_KEY,
    ADMIN_TOKEN,
  );
  for (const view of ['deprecations', ...VIEWS] as const) {
    await page.goto(`${origin}/console/?v=${view}#${view}`, { waitUntil: 'load' });
    await page.waitForFunction((v: string) => document.body.dataset.rendered === v || document.body.dataset.problem !== undefined, { timeout: 15_000 }, view);
    t.equal(await page.evaluate(() => document.body.dataset.problem ?? null), null, `${view}: drawn, no problem`);
    // Hover and focus everything: an injected handler would run now.
    await page.evaluate(() => {
      for (const el of document.querySelectorAll('td, code, span, li, a, time')) {
        el.dispatchEvent(new MouseEvent('mouseover', { bubbles: true }));
        (el as HTMLElement).focus?.();
      }
    });
    const state = await page.evaluate(() => ({
      pwned: (window as unknown as { __pwned?: number }).__pwned ?? null,
      csp: (window as unknown as { __csp: string[] }).__csp,
      injected: document.querySelectorAll('main img, main svg:not(.legend svg):not(figure svg), main script, main [onerror], main [onload], main [onmouseover], main [onfocus], main a[href^="javascript"]').length,
    }));
    t.strictSame(state, { pwned: null, csp: [], injected: 0 }, `${view}: nothing ran, no CSP report, no element injected`);
  }
  // The hostile texts are on the page, as text.
  await page.goto(`${origin}/console/?v=keys2#keys`, { waitUntil: 'load' });
  await page.waitForFunction(() => document.body.dataset.rendered === 'keys');
  const text = await page.evaluate(() => document.querySelector('[data-body="keys"]')?.textContent ?? '');
  t.match(text, '<img src=x onerror="window.__pwned=1">', 'the owner is shown as written');
  t.match(text, '<script>window.__pwned=3</script>', 'the id too');
  t.strictSame(errors, [], 'no page or console error');
  t.strictSame(elsewhere, [], 'no request left the admin origin');
  const { stdout, stderr } = gw.handle.output();
  for (const k of keys) t.notOk((stdout + stderr).includes(k.key), `${k.id.slice(0, 12)}: its key is in no log line`);
  t.notOk((stdout + stderr).includes(ADMIN_TOKEN), 'nor the admin token');
});

// parity: the policy's check and the console's fleet rollup are the same whatever the engine
t.test('a file key id with a control character is refused: it would spoil the fleet counts of the others', { skip: REDIS_SKIP }, async (t) => {
  // The fleet's slot hashes key a count by `<operation>\x1f<consumer>` and are read back joined by
  // \x1e: an id holding either shifted every field after it (the other keys' counts vanished).
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const upstream = await hostileUpstream(t);
  for (const id of ['sep\u001ein-id', 'unit\u001fin-id', 'nul\u0000', 'bidi\u202e', 'del\u007f']) {
    const file = join(dir, 'bad-id.json');
    policy(file, upstream, redis.url, [{ id: 'fine', key: testKey() }, { id, key: testKey() }]);
    const r = await runCli(t, ['check', file]);
    t.equal(r.code, 78, `id ${JSON.stringify(id)}: check refuses the policy (EX_CONFIG)`);
    t.match(r.stdout + r.stderr, /\$\.policies\.auth\.keys\[1\]\.id/, 'at its path');
  }
  const keys = [
    { id: 'aaa-first', key: testKey() },
    { id: 'Payments team (<b>EU</b>)', key: testKey() },
    { id: 'zzz-last', key: testKey() },
  ];
  const file = join(dir, 'ids.json');
  policy(file, upstream, redis.url, keys);
  const gw = await serve(t, file);
  for (const [i, k] of keys.entries()) for (let n = 0; n <= i; n++) t.equal((await request(`${gw.url}/v1/pets`, { headers: bearer(k.key) })).status, 200);
  const counts = async (scope: string) => {
    const r = await request(`${gw.admin}/console/api/traffic${scope}`, { headers: admin() });
    t.equal(r.status, 200);
    return Object.fromEntries((r.json as { consumers: Array<{ consumer: string; requests: number }> }).consumers.map((c) => [c.consumer, c.requests]));
  };
  const want = Object.fromEntries(keys.map((k, i) => [k.id, i + 1]));
  t.match(await counts('?scope=instance'), want, 'this instance counts each key');
  t.match(await counts(''), want, 'the fleet (read back from Redis) counts each key the same');
});

// parity: the console's Redis reads and the fleet's recovery are the admin listener's, whatever the engine
t.test('Redis hung, then gone: every view answers degraded within its deadline; Redis back empty: the counts come back', { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(async () => {
    redis.resume();
    await redis.stop();
  });
  const upstream = await hostileUpstream(t);
  const key = testKey();
  const file = join(dir, 'outage.json');
  policy(file, upstream, redis.url, [{ id: 'steady', key }]);
  const gw = await serve(t, file);
  for (let i = 0; i < 5; i++) t.equal((await request(`${gw.url}/v1/pets`, { headers: bearer(key) })).status, 200);
  const requests = async (scope: string): Promise<number | undefined> => {
    const r = await request(`${gw.admin}/console/api/traffic${scope}`, { headers: admin(), timeoutMs: 10_000 });
    return (r.json as { consumers: Array<{ consumer: string; requests: number }> }).consumers.find((c) => c.consumer === 'steady')?.requests;
  };
  t.equal(await requests(''), 5, 'the fleet counts the 5 requests');

  for (const [what, spoil] of [
    ['hung (SIGSTOP)', () => redis.pause()],
    ['gone (SIGKILL)', () => redis.kill()],
  ] as const) {
    await spoil();
    for (const view of VIEWS) {
      const [r, ms] = await timed(() => request(`${gw.admin}/console/api/${view}`, { headers: admin(), timeoutMs: 10_000 }));
      t.equal(r.status, 200, `${what}: ${view} answers 200 (${Math.round(ms)} ms)`);
      t.ok(ms < 4000, `${what}: ${view} within the read deadline (3 s) and a margin`);
      if (view !== 'migration') t.equal((r.json as { degraded?: string }).degraded, 'store unreachable', `${what}: ${view} says degraded`);
    }
    t.equal(await requests(''), 5, `${what}: the instance's own counts are shown`);
    if (what.startsWith('hung')) redis.resume();
  }
  await redis.restart();
  // Back empty: the instances send their whole windows again (fleet.ts); bounded wait.
  let back: number | undefined;
  for (let i = 0; i < 40 && back !== 5; i++) {
    await new Promise((r) => setTimeout(r, 250));
    back = await requests('');
  }
  t.equal(back, 5, 'the fleet counts come back from the instance, not counted twice');
  const fleet = await request(`${gw.admin}/console/api/fleet`, { headers: admin() });
  t.equal((fleet.json as { degraded?: string }).degraded, undefined, 'the fleet view is the fleet\'s again');
});
