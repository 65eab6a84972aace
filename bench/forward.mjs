// Side by side, in one run, interleaved rounds: bare @fastify/http-proxy (no policy) vs the gateway
// with every policy on (engines undici, fastify and http-proxy-3, to the same upstream process), the
// same with response-contract in monitor mode, the gateway with its built-in backend, and the undici
// gateway with parts switched off or on: the operations layer (metrics, access log, deprecation
// report: `--ops`) and the rate limit that never trips (none, memory, Redis: `--rate-limit` of
// bench/target.mjs). Four routes: GET /v1/pets?limit=20, ?limit=100, GET /v1/pets/7, POST /v1/pets.
// For each target and route: req/s, p50/p99 latency (exact, from every response), CPU time per
// request of the target process (/proc/<pid>/stat utime+stime before and after each round), peak
// RSS (sampled VmRSS, and VmHWM at the end). Ratios are paired: each round's figure over bare
// forwarding's figure in the same round, then the median over rounds.
//
//   npm run build && node bench/forward.mjs
//
// Environment: BENCH_ROUNDS (3), BENCH_SECONDS (3, per round per target per route),
// BENCH_CONNECTIONS (50), BENCH_WARMUP_SECONDS (3), BENCH_ROUTES (list20,list100,get,create; also list: no query string, the default limit),
// BENCH_TARGETS (comma list; default bare,bare-hp3,floor,undici,fastify,http-proxy-3,builtin) of:
//   direct                upstream direct (no proxy)
//   bare, bare-hp3        bare @fastify/http-proxy, bare node:http + http-proxy-3 (no policy)
//   floor                 node:http + an undici Pool and nothing else: the undici engine's transport
//                         with no policy, header rule or operations (bench/target.mjs floor)
//   baseline              BENCH_BASELINE=/path/to/an/older/checkout (built): that checkout's own
//                         bench/target.mjs and policy, engine undici (no new flags are passed to it)
//   core                  engine undici, ops off, no rate-limit section (the exchange, the policies
//                         and the header rules only): the one to compare with baseline
//   no-ops                engine undici, ops off, memory rate limit
//   no-limit              engine undici, ops on, no rate-limit section
//   undici                engine undici, ops on, memory rate limit (everything on, as `serve`)
//   redis                 engine undici, ops on, Redis rate limit ({redis: {url}}) against a
//                         redis-server this script starts on a free loopback port and stops at the
//                         end (BENCH_REDIS_SERVER names the binary; fails if there is none); the
//                         deprecation report is in Redis too, as `serve` keeps it
//   fastify, http-proxy-3 the other engines, ops on, memory rate limit
//   cached                engine undici, ops on, the response cache (memory store; repeated requests hit)
//   cached-enforce        the same with response-contract enforce (the default of a policy file)
//   monitor               undici + response-contract monitor
//   contract              undici + response-contract enforce (against undici: the contract's cost)
//   no-console            undici without the operator console's counts (server.admin.console: false)
//   bound-on, bound-off   the undici engine's handler on a bare node:http server, every policy on, ops off,
//                         with and without the per-connection in-flight bound (bench/target.mjs gateway-handler)
//   builtin, builtin-fastify, builtin-http-proxy-3   the built-in backend, ops on, memory rate limit
// Every gateway target but baseline is checked before it is measured: getPet answers with (or,
// without a rate limit, without) RateLimit and RateLimit-Policy; for redis, the limit's key is in
// one listPets makes a script call in Redis, and so did every measured request (INFO commandstats).
import { join } from 'node:path';
import { AUTH, NEW_PET, call, cpuMs, envNum, fmt, isMain, machine, measured, load, median, ratio, rotate, startProcess, startRedis, startTarget, statusMb, table } from './lib.mjs';
import { SEED_PETS } from './fixtures.mjs';

/** `npm run bench` and a bare `node bench/forward.mjs` (bench/run.mjs adds redis when redis-server is installed). */
export const DEFAULT_TARGETS = ['bare', 'bare-hp3', 'floor', 'undici', 'fastify', 'http-proxy-3', 'builtin'];

const gateway = (...args) => startTarget('gateway', ...args);
// `ops` and `rateLimit` say how a gateway target of this checkout runs (verify checks the headers);
// `redis: true` makes runForward start a redis-server and pass it as ctx.redis.
export const TARGETS = {
  direct: { name: 'upstream direct (no proxy)', gateway: false, start: (up) => ({ ...up, stop: async () => {} }) },
  bare: { name: 'bare @fastify/http-proxy', gateway: false, start: (up) => startTarget('bare-proxy', up.url) },
  'bare-hp3': { name: 'bare http-proxy-3 (node:http)', gateway: false, start: (up) => startTarget('bare-http-proxy-3', up.url) },
  floor: { name: 'floor: node:http + undici Pool, nothing else', gateway: false, start: (up) => startTarget('floor', up.url) },
  // BENCH_BASELINE=/path/to/an/older/checkout (built): that checkout's gateway, engine undici, to
  // compare two versions of the gateway in one run. Its own target.mjs and bench policy (an older
  // one may know neither --ops nor --rate-limit): only the flags every version knows are passed.
  baseline: {
    name: 'gateway, engine undici, BENCH_BASELINE checkout',
    gateway: true,
    start: (up) => startProcess([join(process.env.BENCH_BASELINE ?? '.', 'bench', 'target.mjs'), 'gateway', up.url, '--engine', 'undici'], { cwd: process.env.BENCH_BASELINE }),
  },
  core: { name: 'gateway core, engine undici, ops off, no rate limit', gateway: true, ops: 'off', rateLimit: 'off', start: (up) => gateway(up.url, '--engine', 'undici', '--ops', 'off', '--rate-limit', 'off') },
  'no-console': { name: 'gateway, engine undici, ops on, console counts off', gateway: true, ops: 'on', rateLimit: 'memory', start: (up) => gateway(up.url, '--engine', 'undici', '--console', 'off') },
  'no-ops': { name: 'gateway, engine undici, ops off', gateway: true, ops: 'off', rateLimit: 'memory', start: (up) => gateway(up.url, '--engine', 'undici', '--ops', 'off') },
  'no-limit': { name: 'gateway, engine undici, ops on, no rate limit', gateway: true, ops: 'on', rateLimit: 'off', start: (up) => gateway(up.url, '--engine', 'undici', '--rate-limit', 'off') },
  undici: { name: 'gateway, engine undici (default)', gateway: true, ops: 'on', rateLimit: 'memory', start: (up) => gateway(up.url, '--engine', 'undici') },
  redis: {
    name: 'gateway, engine undici, ops on, Redis rate limit',
    gateway: true,
    ops: 'on',
    rateLimit: 'redis',
    redis: true,
    start: (up, ctx) => gateway(up.url, '--engine', 'undici', '--rate-limit', 'redis', '--redis-url', ctx.redis.url),
  },
  fastify: { name: 'gateway, engine fastify', gateway: true, ops: 'on', rateLimit: 'memory', start: (up) => gateway(up.url, '--engine', 'fastify') },
  'http-proxy-3': { name: 'gateway, engine http-proxy-3', gateway: true, ops: 'on', rateLimit: 'memory', start: (up) => gateway(up.url, '--engine', 'http-proxy-3') },
  // The response cache (policies.cache, memory store): one request repeated per route, so hits.
  cached: { name: 'gateway, engine undici, response cache', gateway: true, ops: 'on', rateLimit: 'memory', start: (up) => gateway(up.url, '--engine', 'undici', '--cache', 'on') },
  // The response cache with the response contract enforced, as a policy file without the section runs.
  'cached-enforce': { name: 'gateway, engine undici, response cache, contract enforce', gateway: true, ops: 'on', rateLimit: 'memory', start: (up) => gateway(up.url, '--engine', 'undici', '--cache', 'on', '--contract', 'enforce') },
  contract: { name: 'gateway, undici + response-contract enforce', gateway: true, ops: 'on', rateLimit: 'memory', start: (up) => gateway(up.url, '--engine', 'undici', '--contract', 'enforce') },
  'bound-on': { name: 'undici handler on node:http, ops off, in-flight bound on', gateway: true, ops: 'off', rateLimit: 'memory', start: (up) => startTarget('gateway-handler', up.url, '--bound', 'on') },
  'bound-off': { name: 'undici handler on node:http, ops off, in-flight bound off', gateway: true, ops: 'off', rateLimit: 'memory', start: (up) => startTarget('gateway-handler', up.url, '--bound', 'off') },
  // The per-consumer in-flight bound off (server.maxInFlightPerConsumer: null): beside `undici`
  // (on, the default) in bench/ab.mjs, its cost per request (one key, never past the bound).
  'consumer-bound-off': { name: 'gateway, engine undici, per-consumer in-flight bound off', gateway: true, ops: 'on', rateLimit: 'memory', start: (up) => gateway(up.url, '--engine', 'undici', '--consumer-bound', 'off') },
  monitor: { name: 'gateway, undici + response-contract monitor', gateway: true, ops: 'on', rateLimit: 'memory', start: (up) => gateway(up.url, '--engine', 'undici', '--contract', 'monitor') },
  builtin: { name: 'gateway, built-in backend (undici)', gateway: true, ops: 'on', rateLimit: 'memory', builtin: true, start: () => gateway('builtin', '--engine', 'undici') },
  'builtin-fastify': { name: 'gateway, built-in backend (fastify)', gateway: true, ops: 'on', rateLimit: 'memory', builtin: true, start: () => gateway('builtin', '--engine', 'fastify') },
  'builtin-http-proxy-3': { name: 'gateway, built-in backend (http-proxy-3)', gateway: true, ops: 'on', rateLimit: 'memory', builtin: true, start: () => gateway('builtin', '--engine', 'http-proxy-3') },
};

/** The limit of bench/fixtures.mjs, as the gateway announces it. */
const RATE_LIMIT_POLICY = '"default";q=1000000000;w=60';

/** A short-lived node-redis client (the gateway's own dependency) for the checks of the redis target. */
async function withRedis(url, fn) {
  const { createClient } = await import('redis');
  const client = createClient({ url, socket: { connectTimeout: 2000, reconnectStrategy: false } });
  client.on('error', () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.close().catch(() => client.destroy());
  }
}

/**
 * Script calls (EVALSHA, EVAL) Redis has run so far, and its number of keys. A GCRA key of a limit
 * that never trips lives about a millisecond (its TTL is the time its TAT is ahead), so the calls,
 * not the keys, show that decisions are made in Redis.
 */
async function redisState(url) {
  return withRedis(url, async (c) => {
    const dbsize = await c.dbSize();
    const stats = String(await c.info('commandstats'));
    const calls = (cmd) => Number(new RegExp(`^cmdstat_${cmd}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0);
    return { dbsize, scriptCalls: calls('evalsha') + calls('eval') };
  });
}

/**
 * Script calls per request of a redis target: one GCRA decision (the deprecation report's counts
 * go to Redis once a second per instance, not per getPet).
 */
const redisCallsPerRequest = () => 1;

export const ROUTES = {
  // listPets with the interface's default limit (20): no query string at all.
  list: { name: 'GET /v1/pets', path: '/v1/pets', method: 'GET' },
  list20: { name: 'GET /v1/pets?limit=20', path: '/v1/pets?limit=20', method: 'GET' },
  list100: { name: 'GET /v1/pets?limit=100', path: '/v1/pets?limit=100', method: 'GET' },
  get: { name: 'GET /v1/pets/{id}', path: '/v1/pets/7', method: 'GET' },
  create: { name: 'POST /v1/pets', path: '/v1/pets', method: 'POST', body: NEW_PET, headers: { 'content-type': 'application/json' } },
};

export function loadOptions(route) {
  return { path: route.path, method: route.method, body: route.body, headers: { authorization: AUTH, ...route.headers } };
}

/** Each target answers each route as the interface says before it is measured. */
async function verify(t) {
  const h = { authorization: AUTH };
  const fail = (what) => {
    throw new Error(`${t.name} (${t.url}): ${what}`);
  };
  for (const limit of [20, 100]) {
    const r = await call(`${t.url}/v1/pets?limit=${limit}`, { headers: h });
    if (r.status !== 200 || JSON.parse(r.text).length !== limit) fail(`limit=${limit}: ${r.status}, ${r.text.slice(0, 80)}`);
  }
  const g = await call(`${t.url}/v1/pets/7`, { headers: h });
  if (g.status !== 200 || !g.text.startsWith('{"id":7,')) fail(`getPet: ${g.status} ${g.text.slice(0, 80)}`);
  const c = await call(`${t.url}/v1/pets`, { method: 'POST', headers: { ...h, 'content-type': 'application/json' }, body: NEW_PET });
  if (c.status !== 201) fail(`createPet: ${c.status} ${c.text.slice(0, 80)}`);
  if (t.gateway) {
    if (g.headers.get('deprecation') === null) fail('getPet without Deprecation: is this the gateway?');
    const n = await call(`${t.url}/v1/pets`);
    if (n.status !== 401) fail(`no key: ${n.status}`);
  }
  if (t.rateLimit === 'off') {
    if (g.headers.get('ratelimit') !== null || g.headers.get('ratelimit-policy') !== null) fail('getPet with RateLimit headers, but the target has no rate limit');
  } else if (t.rateLimit !== undefined) {
    if (g.headers.get('ratelimit-policy') !== RATE_LIMIT_POLICY) fail(`getPet: RateLimit-Policy ${g.headers.get('ratelimit-policy')}, expected ${RATE_LIMIT_POLICY}`);
    if (!/^"default";r=\d+;t=\d+$/.test(g.headers.get('ratelimit') ?? '')) fail(`getPet: RateLimit ${g.headers.get('ratelimit')}`);
  }
}

export async function runForward(o = {}) {
  const ROUNDS = o.rounds ?? envNum('BENCH_ROUNDS', 3, 1, 50);
  const SECONDS = o.seconds ?? envNum('BENCH_SECONDS', 3, 0.5, 120);
  const CONNECTIONS = o.connections ?? envNum('BENCH_CONNECTIONS', 50, 1, 2000);
  const WARMUP = envNum('BENCH_WARMUP_SECONDS', 3, 0, 30);
  const targetIds = o.targets ?? (process.env.BENCH_TARGETS ?? DEFAULT_TARGETS.join(',')).split(',').map((s) => s.trim()).filter(Boolean);
  const routeIds = (process.env.BENCH_ROUTES ?? 'list20,list100,get,create').split(',').map((s) => s.trim()).filter(Boolean);
  for (const id of targetIds) if (!(id in TARGETS)) throw new Error(`BENCH_TARGETS: unknown target ${id}`);
  for (const id of routeIds) if (!(id in ROUTES)) throw new Error(`BENCH_ROUTES: unknown route ${id}`);
  if (!targetIds.includes('bare')) throw new Error('BENCH_TARGETS must include bare: ratios are against it');
  const log = o.log ?? ((s) => process.stderr.write(s + '\n'));

  const upstream = await startTarget('upstream');
  const targets = [];
  const ctx = {};
  try {
    // One redis-server for the targets that need it, stopped in `finally` (and killed with the other
    // children if this process dies).
    if (targetIds.some((id) => TARGETS[id].redis)) {
      ctx.redis = await startRedis();
      log(`  redis-server ${ctx.redis.version} on ${ctx.redis.url} (pid ${ctx.redis.pid})`);
    }
    for (const id of targetIds) {
      const p = await TARGETS[id].start(upstream, ctx);
      targets.push({ id, ...TARGETS[id], url: p.url, pid: p.pid, stop: p.stop, rssStart: statusMb(p.pid) });
    }
    for (const t of targets) await verify(t);
    if (ctx.redis !== undefined) {
      // The limit really is in Redis: one listPets (no deprecation record) is one script call there.
      for (const t of targets.filter((x) => x.redis)) {
        const before = await redisState(ctx.redis.url);
        const r = await call(`${t.url}/v1/pets?limit=20`, { headers: { authorization: AUTH } });
        const after = await redisState(ctx.redis.url);
        const calls = after.scriptCalls - before.scriptCalls;
        if (calls < 1) throw new Error(`${t.name}: a listPets (${r.status}, RateLimit ${r.headers.get('ratelimit')}) made no script call in ${ctx.redis.url}: the rate limit did not go through Redis`);
        log(`  ${t.id}: one listPets, ${r.status}, RateLimit ${r.headers.get('ratelimit')}: ${calls} script call(s) in Redis (${after.dbsize} keys)`);
      }
    }
    // Warm-up (not counted): every route once through the JIT.
    if (WARMUP > 0) {
      const requests = Object.values(ROUTES).map((r) => ({ method: r.method, path: r.path, body: r.body, headers: { authorization: AUTH, ...r.headers } }));
      for (const t of targets) await load(t.url, { requests, connections: CONNECTIONS, duration: WARMUP });
    }

    const results = {}; // results[route][target] = [round results]
    const started = Date.now();
    const redisCpu0 = ctx.redis === undefined ? 0 : cpuMs(ctx.redis.pid);
    const redisState0 = ctx.redis === undefined ? undefined : await redisState(ctx.redis.url);
    for (const [ri, routeId] of routeIds.entries()) {
      results[routeId] = Object.fromEntries(targets.map((t) => [t.id, []]));
      for (let r = 0; r < ROUNDS; r++) {
        for (const t of rotate(targets, r + ri)) {
          const res = await measured(t.url, [t.pid], { ...loadOptions(ROUTES[routeId]), connections: CONNECTIONS, duration: SECONDS });
          if (res.non2xx > 0 || res.errors > 0 || res.timeouts > 0) {
            throw new Error(`${t.name} ${ROUTES[routeId].name}: ${res.non2xx} non-2xx ${JSON.stringify(res.statuses)}, ${res.errors} errors, ${res.timeouts} timeouts`);
          }
          results[routeId][t.id].push(res);
          log(`  ${ROUTES[routeId].name.padEnd(24)} round ${r + 1}/${ROUNDS} ${t.id.padEnd(22)} ${fmt(res.rps).padStart(6)} req/s  p99 ${res.p99.toFixed(1).padStart(6)} ms  ${fmt(res.cpuUsPerReq).padStart(5)} µs CPU/req`);
        }
      }
    }
    const elapsed = (Date.now() - started) / 1000;
    const hwm = Object.fromEntries(targets.map((t) => [t.id, statusMb(t.pid, 'VmHWM')]));
    // Every measured request of the redis targets made (at least) one script call in Redis (GCRA;
    // the deprecation report adds one per second), and what Redis' own CPU per request was.
    let redisNote = '';
    if (ctx.redis !== undefined) {
      const redisCpu = cpuMs(ctx.redis.pid) - redisCpu0;
      const after = await redisState(ctx.redis.url);
      const ids = targets.filter((t) => t.redis).map((t) => t.id);
      const requestsOf = (r) => ids.reduce((m, id) => m + results[r][id].reduce((k, x) => k + x.total, 0), 0);
      const requests = routeIds.reduce((n, r) => n + requestsOf(r), 0);
      const expected = routeIds.reduce((n, r) => n + requestsOf(r) * redisCallsPerRequest(r), 0);
      const calls = after.scriptCalls - redisState0.scriptCalls;
      log(`  redis: ${fmt(calls)} script calls for ${fmt(requests)} measured requests (at least ${fmt(expected)} expected); ${after.dbsize} keys; redis-server CPU ${fmt((redisCpu * 1000) / Math.max(1, requests), 1)} µs/req`);
      // More is fine (requests in flight when a round stopped are not counted), fewer is not.
      if (calls < expected) throw new Error(`redis target: ${calls} script calls in Redis for ${requests} measured requests (${expected} expected): not every request went through Redis`);
      redisNote = `Target ${ids.join(', ')}: redis-server ${ctx.redis.version} (its own process on 127.0.0.1, no persistence; its CPU is not in the target's CPU/req); ${fmt(calls)} script calls (EVALSHA) in Redis for ${fmt(requests)} measured requests (one GCRA decision per request; the deprecation report's counts are written once a second), Redis CPU ${fmt((redisCpu * 1000) / Math.max(1, requests), 1)} µs per request.`;
    }

    // Summaries: medians per target and route; ratios paired by round against bare.
    const summary = {};
    for (const routeId of routeIds) {
      summary[routeId] = {};
      const base = results[routeId].bare;
      for (const t of targets) {
        const rs = results[routeId][t.id];
        const paired = (f) => rs.map((x, i) => f(x) / f(base[i]));
        const range = (xs) => [Math.min(...xs), Math.max(...xs)];
        summary[routeId][t.id] = {
          rps: median(rs.map((x) => x.rps)),
          p50: median(rs.map((x) => x.p50)),
          p99: median(rs.map((x) => x.p99)),
          cpuUs: median(rs.map((x) => x.cpuUsPerReq)),
          perCpuS: median(rs.map((x) => 1e6 / x.cpuUsPerReq)),
          peakRss: Math.max(...rs.map((x) => x.peakRssMb)),
          rpsX: median(paired((x) => x.rps)),
          rpsXRange: range(paired((x) => x.rps)),
          p99X: median(paired((x) => x.p99)),
          p99XRange: range(paired((x) => x.p99)),
          p50X: median(paired((x) => x.p50)),
          cpuX: median(paired((x) => x.cpuUsPerReq)),
          cpuXRange: range(paired((x) => x.cpuUsPerReq)),
          perCpuX: median(paired((x) => 1 / x.cpuUsPerReq)),
          rounds: rs.map((x) => ({ rps: x.rps, p50: x.p50, p99: x.p99, cpuUs: x.cpuUsPerReq, peakRss: x.peakRssMb })),
        };
      }
      // The http-proxy-3 engine against its own bare library, paired by round.
      if (results[routeId]['bare-hp3'] && results[routeId]['http-proxy-3']) {
        const b = results[routeId]['bare-hp3'];
        const g = results[routeId]['http-proxy-3'];
        summary[routeId].hp3OverBare = median(g.map((x, i) => x.rps / b[i].rps));
        summary[routeId].hp3OverBareRange = [Math.min(...g.map((x, i) => x.rps / b[i].rps)), Math.max(...g.map((x, i) => x.rps / b[i].rps))];
      }
      // Built-in vs the same gateway (engine undici) forwarding to the upstream, paired by round.
      if (results[routeId].builtin && results[routeId].undici) {
        const b = results[routeId].builtin;
        const f = results[routeId].undici;
        summary[routeId].builtinOverForward = median(b.map((x, i) => x.rps / f[i].rps));
        summary[routeId].builtinOverForwardRange = [Math.min(...b.map((x, i) => x.rps / f[i].rps)), Math.max(...b.map((x, i) => x.rps / f[i].rps))];
      }
    }

    const header = `${ROUNDS} interleaved rounds (order rotated each round) of ${SECONDS} s per target per route, ${CONNECTIONS} connections, keep-alive, after a ${WARMUP} s warm-up of every target; ${elapsed.toFixed(0)} s of load. The upstream (reference backend on node:http, its own process) serves ${SEED_PETS} animals. Ratios: each round's figure over bare forwarding's in the same round, median over rounds (range in brackets).`;
    const rows = [];
    for (const routeId of routeIds) {
      for (const t of targets) {
        const s = summary[routeId][t.id];
        const isBase = t.id === 'bare';
        rows.push([
          ROUTES[routeId].name,
          t.name,
          fmt(s.rps),
          isBase ? '1.00' : `**${ratio(s.rpsX)}** [${ratio(s.rpsXRange[0])}–${ratio(s.rpsXRange[1])}]`,
          s.p50.toFixed(1),
          s.p99.toFixed(1),
          isBase ? '1.00' : `**${ratio(s.p99X)}** [${ratio(s.p99XRange[0])}–${ratio(s.p99XRange[1])}]`,
          fmt(s.cpuUs),
          isBase ? '1.00' : `**${ratio(s.cpuX)}** [${ratio(s.cpuXRange[0])}–${ratio(s.cpuXRange[1])}]`,
          fmt(s.perCpuS),
          isBase ? '1.00' : `**${ratio(s.perCpuX)}**`,
        ]);
      }
    }
    const main = table(['route', 'target', 'req/s', 'req/s ×bare', 'p50 ms', 'p99 ms', 'p99 ×bare', 'CPU µs/req', 'CPU/req ×bare', 'req per CPU-s', 'req/CPU-s ×bare'], rows);
    const memRows = targets.map((t) => [t.name, fmt(t.rssStart, 1), fmt(Math.max(...routeIds.map((r) => summary[r][t.id].peakRss)), 1), fmt(hwm[t.id], 1), ratio(hwm[t.id] / hwm.bare)]);
    const mem = table(['target', 'RSS after start MB', 'peak sampled VmRSS MB', 'VmHWM at end MB', 'VmHWM ×bare'], memRows);
    const builtinRows = routeIds
      .filter((r) => summary[r].builtinOverForward !== undefined)
      .map((r) => [ROUTES[r].name, `**${ratio(summary[r].builtinOverForward)}** [${ratio(summary[r].builtinOverForwardRange[0])}–${ratio(summary[r].builtinOverForwardRange[1])}]`]);
    const builtinTable = builtinRows.length === 0 ? '' : table(['route', 'req/s built-in ÷ req/s same gateway forwarding (undici)'], builtinRows);
    const hp3Rows = routeIds
      .filter((r) => summary[r].hp3OverBare !== undefined)
      .map((r) => [ROUTES[r].name, `**${ratio(summary[r].hp3OverBare)}** [${ratio(summary[r].hp3OverBareRange[0])}–${ratio(summary[r].hp3OverBareRange[1])}]`]);
    const hp3Table = hp3Rows.length === 0 ? '' : table(['route', 'req/s engine http-proxy-3 ÷ req/s bare http-proxy-3'], hp3Rows);
    const markdown = [
      '### Side by side: forwarding, all policies, built-in backend',
      '',
      header,
      '',
      main,
      '',
      'Memory of each target process over the whole matrix (POSTs add animals to the built-in backend\'s store, so its RSS grows by design):',
      '',
      mem,
      '',
      ...(redisNote === '' ? [] : [redisNote, '']),
      builtinTable,
      '',
      hp3Table,
    ].join('\n');
    return { markdown, summary, targets: targets.map((t) => ({ id: t.id, name: t.name })), routes: routeIds, hwm, settings: { ROUNDS, SECONDS, CONNECTIONS, WARMUP } };
  } finally {
    for (const t of targets) await t.stop();
    await upstream.stop();
    await ctx.redis?.stop();
  }
}

if (isMain(import.meta.url)) {
  const m = machine();
  const r = await runForward();
  console.log(`node ${m.node}, ${m.nproc} × ${m.model}, load ${m.loadavg}, ${m.date}\n`);
  console.log(r.markdown);
  process.exit(0);
}
