// Two targets of bench/forward.mjs, A and B, compared AT THE SAME TIME on the same core. A shared
// machine's speed drifts by ±30% within a minute and one process of the same code can run 10-30%
// faster than another for its whole life (JIT decisions, memory layout, where the scheduler puts
// it), so two runs one after the other, even a second apart, cannot tell a 5% difference. Here A and
// B are pinned to the same CPU (taskset; the load generator, the upstream and Redis on the other
// CPUs) and loaded together, each by its own half of the connections: both saturate that core,
// the scheduler gives each half of it, and whatever the machine does at that moment it does to both.
// B's req/s over A's is then the inverse of their cost per request. Each process pair serves every
// route after a warm-up of every route, then of that route; a fresh pair of processes per epoch (started A-first and B-first in turn),
// and the unit of the statistics is the process pair: for each route, the median over process
// pairs (each the median of its runs) of B's req/s over A's and of B's CPU per request over A's,
// with a 95% bootstrap interval (2,000 resamples, seeded), and the share of process pairs in which
// B served more. An A/A run (the same code as A and B) read 0.985-1.016 per process pair. The tail
// likewise: each side's p99 (ms) per run and B's p99 over A's, with the same statistics (under wrk,
// from a run of two wrk processes after each run: one wrk process keeps one histogram).
//
//   npm run build && BENCH_AB=baseline,core BENCH_BASELINE=/path/to/old/checkout node bench/ab.mjs
//
// Environment: BENCH_AB (A,B: ids of forward.mjs' TARGETS; default baseline,core), BENCH_AB_EPOCHS
// (6 process pairs), BENCH_AB_RUNS (4 runs per route and process pair), BENCH_AB_SECONDS (2 per run),
// BENCH_AB_WARMUP (4 s per route and process pair, twice: in a pass over every route, then before
// the route), BENCH_AB_PIN (1 with 2 or more CPUs: pinned as above; 0: unpinned, still loaded
// together), BENCH_ROUTES (list20,list100,get,create), BENCH_CONNECTIONS (50 in all: half for each
// target), BENCH_AB_LOADGEN (autocannon: both loads from this process; wrk: one Debian wrk process,
// a thread per target, so both loads start and stop together, pinned with the upstream: lib.mjs wrkPair).
// wrk takes whole seconds: BENCH_AB_SECONDS and BENCH_AB_WARMUP are rounded for it.
// BENCH_AB_FLAGS_A, BENCH_AB_FLAGS_B: Node options for that side's process only (added to
// NODE_OPTIONS), e.g. BENCH_AB=undici,undici BENCH_AB_FLAGS_B=--max-semi-space-size=16.
import { cpus } from 'node:os';
import { ROUTES, TARGETS, loadOptions } from './forward.mjs';
import { envNum, fmt, isMain, machine, measuredPair, median, pin, ratio, startRedis, startTarget, table, wrkLoad, wrkVersion } from './lib.mjs';

/** A 95% bootstrap interval of the median of `xs` (percentile method, deterministic seed). */
export function bootstrapMedian(xs, resamples = 2000, seed = 42) {
  let s = seed >>> 0;
  const rand = () => {
    // mulberry32: a small seeded generator, so a rerun on the same data prints the same interval.
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const medians = [];
  for (let i = 0; i < resamples; i++) {
    const sample = Array.from({ length: xs.length }, () => xs[Math.floor(rand() * xs.length)]);
    medians.push(median(sample));
  }
  medians.sort((a, b) => a - b);
  return [medians[Math.floor(resamples * 0.025)], medians[Math.ceil(resamples * 0.975) - 1]];
}

export async function runAb(o = {}) {
  const log = o.log ?? ((s) => process.stderr.write(s + '\n'));
  const [idA, idB] = (o.ab ?? process.env.BENCH_AB ?? 'baseline,core').split(',').map((s) => s.trim());
  for (const id of [idA, idB]) if (!(id in TARGETS)) throw new Error(`BENCH_AB: unknown target ${id}`);
  const EPOCHS = o.epochs ?? envNum('BENCH_AB_EPOCHS', 6, 1, 200);
  const RUNS = o.runs ?? envNum('BENCH_AB_RUNS', 4, 1, 100);
  const SECONDS = o.seconds ?? envNum('BENCH_AB_SECONDS', 2, 0.5, 30);
  const WARMUP = o.warmup ?? envNum('BENCH_AB_WARMUP', 4, 0.5, 60);
  const CONNECTIONS = envNum('BENCH_CONNECTIONS', 50, 2, 2000);
  const half = Math.max(1, Math.floor(CONNECTIONS / 2));
  const GENERATOR = o.generator ?? process.env.BENCH_AB_LOADGEN ?? 'autocannon';
  if (GENERATOR !== 'autocannon' && GENERATOR !== 'wrk') throw new Error(`BENCH_AB_LOADGEN: autocannon or wrk, not ${GENERATOR}`);
  if (GENERATOR === 'wrk' && wrkVersion() === undefined) throw new Error('BENCH_AB_LOADGEN=wrk: wrk is not installed (apt-get install wrk, or BENCH_WRK=/path/to/wrk)');
  const routeIds = o.routes ?? (process.env.BENCH_ROUTES ?? 'list20,list100,get,create').split(',').map((s) => s.trim());
  for (const r of routeIds) if (!(r in ROUTES)) throw new Error(`BENCH_ROUTES: unknown route ${r}`);

  const cpuCount = cpus().length;
  const PIN = envNum('BENCH_AB_PIN', cpuCount >= 2 ? 1 : 0, 0, 1) === 1 && cpuCount >= 2;
  const targetCpu = String(cpuCount - 1);
  const otherCpus = cpuCount === 2 ? '0' : `0-${cpuCount - 2}`;
  // The target's process is spawned synchronously by start(): NODE_OPTIONS is this side's only then.
  const startSide = (id, side) => {
    const extra = side === 'B' ? (process.env.BENCH_AB_FLAGS_B ?? '') : (process.env.BENCH_AB_FLAGS_A ?? '');
    const saved = process.env.NODE_OPTIONS;
    if (extra !== '') process.env.NODE_OPTIONS = `${saved ?? ''} ${extra}`.trim();
    try {
      return TARGETS[id].start(up, ctx);
    } finally {
      if (saved === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = saved;
    }
  };
  const place = (pid, cpuList) => {
    if (PIN && !pin(pid, cpuList)) throw new Error('BENCH_AB_PIN: taskset could not pin a process (set BENCH_AB_PIN=0)');
  };
  // Read before pinning: nproc counts only the CPUs this process may run on.
  const m = machine();
  place(process.pid, otherCpus);
  const up = await startTarget('upstream');
  place(up.pid, otherCpus);
  const ctx = {};
  let started = [];
  const stopAll = async () => {
    for (const t of started) await t.stop();
    started = [];
  };
  try {
    if (TARGETS[idA].redis || TARGETS[idB].redis) {
      ctx.redis = await startRedis();
      place(ctx.redis.pid, otherCpus);
    }
    const rps = Object.fromEntries(routeIds.map((r) => [r, []]));
    const cpu = Object.fromEntries(routeIds.map((r) => [r, []]));
    const p99A = Object.fromEntries(routeIds.map((r) => [r, []]));
    const p99B = Object.fromEntries(routeIds.map((r) => [r, []]));
    const p99Ratio = Object.fromEntries(routeIds.map((r) => [r, []]));
    const gen = { generator: GENERATOR, ...(GENERATOR === 'wrk' && PIN ? { cpus: otherCpus } : {}) };
    const both = (a, b, opts) => measuredPair(a, b, { ...opts, ...gen });
    // The latencies of each side: autocannon's are those of the measured run; wrk keeps one
    // histogram for all its threads, so under wrk each run is followed by a run of the same length
    // from two wrk processes started together, one per target (the few milliseconds between their
    // starts skew the count of requests, not the tail), each printing its own p99.
    const latencies = async (a, b, opts, ra, rb) => {
      if (GENERATOR !== 'wrk') return [ra.p99, rb.p99];
      const [la, lb] = await Promise.all([wrkLoad(a.url, { ...opts, ...gen }), wrkLoad(b.url, { ...opts, ...gen })]);
      if (la.non2xx > 0 || lb.non2xx > 0 || la.errors > 0 || lb.errors > 0) throw new Error('non-2xx answers or errors in a latency run');
      return [la.p99, lb.p99];
    };
    for (let epoch = 0; epoch < EPOCHS; epoch++) {
      const aFirst = epoch % 2 === 0;
      const t1 = await (aFirst ? startSide(idA, 'A') : startSide(idB, 'B'));
      started.push(t1);
      place(t1.pid, targetCpu);
      const t2 = await (aFirst ? startSide(idB, 'B') : startSide(idA, 'A'));
      started.push(t2);
      place(t2.pid, targetCpu);
      const [a, b] = aFirst ? [t1, t2] : [t2, t1];
      // Every route once through both processes before the first is measured: code that several
      // routes share (and a cache's or a contract's miss path) is then compiled before any route is
      // timed, not during the first route's runs, which alone would pay for it.
      for (const routeId of routeIds) await both(a, b, { ...loadOptions(ROUTES[routeId]), connections: half, duration: WARMUP });
      for (const routeId of routeIds) {
        const opts = { ...loadOptions(ROUTES[routeId]), connections: half };
        // Warm both (JIT, pools) first: a fresh process still compiles for seconds.
        await both(a, b, { ...opts, duration: WARMUP });
        const runRps = [];
        const runCpu = [];
        const runP99 = [[], [], []];
        for (let run = 0; run < RUNS; run++) {
          const [ra, rb] = await both(a, b, { ...opts, duration: SECONDS });
          if (ra.non2xx > 0 || rb.non2xx > 0 || ra.errors > 0 || rb.errors > 0) throw new Error(`${routeId}: non-2xx answers or errors in epoch ${epoch + 1}`);
          runRps.push(rb.total / ra.total);
          runCpu.push(rb.cpuUsPerReq / ra.cpuUsPerReq);
          const [pa, pb] = await latencies(a, b, { ...opts, duration: SECONDS }, ra, rb);
          runP99[0].push(pa);
          runP99[1].push(pb);
          runP99[2].push(pb / pa);
          log(`  ${ROUTES[routeId].name.padEnd(24)} epoch ${epoch + 1}/${EPOCHS} run ${run + 1}/${RUNS}  ${idA} ${fmt(ra.rps)} req/s ${fmt(ra.cpuUsPerReq)} µs p99 ${pa.toFixed(2)} ms  ${idB} ${fmt(rb.rps)} req/s ${fmt(rb.cpuUsPerReq)} µs p99 ${pb.toFixed(2)} ms  ratio ${ratio(rb.total / ra.total)}, p99 ${ratio(pb / pa)}`);
        }
        rps[routeId].push(median(runRps));
        cpu[routeId].push(median(runCpu));
        p99A[routeId].push(median(runP99[0]));
        p99B[routeId].push(median(runP99[1]));
        p99Ratio[routeId].push(median(runP99[2]));
      }
      await stopAll();
    }
    const rows = routeIds.map((routeId) => {
      const [rLo, rHi] = bootstrapMedian(rps[routeId]);
      const [cLo, cHi] = bootstrapMedian(cpu[routeId]);
      const [pLo, pHi] = bootstrapMedian(p99Ratio[routeId]);
      return [
        ROUTES[routeId].name,
        `**${ratio(median(rps[routeId]))}** [${ratio(rLo)}–${ratio(rHi)}]`,
        rps[routeId].map((x) => x.toFixed(3)).join(' '),
        `${fmt((rps[routeId].filter((x) => x > 1).length / rps[routeId].length) * 100)}%`,
        `**${ratio(median(cpu[routeId]))}** [${ratio(cLo)}–${ratio(cHi)}]`,
        median(p99A[routeId]).toFixed(2),
        median(p99B[routeId]).toFixed(2),
        `**${ratio(median(p99Ratio[routeId]))}** [${ratio(pLo)}–${ratio(pHi)}]`,
      ];
    });
    const markdown = [
      `node ${m.node}, ${m.nproc} × ${m.model}, load ${m.loadavg}, ${m.date}`,
      '',
      `${TARGETS[idB].name}${process.env.BENCH_AB_FLAGS_B ? ` with ${process.env.BENCH_AB_FLAGS_B}` : ''} (B) against ${TARGETS[idA].name}${process.env.BENCH_AB_FLAGS_A ? ` with ${process.env.BENCH_AB_FLAGS_A}` : ''} (A), loaded together${PIN ? ` on CPU ${targetCpu} (load generator and upstream on ${otherCpus})` : ' (unpinned)'}, ${half} connections each from ${GENERATOR === 'wrk' ? `one ${wrkVersion()} process, a thread each` : 'autocannon in one process'}: ${EPOCHS} fresh pairs of processes, a ${WARMUP} s warm-up of every route, then per route a ${WARMUP} s warm-up and ${RUNS} runs of ${SECONDS} s; the median over process pairs (each the median of its runs) with a 95% bootstrap interval over process pairs. p99: of each side's latencies in a run (${GENERATOR === 'wrk' ? 'under wrk, from a run of the same length by two wrk processes started together, one per target' : "autocannon's, exact"}), the same median.`,
      '',
      table(['route', 'req/s B ÷ A', 'per process pair', 'process pairs where B served more', 'CPU µs/req B ÷ A', 'p99 A ms', 'p99 B ms', 'p99 B ÷ A'], rows),
    ].join('\n');
    return { markdown, rps, cpu, p99A, p99B, p99Ratio };
  } finally {
    await stopAll();
    await up.stop();
    await ctx.redis?.stop();
  }
}

if (isMain(import.meta.url)) {
  const { markdown } = await runAb();
  console.log(markdown);
  process.exit(0);
}
