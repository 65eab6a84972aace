// The operator console's screenshots (docs/images/console-<view>.png) and its first-render
// figures (docs/console.md), from real runs of the built gateway (dist/, built first):
//
// 1. Screenshots: a redis-server, a stub legacy backend (the pet store's answers, with a few
//    contract violations on purpose) and a `next` beside it, two gateways sharing the Redis (B's
//    policy differs from A's in one value), a few hundred real requests from several consumers.
//    The weeks and hours before the run are filled in through the console's own recorder and
//    Redis rollup (dist/ops/console), as instances running then would have written them, so
//    the burn-down and the day's chart have a past. Then Chromium shows each view of gateway A's
//    console (the admin token entered in the page's form) and saves it, 1280 px wide.
// 2. First render: a gateway whose policy has 1,000 keys, over a Redis holding a day of data of
//    1,000 consumers (written by the recorder and the rollup as above); each view opened 5 times
//    (no cache), navigation start to `document.body.dataset.rendered`: the median per view.
//
//   npm run build && node scripts/console-screenshots.mjs [--no-shots] [--no-timing] [--loads N]
//
// Needs redis-server on PATH and Chromium at /usr/bin/chromium (CHROMIUM names another).
/* global document */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'dist', 'cli', 'main.js');
const OUT = join(ROOT, 'docs', 'images');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const args = process.argv.slice(2);
const SHOTS = !args.includes('--no-shots');
const TIMING = !args.includes('--no-timing');
const LOADS = Number(args[args.indexOf('--loads') + 1] ?? 5) || 5;

const { hashKey } = await import(join(ROOT, 'dist', 'policies', 'auth', 'keys.js'));
const { ConsoleRecorder } = await import(join(ROOT, 'dist', 'ops', 'console', 'series.js'));
const { ConsoleFleet } = await import(join(ROOT, 'dist', 'ops', 'console', 'fleet.js'));
const { RedisStore } = await import(join(ROOT, 'dist', 'stores', 'redis.js'));
const { DeprecationRecorder } = await import(join(ROOT, 'dist', 'ops', 'deprecations.js'));

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const children = [];
const closers = [];
const work = mkdtempSync(join(tmpdir(), 'console-screenshots-'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (s) => process.stderr.write(`${s}\n`);

// ---------------------------------------------------------------------------------------------
// Processes

async function freePort() {
  const server = createServer();
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

function ping(port) {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => done(d.toString('latin1').startsWith('+PONG')));
  });
}

/** A redis-server on a free loopback port, without persistence. */
async function startRedis() {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  children.push(child);
  for (let i = 0; i < 100; i++) {
    if (await ping(port)) return `redis://127.0.0.1:${port}`;
    await sleep(50);
  }
  throw new Error('redis-server did not answer');
}

/** `serve` with `policy` (an object, written to a file): its API and admin URLs once both listen. */
function serve(name, policy, env = {}) {
  const file = join(work, `${name}.json`);
  writeFileSync(file, JSON.stringify(policy));
  const child = spawn(process.execPath, [CLI, 'serve', '--policy', file, '--port', '0', '--admin-port', '0'], {
    env: { PATH: process.env.PATH, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`${name} did not start within 30 s:\n${err}`)), 30_000);
    const check = () => {
      const api = /petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) /.exec(err);
      const line = out.split('\n').find((l) => l.includes('"msg":"admin listening'));
      const admin = line === undefined ? undefined : JSON.parse(line).url;
      if (api && typeof admin === 'string') {
        clearTimeout(timer);
        resolve({ name, url: api[1], admin: admin.replace(/\/$/, ''), pid: child.pid });
      }
    };
    child.stdout.setEncoding('utf8').on('data', (s) => {
      // Keep only what is needed to find the admin line: access lines are many.
      if (!out.includes('admin listening')) out += s;
      check();
    });
    child.stderr.setEncoding('utf8').on('data', (s) => {
      err += s;
      check();
    });
    child.once('exit', (code) => reject(new Error(`${name} exited ${code}:\n${err}`)));
  });
}

function stopAll() {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
}
process.on('exit', () => {
  stopAll();
  rmSync(work, { recursive: true, force: true });
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));

// ---------------------------------------------------------------------------------------------
// The upstream: the pet store (legacy at /v1, next at /next/v1), a few contract violations

const pet = (id, name = `pet-${id}`) => ({ id, name, categoryId: 1 + (id % 3), status: ['available', 'pending', 'sold'][id % 3] });

async function petStore() {
  const server = createHttpServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url, 'http://upstream');
      const next = url.pathname.startsWith('/next/');
      const path = next ? url.pathname.slice(5) : url.pathname;
      const send = (status, body) => {
        const text = typeof body === 'string' ? body : JSON.stringify(body);
        res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) }).end(text);
      };
      if (req.method === 'GET' && path === '/v1/pets') {
        const limit = Number(url.searchParams.get('limit') ?? 20);
        const list = Array.from({ length: Math.min(limit, 12) }, (_, i) => pet(i + 1));
        // next sorts a little differently when asked for 20.
        if (next && limit === 20) list.reverse();
        return send(200, list);
      }
      if (req.method === 'POST' && path === '/v1/pets') return send(201, { ...JSON.parse(Buffer.concat(chunks).toString('utf8')), id: 100 + Math.floor(Math.random() * 1000) });
      const m = /^\/v1\/pets\/(\d+)$/.exec(path);
      if (req.method === 'GET' && m) {
        const id = Number(m[1]);
        // The legacy backend's known bugs.
        if (!next && id === 13) return send(200, '{"id":"13","name":"Lucky","categoryId":1}');
        if (!next && id === 21) return send(200, { id: 21, name: 'Whiskers' });
        if (!next && id === 34) return send(200, { id: 34, name: 'Nemo', categoryId: 2, status: 'lost' });
        if (id >= 1 && id <= 40) return send(200, next && id === 7 ? pet(id, 'Seven') : pet(id));
      }
      send(404, { code: 'pet_not_found', message: 'No pet with this id.', status: 404 });
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  closers.push(() => new Promise((r) => server.close(r)));
  return `http://127.0.0.1:${server.address().port}`;
}

// ---------------------------------------------------------------------------------------------
// Seeding the past: records counted by a recorder of this process, added to Redis by the rollup

/** An access record as the gateway's observers get it (the fields the console's recorder reads). */
function record(consumer, operation, status, startedAt, durationMs, extra = {}) {
  return {
    startedAt,
    durationMs,
    requestId: randomBytes(8).toString('hex'),
    method: operation === 'createPet' ? 'POST' : 'GET',
    route: operation,
    operation,
    status,
    errorCode: extra.errorCode,
    rejectedBy: extra.rejectedBy,
    upstreamStatus: extra.upstreamStatus ?? (status === 429 || status === 401 ? undefined : status),
    upstreamMs: undefined,
    upstreamFailure: undefined,
    bytesIn: 0,
    bytesOut: 0,
    clientAddress: '127.0.0.1',
    protocol: 'http/1.1',
    consumer,
    facts: { logFields: [], get: () => undefined },
    trace: undefined,
  };
}

/**
 * Adds what `feed` records to Redis as a serving instance would (without its heartbeat): the
 * console's counts through its rollup, the getPet calls to the deprecation ledger of the store.
 */
async function seed(redisUrl, feed) {
  const recorder = new ConsoleRecorder({ deprecatedOperations: () => new Set(['getPet']), trackDelta: true, maxConsumers: 10_000 });
  const store = new RedisStore({ url: redisUrl }, { env: {} });
  const ledger = new DeprecationRecorder(store.ledger, ['getPet']);
  let n = 0;
  feed((r) => {
    recorder.onEnd(r);
    ledger.onEnd(r);
    n++;
  });
  await store.close();
  const fleet = new ConsoleFleet({ redis: { url: redisUrl }, source: recorder, beat: () => ({}), env: {} });
  // Bounded: each flush sends for about a second at most.
  for (let i = 0; i < 300; i++) {
    await fleet.flush();
    const b = fleet.backlog();
    if (b.batches === 0 && b.cells === 0) break;
  }
  if (fleet.errors > 0) throw new Error(`the rollup failed ${fleet.errors} times`);
  return n;
}

const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];
const latency = () => Math.round(3 + Math.random() * 20 + (Math.random() < 0.05 ? 150 : 0));

// ---------------------------------------------------------------------------------------------
// Requests

async function send(base, key, path, init = {}) {
  const res = await fetch(base + path, { ...init, headers: { authorization: `Bearer ${key}`, ...(init.body ? { 'content-type': 'application/json' } : {}) } });
  await res.arrayBuffer();
  return res.status;
}

async function api(gw, path, token) {
  const res = await fetch(`${gw.admin}/console/api/${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

async function until(what, pred, ms) {
  const end = Date.now() + ms;
  for (let i = 0; i < ms / 100 + 1; i++) {
    if (await pred()) return;
    if (Date.now() > end) break;
    await sleep(100);
  }
  throw new Error(`${what}: not within ${ms} ms`);
}

const newKey = () => `ss_${randomBytes(24).toString('base64url')}`;
const iso = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

// ---------------------------------------------------------------------------------------------
// 1. The screenshots

async function screenshots(browser) {
  const redis = await startRedis();
  const upstream = await petStore();
  const adminToken = randomBytes(32).toString('base64url');
  const now = Date.now();
  const people = [
    { id: 'partner-acme', owner: 'Acme integrations', contact: 'api@acme.example' },
    { id: 'partner-globex', owner: 'Globex', contact: '#globex-api' },
    { id: 'partner-initech', owner: 'Initech', contact: 'https://initech.example/contact' },
    { id: 'mobile-app', owner: 'Mobile team', contact: '@mobile' },
    { id: 'web-frontend', owner: 'Web team', contact: 'web@petstore.example' },
    { id: 'svc-batch', owner: 'Batch jobs', contact: '#batch' },
    { id: 'svc-reports', owner: 'Reporting', contact: '#reporting' },
    { id: 'partner-hooli', owner: 'Hooli', contact: 'mailto:apis@hooli.example', expires: iso(now + 5 * DAY) },
    { id: 'svc-archive', owner: 'Archive job' },
  ];
  const secret = Object.fromEntries(people.map((p) => [p.id, newKey()]));
  const keys = people.map((p) => ({ id: p.id, hash: hashKey(secret[p.id]), ...(p.owner ? { owner: p.owner } : {}), ...(p.contact ? { contact: p.contact } : {}), ...(p.expires ? { expires: p.expires } : {}) }));
  const policy = (connectMs) => ({
    version: 1,
    upstream: { url: `${upstream}/v1`, timeouts: { connectMs } },
    policies: {
      auth: { keys, keysFromEnv: null },
      'rate-limit': { limit: 600, perKey: { 'svc-batch': { limit: 20, windowSeconds: 60 } }, store: { redis: { url: redis } } },
    },
    migration: { next: { url: `${upstream}/next/v1` }, operations: { listPets: { mode: 'shadow' }, getPet: { mode: 'shadow' } }, store: { url: redis } },
  });
  const env = { PETSTORE_ADMIN_TOKENS: adminToken };
  const [a, b] = await Promise.all([serve('gateway-a', policy(2000), env), serve('gateway-b', policy(2500), env)]);
  log(`gateways: A ${a.url} (admin ${a.admin}), B ${b.url} (admin ${b.admin})`);

  // The past: getPet per consumer per day over six weeks (the burn-down), and the last day's traffic by hour.
  const seeded = await seed(redis, (add) => {
    // Calls per day six weeks ago; each falls to a quarter of it by now, svc-reports stopped 11 days ago.
    const burn = { 'partner-acme': 90, 'partner-globex': 50, 'partner-initech': 25, 'svc-reports': 30 };
    // Days 42 to 2 ago; the last 24 hours come hour by hour below.
    for (let d = 42; d >= 2; d--) {
      for (const [consumer, start] of Object.entries(burn)) {
        if (consumer === 'svc-reports' && d < 11) continue;
        const calls = Math.max(0, Math.round(start * (0.25 + (0.75 * d) / 42) + (Math.random() - 0.5) * 6));
        const dayStart = Math.floor(now / DAY) * DAY - d * DAY;
        for (let i = 0; i < calls; i++) add(record(consumer, 'getPet', 200, dayStart + Math.floor(Math.random() * DAY), latency()));
      }
    }
    // From yesterday's start to an hour ago, hour by hour (the last hour is the run's own).
    for (let t0 = Math.floor(now / DAY) * DAY - DAY, h = 0; t0 + HOUR <= now - HOUR; t0 += HOUR, h++) {
      const at = () => t0 + Math.floor(Math.random() * HOUR);
      for (let i = 0; i < 140 + Math.round(60 * Math.sin(h / 4)); i++) add(record(pick(['mobile-app', 'web-frontend', 'web-frontend', 'svc-batch']), 'listPets', 200, at(), latency()));
      for (let i = 0; i < 2; i++) add(record(pick(['partner-acme', 'partner-acme', 'partner-globex', 'partner-initech']), 'getPet', 200, at(), latency()));
      add(record(pick(['partner-acme', 'mobile-app']), 'getPet', 404, at(), latency()));
      if (h % 5 === 0) add(record('mobile-app', 'createPet', 201, at(), latency()));
      if (h % 6 === 0) add(record('web-frontend', 'listPets', 502, at(), 5000, { errorCode: 'upstream_timeout' }));
      if (h % 4 === 0) for (let i = 0; i < 5; i++) add(record('svc-batch', 'listPets', 429, at(), 1, { errorCode: 'rate_limited', rejectedBy: 'rate-limit' }));
    }
  });
  log(`seeded ${seeded} records of the past through the recorder and the rollup`);

  // Now: real requests through both gateways.
  let sent = 0;
  const both = [a, b];
  const go = async (key, path, init) => {
    sent++;
    return send(both[sent % 2].url, key, path, init);
  };
  for (let i = 0; i < 180; i++) await go(secret[pick(['mobile-app', 'web-frontend', 'web-frontend', 'svc-batch'])], `/v1/pets?limit=${pick([5, 10, 10, 20])}`);
  for (let i = 0; i < 20; i++) await go(secret[pick(['partner-acme', 'partner-acme', 'partner-globex', 'partner-initech'])], `/v1/pets/${1 + Math.floor(Math.random() * 12)}`);
  for (let i = 0; i < 10; i++) await go(secret['mobile-app'], `/v1/pets/${500 + i}`);
  for (const id of [13, 13, 21, 34, 13]) await go(secret['partner-globex'], `/v1/pets/${id}`);
  for (let i = 0; i < 6; i++) await go(secret['mobile-app'], '/v1/pets', { method: 'POST', body: JSON.stringify({ name: `Pup ${i}`, categoryId: 2 }) });
  for (let i = 0; i < 8; i++) await go(newKey(), '/v1/pets');
  for (let i = 0; i < 30; i++) await go(secret['svc-batch'], '/v1/pets?limit=5');
  for (let i = 0; i < 25; i++) await go(secret['partner-hooli'], `/v1/pets?limit=10`);
  log(`sent ${sent} requests through A and B`);

  // The seeded past is over an hour old: the last hour's counts are the requests just sent, once both gateways have flushed.
  const total = (v) => v.operations.reduce((n, o) => n + o.requests, 0);
  await until('the rollup', async () => total(await api(a, 'traffic?window=hour', adminToken)) === sent, 30_000);
  await until('both heartbeats', async () => (await api(a, 'fleet', adminToken)).instances.length === 2, 30_000);
  await sleep(2500);

  mkdirSync(OUT, { recursive: true });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900, deviceScaleFactor: 1 });
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
  await page.goto(`${a.admin}/console/#deprecations`, { waitUntil: 'load' });
  await page.waitForFunction(() => !document.getElementById('token-form').hidden, { timeout: 15_000 });
  await page.type('#token', adminToken);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.body.dataset.rendered === 'deprecations', { timeout: 15_000 });
  const shots = [
    // The time axis over the days with calls (the default runs to the sunset, four years on).
    ['deprecations', async () => {
      await page.click('button[data-reach="seen"]');
      await page.waitForFunction(() => document.querySelector('button[data-reach="seen"]').getAttribute('aria-pressed') === 'true', { timeout: 15_000 });
    }],
    ['traffic', async () => {}],
    ['traffic-day', async () => {
      await page.click('button[data-window="day"]');
      await page.waitForFunction(() => document.querySelector('button[data-window="day"]').getAttribute('aria-pressed') === 'true' && document.body.dataset.rendered === 'traffic', { timeout: 15_000 });
    }],
    ['violations', async () => {}],
    ['keys', async () => {}],
    ['fleet', async () => {}],
    ['migration', async () => {}],
  ];
  let n = 0;
  for (const [name, then] of shots) {
    const view = name.replace(/-day$/, '');
    await page.goto(`${a.admin}/console/?shot=${++n}#${view}`, { waitUntil: 'load' });
    await page.waitForFunction((v) => document.body.dataset.rendered === v, { timeout: 15_000 }, view);
    await then();
    await sleep(300);
    const file = join(OUT, `console-${name}.png`);
    await page.screenshot({ path: file, fullPage: true });
    log(`${file}: ${Math.round(statSync(file).size / 1024)} KB`);
  }
  await page.close();
}

// ---------------------------------------------------------------------------------------------
// 2. First render with 1,000 keys and a day of data

async function firstRender(browser) {
  const redis = await startRedis();
  const upstream = await petStore();
  const now = Date.now();
  const ids = Array.from({ length: 1000 }, (_, i) => `svc-${String(i + 1).padStart(4, '0')}`);
  const keys = ids.map((id, i) => ({
    id,
    hash: hashKey(newKey()),
    owner: `Team ${1 + (i % 40)}`,
    contact: `team-${1 + (i % 40)}@petstore.example`,
    ...(i % 50 === 0 ? { expires: iso(now + (2 + (i % 20)) * DAY) } : {}),
  }));
  // A day of data: every consumer, every hour of the last 24, one request of each operation
  // (some errors), and in the last hour a request in each of 5 minutes.
  const seeded = await seed(redis, (add) => {
    for (const [i, consumer] of ids.entries()) {
      for (let h = 23; h >= 0; h--) {
        // Within the hour slot h hours back (the day window is the last 24 slots, this one's included).
        const slot = (Math.floor(now / HOUR) - h) * HOUR;
        const at = slot + Math.floor(Math.random() * Math.min(HOUR, now - slot));
        add(record(consumer, 'listPets', 200, at, latency()));
        add(record(consumer, 'getPet', (i + h) % 17 === 0 ? 404 : 200, at, latency()));
        if (h % 3 === 0) add(record(consumer, 'createPet', (i + h) % 29 === 0 ? 429 : 201, at, latency(), (i + h) % 29 === 0 ? { errorCode: 'rate_limited', rejectedBy: 'rate-limit' } : {}));
      }
      for (let m = 0; m < 5; m++) add(record(consumer, pick(['listPets', 'getPet']), 200, now - Math.floor(Math.random() * 59 * MINUTE), latency()));
    }
  });
  log(`seeded ${seeded} records of the last day for ${ids.length} consumers`);
  const gw = await serve('gateway-1000', {
    version: 1,
    upstream: { url: `${upstream}/v1` },
    policies: { auth: { keys, keysFromEnv: null }, 'rate-limit': { store: { redis: { url: redis } } } },
  });
  const day = await api(gw, 'traffic?window=day');
  const counted = day.operations.reduce((n, o) => n + o.requests, 0);
  log(`the gateway's fleet view: ${day.consumers.length} consumers, ${counted} requests in the day (${seeded} seeded)`);
  if (counted !== seeded) throw new Error(`the fleet view counts ${counted}, ${seeded} were seeded`);

  const views = ['deprecations', 'traffic', 'violations', 'keys', 'fleet', 'migration'];
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900, deviceScaleFactor: 1 });
  await page.setCacheEnabled(false);
  const results = [];
  let n = 0;
  for (const view of views) {
    const times = [];
    const apiTimes = [];
    for (let i = 0; i < LOADS; i++) {
      await page.goto(`${gw.admin}/console/?load=${++n}#${view}`, { waitUntil: 'load' });
      await page.waitForFunction((v) => document.body.dataset.rendered === v, { timeout: 30_000 }, view);
      const [render, fetched] = await page.evaluate((v) => {
        const mark = performance.getEntriesByName(`console-rendered:${v}`)[0];
        const call = performance.getEntriesByType('resource').find((e) => e.name.includes(`/console/api/${v}`));
        return [mark ? mark.startTime : NaN, call ? call.responseEnd - call.startTime : NaN];
      }, view);
      times.push(render);
      apiTimes.push(fetched);
    }
    const rows = await page.evaluate(() => document.querySelectorAll('main section:not([hidden]) tbody tr[data-key]').length);
    results.push({ view, times, apiTimes, rows });
  }
  await page.close();
  const median = (xs) => {
    const s = [...xs].sort((x, y) => x - y);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  console.log(`First render, navigation start to the view drawn (body.dataset.rendered), ${LOADS} loads each, no cache,`);
  console.log(`1,000 keys, a day of data of 1,000 consumers in Redis (${seeded} requests), Chromium ${await browser.version()}, node ${process.version}:`);
  console.log('| view | median | min | max | its API call (median) | table rows |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const r of results) {
    console.log(`| ${r.view} | ${Math.round(median(r.times))} ms | ${Math.round(Math.min(...r.times))} ms | ${Math.round(Math.max(...r.times))} ms | ${Math.round(median(r.apiTimes))} ms | ${r.rows} |`);
  }
}

// ---------------------------------------------------------------------------------------------

const browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  userDataDir: join(work, 'chromium'),
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  if (SHOTS) await screenshots(browser);
  if (TIMING) await firstRender(browser);
} finally {
  await browser.close();
  for (const c of closers) await c();
  stopAll();
}
process.exit(0);
