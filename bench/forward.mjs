// Side by side, in one run, interleaved rounds: bare @fastify/http-proxy (no policy) vs the gateway
// with every policy on (engines undici, fastify and http-proxy-3, to the same upstream process), the
// same with response-contract in monitor mode, and the gateway with its built-in backend. Four
// routes: GET /v1/pets?limit=20, ?limit=100, GET /v1/pets/7, POST /v1/pets. For each target and
// route: req/s, p50/p99 latency (exact, from every response), CPU time per request of the target
// process (/proc/<pid>/stat utime+stime before and after each round), peak RSS (sampled VmRSS,
// and VmHWM at the end). Ratios are paired: each round's figure over bare forwarding's figure in
// the same round, then the median over rounds.
//
//   npm run build && node bench/forward.mjs
//
// Environment: BENCH_ROUNDS (3), BENCH_SECONDS (3, per round per target per route),
// BENCH_CONNECTIONS (50), BENCH_WARMUP_SECONDS (1), BENCH_TARGETS (comma list of
// bare,bare-hp3,undici,fastify,http-proxy-3,no-ops,monitor,builtin,builtin-fastify,builtin-http-proxy-3,direct;
// default bare,bare-hp3,undici,fastify,http-proxy-3,builtin),
// BENCH_ROUTES (list20,list100,get,create).
import { join } from 'node:path';
import { AUTH, NEW_PET, call, envNum, fmt, isMain, machine, measured, load, median, ratio, rotate, startProcess, startTarget, statusMb, table } from './lib.mjs';
import { SEED_PETS } from './fixtures.mjs';

export const TARGETS = {
  direct: { name: 'upstream direct (no proxy)', gateway: false, start: (up) => ({ ...up, stop: async () => {} }) },
  bare: { name: 'bare @fastify/http-proxy', gateway: false, start: (up) => startTarget('bare-proxy', up.url) },
  'bare-hp3': { name: 'bare http-proxy-3 (node:http)', gateway: false, start: (up) => startTarget('bare-http-proxy-3', up.url) },
  // BENCH_BASELINE=/path/to/an/older/checkout (built): that checkout's gateway, engine undici, to
  // compare two versions of the gateway in one run.
  baseline: {
    name: 'gateway, engine undici, BENCH_BASELINE checkout',
    gateway: true,
    start: (up) => startProcess([join(process.env.BENCH_BASELINE ?? '.', 'bench', 'target.mjs'), 'gateway', up.url, '--engine', 'undici'], { cwd: process.env.BENCH_BASELINE }),
  },
  'no-ops': { name: 'gateway, engine undici, ops off', gateway: true, start: (up) => startTarget('gateway', up.url, '--engine', 'undici', '--ops', 'off') },
  undici: { name: 'gateway, engine undici (default)', gateway: true, start: (up) => startTarget('gateway', up.url, '--engine', 'undici') },
  fastify: { name: 'gateway, engine fastify', gateway: true, start: (up) => startTarget('gateway', up.url, '--engine', 'fastify') },
  'http-proxy-3': { name: 'gateway, engine http-proxy-3', gateway: true, start: (up) => startTarget('gateway', up.url, '--engine', 'http-proxy-3') },
  monitor: { name: 'gateway, undici + response-contract monitor', gateway: true, start: (up) => startTarget('gateway', up.url, '--engine', 'undici', '--contract', 'monitor') },
  builtin: { name: 'gateway, built-in backend (undici)', gateway: true, builtin: true, start: () => startTarget('gateway', 'builtin', '--engine', 'undici') },
  'builtin-fastify': { name: 'gateway, built-in backend (fastify)', gateway: true, builtin: true, start: () => startTarget('gateway', 'builtin', '--engine', 'fastify') },
  'builtin-http-proxy-3': { name: 'gateway, built-in backend (http-proxy-3)', gateway: true, builtin: true, start: () => startTarget('gateway', 'builtin', '--engine', 'http-proxy-3') },
};

export const ROUTES = {
  list20: { name: 'GET /v1/pets?limit=20', path: '/v1/pets?limit=20', method: 'GET' },
  list100: { name: 'GET /v1/pets?limit=100', path: '/v1/pets?limit=100', method: 'GET' },
  get: { name: 'GET /v1/pets/{id}', path: '/v1/pets/7', method: 'GET' },
  create: { name: 'POST /v1/pets', path: '/v1/pets', method: 'POST', body: NEW_PET, headers: { 'content-type': 'application/json' } },
};

function loadOptions(route) {
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
}

export async function runForward(o = {}) {
  const ROUNDS = o.rounds ?? envNum('BENCH_ROUNDS', 3, 1, 50);
  const SECONDS = o.seconds ?? envNum('BENCH_SECONDS', 3, 0.5, 120);
  const CONNECTIONS = o.connections ?? envNum('BENCH_CONNECTIONS', 50, 1, 2000);
  const WARMUP = envNum('BENCH_WARMUP_SECONDS', 1, 0, 30);
  const targetIds = (process.env.BENCH_TARGETS ?? 'bare,bare-hp3,undici,fastify,http-proxy-3,builtin').split(',').map((s) => s.trim()).filter(Boolean);
  const routeIds = (process.env.BENCH_ROUTES ?? 'list20,list100,get,create').split(',').map((s) => s.trim()).filter(Boolean);
  for (const id of targetIds) if (!(id in TARGETS)) throw new Error(`BENCH_TARGETS: unknown target ${id}`);
  for (const id of routeIds) if (!(id in ROUTES)) throw new Error(`BENCH_ROUTES: unknown route ${id}`);
  if (!targetIds.includes('bare')) throw new Error('BENCH_TARGETS must include bare: ratios are against it');
  const log = o.log ?? ((s) => process.stderr.write(s + '\n'));

  const upstream = await startTarget('upstream');
  const targets = [];
  try {
    for (const id of targetIds) {
      const p = await TARGETS[id].start(upstream);
      targets.push({ id, ...TARGETS[id], url: p.url, pid: p.pid, stop: p.stop, rssStart: statusMb(p.pid) });
    }
    for (const t of targets) await verify(t);
    // Warm-up (not counted): every route once through the JIT.
    if (WARMUP > 0) {
      const requests = Object.values(ROUTES).map((r) => ({ method: r.method, path: r.path, body: r.body, headers: { authorization: AUTH, ...r.headers } }));
      for (const t of targets) await load(t.url, { requests, connections: CONNECTIONS, duration: WARMUP });
    }

    const results = {}; // results[route][target] = [round results]
    const started = Date.now();
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
      builtinTable,
      '',
      hp3Table,
    ].join('\n');
    return { markdown, summary, targets: targets.map((t) => ({ id: t.id, name: t.name })), routes: routeIds, hwm, settings: { ROUNDS, SECONDS, CONNECTIONS, WARMUP } };
  } finally {
    for (const t of targets) await t.stop();
    await upstream.stop();
  }
}

if (isMain(import.meta.url)) {
  const m = machine();
  const r = await runForward();
  console.log(`node ${m.node}, ${m.nproc} × ${m.model}, load ${m.loadavg}, ${m.date}\n`);
  console.log(r.markdown);
  process.exit(0);
}
