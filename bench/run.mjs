// `npm run bench`: every measurement of the gateway in one run, on this machine, side by side,
// and BENCHMARKS.md rewritten between its `bench` markers (the rest of the file is kept):
//   1. bench/chain.mjs    the policy chain alone (fresh process)
//   2. bench/growth.mjs   cost growth: body size, list length, number of keys, 1M unknown keys (fresh process, --expose-gc)
//   3. bench/forward.mjs  bare @fastify/http-proxy and bare http-proxy-3 vs the gateway (three engines, everything on) vs built-in, 4 routes,
//                         and the gateway with its rate limit in Redis (target redis) when redis-server is installed (else a note says so)
//   4. bench/peers.mjs    the gateway (this machine's Node and Node 24) beside direct, nginx, nginx + Lua, bare
//                         @fastify/http-proxy, bare http-proxy-3, floor and fast-gateway, under autocannon and wrk,
//                         with the goals against the peers (written between the `peers` markers), and a
//                         chart per route (req/s and p99 per target, both generators) in bench/charts/
//   5. bench/scaling.mjs  connections 10..1,000, memory under 1,000 connections and distinct keys, body size over sockets
//   6. bench/workers.mjs  serve --workers 1 vs 2 (when the CLI has --workers)
//   7. bench/tls.mjs      HTTPS/1.1 (wrk) and HTTP/2 (h2load) beside nginx with the same certificate
//   8. bench/registry.mjs a registry key against a file key in the auth policy, Redis commands counted
//   9. bench/cache.mjs    the response cache's memory bound under 1,000,000 distinct keys (fresh process,
//                         --expose-gc); then bench/ab.mjs pairs: cached against builtin (autocannon, and wrk
//                         when installed) and against undici, each loaded together on one core
//  10. costs              bench/ab.mjs pairs: the per-connection in-flight bound off vs on, the response
//                         contract off vs enforce, each loaded together on one core
//  11. goals              bench/ab.mjs pairs for the performance goals: the gateway (everything on)
//                         against floor (req/s, goal ≥ 0.85) and against bare http-proxy-3 (p99, goal
//                         ≤ 1.00), each loaded together on one core, under autocannon and wrk
//  12. bench/shadow.mjs   the migration lane's shadow mode beside nginx's `mirror`, with the same slow
//                         mirror (500 ms): the primary's req/s and p99 with and without the copies, under
//                         autocannon and wrk, interleaved rounds (markers shadow)
//  13. bench/traces.mjs   what tracing costs: gateways through the CLI on Node 24, tracing off against
//                         sampleRatio 1.0 and 0.1, exporting to a counting sink collector, pinned pairs
//                         loaded together under autocannon and wrk, the spans received counted (markers traces)
//  14. bench/profile.mjs  only with BENCH_PROFILE=1 (else `npm run bench:profile`)
// then the targets of the issue, each met or not and by how much.
//
//   npm run build && node bench/run.mjs [--no-write]
//
// Every knob is an environment variable, documented at the top of each script (BENCH_TARGETS, when
// set, is the forward matrix's whole target list: redis is then added only if it names it); BENCH_SKIP takes a
// comma list of chain,growth,forward,peers,scaling,workers,tls,registry,cache,costs,goals,shadow,traces to leave out (their
// section then says so); BENCH_PROFILE=1 adds the profiles; BENCH_MAX_MINUTES (45) bounds the whole run;
// BENCH_CHARTS_DIR puts the peers charts elsewhere than bench/charts (with --no-write, only when set).
// Sections 7-10, 12 and 13 write their own blocks of BENCHMARKS.md (markers tls, registry, cache, costs, shadow, traces), each
// with its figures and the goals of its issue. Their knobs: BENCH_TLS_* (bench/tls.mjs), BENCH_REG_*
// (bench/registry.mjs), BENCH_CACHE_* (bench/cache.mjs; BENCH_CACHE_AB_EPOCHS (4) and BENCH_CACHE_AB_RUNS (3)
// for the cache pairs, which take the costs' seconds and warm-up), BENCH_COST_EPOCHS (4 process pairs),
// BENCH_COST_RUNS (3 runs), BENCH_COST_SECONDS (2 s per run), BENCH_COST_WARMUP (2 s per route) for
// the costs pairs (BENCH_ROUTES applies); BENCH_GOAL_EPOCHS (3 process pairs) and BENCH_GOAL_RUNS (2
// runs) for the goals pairs, which take the costs' seconds and warm-up (markers goals); BENCH_TRACES_*
// (bench/traces.mjs) for the traces section.
import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { REDIS_SERVER, ROOT, envNum, fmt, machine, median, pin, ratio, redisServerVersion, runJsonChild, table, wrkVersion, writeSection } from './lib.mjs';
import { DEFAULT_TARGETS, ROUTES, runForward } from './forward.mjs';
import { CHARTS_DIR, runPeers, writeCharts } from './peers.mjs';
import { runAb } from './ab.mjs';
import { runRegistry } from './registry.mjs';
import { runTls } from './tls.mjs';
import { runProfile } from './profile.mjs';
import { runScaling } from './scaling.mjs';
import { runShadow } from './shadow.mjs';
import { runTraces } from './traces.mjs';
import { runWorkers } from './workers.mjs';

const started = Date.now();
// A run is bounded as a whole too: children are killed on exit (bench/lib.mjs).
const MAX_MINUTES = Number(process.env.BENCH_MAX_MINUTES ?? 45);
setTimeout(() => {
  process.stderr.write(`bench: still running after ${MAX_MINUTES} min (BENCH_MAX_MINUTES): stopped\n`);
  process.exit(1);
}, MAX_MINUTES * 60_000).unref();
const skip = new Set((process.env.BENCH_SKIP ?? '').split(',').map((s) => s.trim()).filter(Boolean));
const log = (s) => process.stderr.write(s + '\n');
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(0)} s`;
const m = machine();
log(`bench: node ${m.node}, ${m.nproc} × ${m.model}, load average ${m.loadavg}`);

async function section(name, fn) {
  if (skip.has(name)) {
    log(`bench: ${name} skipped (BENCH_SKIP)`);
    return undefined;
  }
  log(`bench: ${name} ... (${elapsed()})`);
  const r = await fn();
  log(`bench: ${name} done (${elapsed()})`);
  return r;
}

const chain = await section('chain', () => runJsonChild('chain.mjs'));
const growth = await section('growth', () => runJsonChild('growth.mjs', { execArgv: ['--expose-gc'] }));
// The forward matrix: its default targets, and the Redis rate limit when redis-server is here (the
// matrix starts and stops its own). BENCH_TARGETS, when set, is taken as it is.
let redisNote;
function forwardTargets() {
  const version = redisServerVersion();
  if (process.env.BENCH_TARGETS) {
    if (process.env.BENCH_TARGETS.split(',').some((t) => t.trim() === 'redis')) redisNote = `redis-server ${version ?? '(not found)'} (target redis of BENCH_TARGETS)`;
    return undefined;
  }
  if (version === undefined) {
    redisNote = `not measured: ${REDIS_SERVER} is not installed on this machine, so the forward matrix left out its redis target`;
    log(`bench: note: ${REDIS_SERVER} not found: the forward matrix runs without the redis target (install redis-server to include it)`);
    return [...DEFAULT_TARGETS, 'cached'];
  }
  redisNote = `redis-server ${version} (started by bench/forward.mjs for its redis target: the gateway, engine undici, with its rate limit in Redis)`;
  // `cached`: the response cache against forwarding (undici) and the built-in backend (issue 29's goals).
  return [...DEFAULT_TARGETS, 'cached', 'redis'];
}
const forward = await section('forward', () => runForward({ log, targets: forwardTargets() }));
const peers = await section('peers', () => runPeers({ log }));
const scaling = await section('scaling', () => runScaling({ log }));
const workers = await section('workers', () => runWorkers({ log }));
const tls = await section('tls', () => runTls());
const registry = await section('registry', () => (redisServerVersion() === undefined ? { markdown: `### Key registry: the cost of a registry key\n\nNot measured: ${REDIS_SERVER} is not installed.` } : runRegistry()));
const cacheBound = await section('cache', () => runJsonChild('cache.mjs', { execArgv: ['--expose-gc'] }));
const cachePairs = skip.has('cache') ? undefined : await section('cache pairs', () => runCachePairs());
const costs = await section('costs', () => runCosts());
const goals = await section('goals', () => runGoals());
const shadow = await section('shadow', () => runShadow({ log }));
const traces = await section('traces', () => runTraces({ log }));
const profile = process.env.BENCH_PROFILE === '1' ? await section('profile', () => runProfile({ log })) : undefined;

/**
 * What the per-connection and per-consumer in-flight bounds and the response contract cost (goal:
 * each at most 3% of req/s on each route): three bench/ab.mjs pairs, each B against A loaded at the
 * same time on one core.
 */
async function runCosts() {
  const o = {
    log,
    epochs: envNum('BENCH_COST_EPOCHS', 4, 1, 200),
    runs: envNum('BENCH_COST_RUNS', 3, 1, 100),
    seconds: envNum('BENCH_COST_SECONDS', 2, 0.5, 30),
    warmup: envNum('BENCH_COST_WARMUP', 2, 0.5, 60),
  };
  const pairs = [
    ['bound-off', 'bound-on', 'the per-connection in-flight bound (server.maxInFlightPerConnection, 8): the undici handler on node:http, every policy on, ops off, without (A) and with (B) the bound'],
    ['undici', 'contract', 'the response contract: the gateway (engine undici, everything on) without (A) and with (B) response-contract in enforce mode'],
    ['consumer-bound-off', 'undici', 'the per-consumer in-flight bound (server.maxInFlightPerConsumer, 128): the gateway (engine undici, everything on) without (A) and with (B) the bound, one key never past it'],
  ];
  const out = [];
  for (const [a, b, what] of pairs) {
    log(`bench: costs: ${b} against ${a}`);
    const r = await runAb({ ...o, ab: `${a},${b}` });
    // runAb pins this process to the load generator's CPUs; the next pair and sections get them all back.
    if (cpus().length >= 2) pin(process.pid, `0-${cpus().length - 1}`);
    out.push({ what, ...r, verdicts: Object.fromEntries(Object.entries(r.rps).map(([route, xs]) => [route, median(xs)])) });
  }
  const rows = out.flatMap((p) => Object.entries(p.verdicts).map(([route, x]) => [p.what.split(':')[0], ROUTES[route].name, ratio(x), x >= 0.97 ? 'met' : '**not met**']));
  const markdown = [
    '### What the per-connection bound and the response contract cost',
    '',
    'Goal: each costs at most 3% of req/s on each route (req/s with ÷ req/s without ≥ 0.97).',
    '',
    table(['cost of', 'route', 'req/s with ÷ without (median over process pairs)', 'verdict'], rows),
    '',
    ...out.flatMap((p) => [`#### ${p.what}`, '', p.markdown, '']),
  ].join('\n');
  return { pairs: out, markdown };
}

/**
 * The performance goals, measured as the costs are (bench/ab.mjs pairs loaded together on one
 * core, under each load generator): the gateway with everything on (target undici) at least 0.85 of
 * floor's req/s (node:http + an undici Pool, nothing else: the ceiling of this stack), and its p99
 * no higher than bare http-proxy-3's, on every route.
 */
async function runGoals() {
  const o = {
    log,
    epochs: envNum('BENCH_GOAL_EPOCHS', 3, 1, 200),
    runs: envNum('BENCH_GOAL_RUNS', 2, 1, 100),
    seconds: envNum('BENCH_COST_SECONDS', 2, 0.5, 30),
    warmup: envNum('BENCH_COST_WARMUP', 2, 0.5, 60),
  };
  const generators = ['autocannon', ...(wrkVersion() === undefined ? [] : ['wrk'])];
  const goals = [
    { a: 'floor', what: 'req/s ÷ floor', target: '≥ 0.85', pick: (r) => r.rps, met: (x) => x >= 0.85 },
    { a: 'bare-hp3', what: 'p99 ÷ bare http-proxy-3', target: '≤ 1.00', pick: (r) => r.p99Ratio, met: (x) => x <= 1 },
  ];
  const runs = [];
  for (const g of goals) {
    for (const generator of generators) {
      log(`bench: goals: undici against ${g.a} (${generator})`);
      const r = await runAb({ ...o, ab: `${g.a},undici`, generator });
      if (cpus().length >= 2) pin(process.pid, `0-${cpus().length - 1}`);
      runs.push({ goal: g, generator, r });
    }
  }
  const routeIds = Object.keys(runs[0]?.r.rps ?? {});
  const rows = runs.map(({ goal, generator, r }) => {
    const cells = routeIds.map((id) => median(goal.pick(r)[id]));
    const missed = cells.filter((x) => !goal.met(x)).length;
    return [`${goal.what} ${goal.target} (${generator})`, ...cells.map((x) => `${ratio(x)}${goal.met(x) ? '' : ' ✗'}`), missed === 0 ? 'met' : `**not met** on ${missed} of ${cells.length} routes`];
  });
  const markdown = [
    '## The performance goals, co-scheduled',
    '',
    `The gateway (engine undici, everything on) and the other target pinned to one core and loaded together (bench/ab.mjs), ${o.epochs} fresh pairs of processes, ${o.runs} runs of ${o.seconds} s per route: each cell is the median over process pairs. Node ${process.versions.node} runs the targets.`,
    '',
    table(['goal (load generator)', ...routeIds.map((id) => ROUTES[id].name), 'verdict'], rows),
    '',
    ...runs.flatMap(({ goal, generator, r }) => [`### undici against ${goal.a}, ${generator}`, '', r.markdown, '']),
  ].join('\n');
  return { runs, markdown };
}

/**
 * The response cache's req/s goals (a hit at least the built-in backend's req/s, at least twice the
 * same gateway forwarding), measured as the costs are: bench/ab.mjs pairs loaded together on one
 * core. The forward matrix runs its targets one after the other, and on a shared VM one target's
 * req/s moved by up to 60% between its rounds: too much for a goal of 1.0. The built-in pair runs
 * under autocannon and under wrk (when installed), the forwarding pair under autocannon.
 */
async function runCachePairs() {
  const only = process.env.BENCH_ROUTES?.split(',').map((r) => r.trim());
  const o = {
    log,
    routes: ['list20', 'list100', 'get'].filter((r) => only === undefined || only.includes(r)),
    epochs: envNum('BENCH_CACHE_AB_EPOCHS', 4, 1, 200),
    runs: envNum('BENCH_CACHE_AB_RUNS', 3, 1, 100),
    seconds: envNum('BENCH_COST_SECONDS', 2, 0.5, 30),
    warmup: envNum('BENCH_COST_WARMUP', 2, 0.5, 60),
  };
  if (o.routes.length === 0) return undefined;
  const pairs = [
    { a: 'builtin', goal: 1, generator: 'autocannon' },
    { a: 'builtin', goal: 1, generator: 'wrk' },
    { a: 'undici', goal: 2, generator: 'autocannon' },
  ];
  const out = [];
  for (const p of pairs) {
    if (p.generator === 'wrk' && wrkVersion() === undefined) {
      out.push({ ...p, skipped: 'wrk is not installed' });
      continue;
    }
    log(`bench: cache pairs: cached against ${p.a} (${p.generator})`);
    const r = await runAb({ ...o, ab: `${p.a},cached`, generator: p.generator });
    if (cpus().length >= 2) pin(process.pid, `0-${cpus().length - 1}`);
    out.push({ ...p, ...r });
  }
  return out;
}

/** The response cache: its memory bound, and the `cached` target against forwarding and the built-in backend. */
function cacheMarkdown() {
  const lines = ['### The response cache', ''];
  if (cacheBound === undefined) lines.push('The memory bound was skipped (BENCH_SKIP).');
  else {
    const c = cacheBound;
    lines.push(
      table(
        ['goal', 'measured', 'verdict'],
        [[`memory bound under ${fmt(c.keys)} distinct keys (maxBytes ${fmt(c.maxBytes)})`, `at most ${fmt(c.worstHeldBytes)} bytes held by the store's count, ${fmt(c.entries)} entries at the end; heap after GC +${fmt(c.heapGrowthMb, 1)} MB`, c.held ? 'met' : '**not met**']],
      ),
    );
  }
  lines.push('');
  if (cachePairs !== undefined) {
    const measuredPairs = cachePairs.filter((p) => p.skipped === undefined);
    const against = (p) => (p.a === 'builtin' ? 'the built-in backend' : 'the same gateway forwarding (undici)');
    lines.push(
      `Loaded together on one core (bench/ab.mjs), req/s of a hit ÷ req/s of the other target: the median over process pairs. Goals: ≥ 1 against the built-in backend, ≥ 2 against forwarding.`,
      '',
      table(
        ['route', ...measuredPairs.map((p) => `cached ÷ ${p.a === 'builtin' ? 'built-in' : 'undici'}, ${p.generator} (goal ≥ ${p.goal})`), 'verdict'],
        measuredPairs[0] === undefined
          ? []
          : Object.keys(measuredPairs[0].rps).map((route) => {
              const values = measuredPairs.map((p) => median(p.rps[route]));
              return [ROUTES[route].name, ...values.map((v) => ratio(v)), values.every((v, i) => v >= measuredPairs[i].goal) ? 'met' : '**not met**'];
            }),
      ),
      '',
      ...cachePairs.flatMap((p) => [`#### A hit against ${against(p)}, ${p.generator}`, '', p.skipped ?? p.markdown, '']),
      'The forward matrix above, for reference (its targets one after the other, paired by round):',
      '',
    );
  }
  const routes = forward === undefined ? [] : forward.routes.filter((r) => forward.summary[r].cached !== undefined && forward.summary[r].undici !== undefined);
  if (routes.length === 0) lines.push('The `cached` target was not measured (forward skipped, or BENCH_TARGETS without cached and undici).');
  else {
    const pair = (r, other) => {
      const c = forward.summary[r].cached.rounds;
      const o = forward.summary[r][other]?.rounds;
      return o === undefined ? NaN : median(c.map((x, i) => x.rps / o[i].rps));
    };
    lines.push(
      cachePairs === undefined
        ? 'From the forward matrix (req/s paired by round, median). Goals: cached ≥ 2× the same gateway forwarding (undici) and ≥ the built-in backend. createPet is not cacheable: its row shows the cost of a miss path, not a goal.'
        : 'createPet is not cacheable: its row shows the cost of a miss path. The verdict is the pairs\' above.',
      '',
      table(
        ['route', 'cached ÷ undici', 'cached ÷ builtin', ...(cachePairs === undefined ? ['verdict'] : [])],
        routes.map((r) => {
          const f = pair(r, 'undici');
          const b = pair(r, 'builtin');
          const goal = r === 'create' ? 'no goal (POST)' : f >= 2 && (Number.isNaN(b) || b >= 1) ? 'met' : '**not met**';
          return [ROUTES[r].name, ratio(f), ratio(b), ...(cachePairs === undefined ? [goal] : [])];
        }),
      ),
    );
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// The targets of the issue

const verdicts = [];
function margin(value, bound, atMost) {
  const met = atMost ? value <= bound : value >= bound;
  const pct = atMost ? (value / bound - 1) * 100 : (1 - value / bound) * 100;
  return { met, text: met ? `met (${fmt(Math.abs(pct), 0)}% ${atMost ? 'under' : 'above'} the bound)` : `**not met** (${fmt(Math.abs(pct), 0)}% ${atMost ? 'over' : 'short'})` };
}

if (forward !== undefined) {
  // The targets, with everything on (access log, metrics, header rules, a memory rate limit
  // that never trips): each engine against its own bare library, req/s paired by round.
  const routesOf = (f) => forward.routes.map((r) => f(forward.summary[r]));
  const criteria = [
    { criterion: 'req/s ≥ 1.5× bare @fastify/http-proxy', who: 'gateway, engine undici', values: routesOf((s) => s.undici?.rpsX), bound: 1.5, atMost: false },
    { criterion: 'p99 ≤ bare @fastify/http-proxy', who: 'gateway, engine undici', values: routesOf((s) => s.undici?.p99X), bound: 1.0, atMost: true },
    { criterion: 'req/s ≥ 1.0× bare @fastify/http-proxy', who: 'gateway, engine fastify', values: routesOf((s) => s.fastify?.rpsX), bound: 1.0, atMost: false },
    { criterion: 'req/s ≥ 1.0× bare http-proxy-3', who: 'gateway, engine http-proxy-3', values: routesOf((s) => s.hp3OverBare), bound: 1.0, atMost: false },
    { criterion: 'built-in ≥ 2× the req/s of the same gateway forwarding', who: 'gateway, built-in vs engine undici to the upstream', values: routesOf((s) => s.builtinOverForward), bound: 2, atMost: false },
  ];
  for (const c of criteria) {
    if (c.values.some((x) => x === undefined)) continue; // a target left out (BENCH_TARGETS)
    const worst = c.atMost ? Math.max(...c.values) : Math.min(...c.values);
    const v = margin(worst, c.bound, c.atMost);
    verdicts.push({
      criterion: c.criterion,
      who: c.who,
      cells: c.values.map((x) => `${ratio(x)}${(c.atMost ? x <= c.bound : x >= c.bound) ? '' : ' ✗'}`),
      verdict: `${v.text}; worst ${ratio(worst)}×`,
      met: v.met,
    });
  }
  // Not a target: the same stack doing nothing (bench/target.mjs floor). The undici target asks the
  // gateway, with everything on, for what this row shows the bare transport reaches.
  const floor = routesOf((s) => s.floor?.rpsX);
  if (!floor.some((x) => x === undefined)) {
    verdicts.push({
      criterion: 'reference, not a target: req/s ÷ bare @fastify/http-proxy',
      who: 'floor: node:http + undici Pool, no policy, no operations',
      cells: floor.map((x) => ratio(x)),
      verdict: 'the ceiling of any gateway on node:http + undici on this machine',
      met: true,
    });
  }
}
const other = [];
if (scaling !== undefined) {
  const s = scaling.memory.steady;
  other.push([`memory flat under ${s.label}`, s.target, `RSS ${fmt(s.first, 1)} → ${fmt(s.last, 1)} MB (${s.growth >= 0 ? '+' : ''}${fmt(s.growth, 1)} MB, ${fmt(s.pct, 1)}%), peak ${fmt(s.peak, 1)} MB`, s.flat ? 'met (flat)' : '**not met** (grows)']);
  const k = scaling.memory.keys;
  other.push([`memory flat under ${k.label}`, k.target, `RSS ${fmt(k.first, 1)} → ${fmt(k.last, 1)} MB (${k.growth >= 0 ? '+' : ''}${fmt(k.growth, 1)} MB, ${fmt(k.pct, 1)}%), peak ${fmt(k.peak, 1)} MB`, k.flat ? 'met (flat)' : '**not met** (grows)']);
}
if (growth !== undefined) {
  const g = growth.invalid;
  const flat = g.heapGrowthMb <= 1;
  other.push([`memory flat under ${fmt(g.count)} distinct unknown keys`, 'the policy chain (dist), no sockets', `heap after GC ${fmt(g.samples[0].heap, 1)} → ${fmt(g.samples[g.samples.length - 1].heap, 1)} MB (${g.heapGrowthMb >= 0 ? '+' : ''}${fmt(g.heapGrowthMb, 2)} MB) from the start to the last quarter; RSS ${g.rssGrowthMb >= 0 ? '+' : ''}${fmt(g.rssGrowthMb, 1)} MB`, flat ? 'met (flat)' : '**not met** (grows)']);
  const kr = growth.keys;
  other.push([`key lookup O(1) up to ${fmt(kr.largest)} keys`, 'chain.begin (getPet)', `worst of valid and unknown keys, N keys ÷ 10 keys (fastest rounds): ${ratio(kr.worstRatio)}×`, kr.worstRatio <= 1.5 ? 'met (within 1.5× of the 10-key time)' : '**not met** (more than 1.5× the 10-key time)']);
}

const verdictMd = [
  '### Targets',
  '',
  forward === undefined
    ? 'The forwarding matrix was skipped (BENCH_SKIP).'
    : table(['target', 'gateway', ...forward.routes.map((r) => ROUTES[r].name), 'verdict (worst route)'], verdicts.map((v) => [v.criterion, v.who, ...v.cells, v.verdict])),
  '',
  'Ratios are medians of per-round ratios against the bare library measured in the same round (see the matrix below); ✗ marks a route that misses.',
  '',
  other.length === 0 ? '' : table(['target', 'measured on', 'measured', 'verdict'], other),
  '',
  `serve --workers: ${workers === undefined ? 'skipped' : workers.measured ? Object.entries(workers.summary).map(([n, s]) => `${n} worker(s) ${fmt(s.rps)} req/s (×${ratio(s.rpsX)})`).join(', ') + ' (no target set; see the table below)' : 'not measured: the CLI in dist has no --workers'}.`,
].join('\n');

// ---------------------------------------------------------------------------------------------
// BENCHMARKS.md

const total = (Date.now() - started) / 1000;
const md = [
  '## Results of the last `npm run bench`',
  '',
  `- **Command**: \`npm run bench\` (= \`npm run build && node bench/run.mjs\`)${process.env.BENCH_SKIP ? `, BENCH_SKIP=${process.env.BENCH_SKIP}` : ''}; ${fmt(total)} s in all.`,
  `- **Knobs set**: ${Object.entries(process.env).filter(([k]) => k.startsWith('BENCH_')).map(([k, v]) => `${k}=${v}`).join(', ') || 'none (defaults)'}.`,
  `- **Machine**: ${m.nproc} × ${m.model} (nproc ${m.nproc}), node ${m.node}, load average at start ${m.loadavg} (shared machine: read ratios, not absolute figures).`,
  `- **Date**: ${m.date}.`,
  `- **Load generator**: autocannon ${autocannonVersion()} (programmatic, in the parent process, same machine); targets in child processes; everything on 127.0.0.1${peers?.generators.includes('wrk') ? '; the peers section adds wrk (its own process)' : ''}.`,
  ...(redisNote === undefined ? [] : [`- **Redis**: ${redisNote}.`]),
  `- **Peers** (nginx, nginx + Lua, fast-gateway, Node 24, wrk): ${peers === undefined ? 'skipped (BENCH_SKIP)' : `see "The gateway beside its peers" (the \`peers\` section of this file)${peers.skipped.length === 0 ? '' : `; skipped there: ${peers.skipped.join('; ')}`}`}.`,
  '',
  verdictMd,
  '',
  forward?.markdown ?? '### Side by side\n\nSkipped (BENCH_SKIP).',
  '',
  chain === undefined ? '### The policy chain alone\n\nSkipped (BENCH_SKIP).' : chainWithShare(chain.markdown),
  '',
  growth?.markdown ?? '### How the cost grows\n\nSkipped (BENCH_SKIP).',
  '',
  scaling?.markdown ?? '### Sockets\n\nSkipped (BENCH_SKIP).',
  '',
  workers?.markdown ?? '### serve --workers N\n\nSkipped (BENCH_SKIP).',
].join('\n');

function chainWithShare(markdown) {
  if (forward === undefined) return markdown;
  // What share of the gateway's CPU per request the chain is, route by route.
  const pairs = [
    ['list20', 'listPets limit=20, valid (20 animals enforced)'],
    ['list100', 'listPets limit=100, valid (100 animals enforced)'],
    ['get', 'getPet, valid (streamed: no body phase)'],
    ['create', 'createPet, valid 73 B NewPet'],
  ].filter(([r]) => forward.routes.includes(r));
  const rows = pairs.map(([r, name]) => {
    const ns = chain.results.find((x) => x.name === name)?.ns;
    const f = forward.summary[r].undici?.cpuUs;
    const b = forward.summary[r].bare?.cpuUs;
    return [ROUTES[r].name, fmt(ns / 1000, 1), f === undefined ? 'n/a' : fmt(f), f === undefined ? 'n/a' : `${fmt((ns / 1000 / f) * 100, 1)}%`, f === undefined ? 'n/a' : fmt(f - b)];
  });
  return [markdown, '', 'The chain beside the whole request (engine undici, from the matrix above):', '', table(['route', 'chain µs', 'gateway CPU µs/req', 'chain share', 'gateway − bare CPU µs/req'], rows)].join('\n');
}

function autocannonVersion() {
  try {
    return JSON.parse(spawnSync(process.execPath, ['-p', "JSON.stringify(require('autocannon/package.json').version)"], { cwd: ROOT, encoding: 'utf8' }).stdout);
  } catch {
    return '8';
  }
}

console.log(md);
if (peers !== undefined) console.log('\n' + peers.markdown);
const extra = [
  ['tls', tls?.markdown ?? '### TLS and HTTP/2: the gateway beside nginx\n\nSkipped (BENCH_SKIP).'],
  ['registry', registry?.markdown ?? '### Key registry: the cost of a registry key\n\nSkipped (BENCH_SKIP).'],
  ['cache', cacheMarkdown()],
  ['costs', costs?.markdown ?? '### What the per-connection bound and the response contract cost\n\nSkipped (BENCH_SKIP).'],
  ['goals', goals?.markdown ?? '## The performance goals, co-scheduled\n\nSkipped (BENCH_SKIP).'],
  ['shadow', shadow?.markdown ?? '### Shadow mode beside nginx `mirror`, with the same slow mirror\n\nSkipped (BENCH_SKIP).'],
  ['traces', traces?.markdown ?? '### What tracing costs, co-scheduled\n\nSkipped (BENCH_SKIP).'],
];
for (const [, text] of extra) console.log('\n' + text);
if (profile !== undefined) console.log('\n' + profile.markdown);
if (!process.argv.includes('--no-write')) {
  const file = join(ROOT, 'BENCHMARKS.md');
  writeSection(file, 'bench', md);
  if (peers !== undefined) {
    writeSection(file, 'peers', peers.markdown);
    log(`bench: wrote the peers charts to ${writeCharts(peers.charts, process.env.BENCH_CHARTS_DIR || CHARTS_DIR)}`);
  }
  // A skipped section keeps the figures of its last run in the file.
  for (const [name, text] of extra) if (!(name === 'cache' ? skip.has('cache') && skip.has('forward') : skip.has(name))) writeSection(file, name, text);
  if (profile !== undefined) writeSection(file, 'profile', profile.markdown);
  log(`bench: wrote ${file} (${elapsed()})`);
} else if (peers !== undefined && process.env.BENCH_CHARTS_DIR) {
  log(`bench: wrote the peers charts to ${writeCharts(peers.charts, process.env.BENCH_CHARTS_DIR)} (--no-write: BENCHMARKS.md untouched)`);
}
process.exit(0);
