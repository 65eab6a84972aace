// Two targets of bench/forward.mjs, A and B, compared in many short alternating pairs, each pair
// on a fresh pair of processes. Two kinds of noise on a shared machine: its speed drifts by ±30%
// within a minute (a pair of runs one second apart sees the same machine), and one process of the
// same code can run 10-30% faster than another for its whole life (JIT decisions, memory layout,
// scheduling: an A/A run with one process each read 1.28). So each pair of runs is made on new
// processes (started A-first and B-first in turn), and the unit of the statistics is the process
// pair. For each route: the median over process pairs of B's req/s over A's and of B's CPU per
// request over A's, with a 95% bootstrap interval of each median (2,000 resamples, seeded), and
// the share of process pairs in which B served more. This is how a criterion such as "no more
// than 5% below" is checked: the interval says whether the difference is within the noise.
//
//   npm run build && BENCH_AB=baseline,core BENCH_BASELINE=/path/to/old/checkout node bench/ab.mjs
//
// Environment: BENCH_AB (A,B: ids of forward.mjs' TARGETS; default baseline,core), BENCH_AB_PAIRS
// (20 per route), BENCH_AB_EPOCHS (= pairs: fresh processes of A and B for every pair),
// BENCH_AB_SECONDS (1, per run), BENCH_ROUTES (list20,list100,get,create), BENCH_CONNECTIONS (50).
// The order within a pair alternates (A first, then B first), so drift within a pair cancels.
import { ROUTES, TARGETS, loadOptions } from './forward.mjs';
import { envNum, fmt, isMain, machine, measured, median, ratio, startRedis, startTarget, table } from './lib.mjs';

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
  const PAIRS = envNum('BENCH_AB_PAIRS', 20, 3, 500);
  const SECONDS = envNum('BENCH_AB_SECONDS', 1, 0.5, 30);
  const CONNECTIONS = envNum('BENCH_CONNECTIONS', 50, 1, 2000);
  const routeIds = (process.env.BENCH_ROUTES ?? 'list20,list100,get,create').split(',').map((s) => s.trim());
  for (const r of routeIds) if (!(r in ROUTES)) throw new Error(`BENCH_ROUTES: unknown route ${r}`);

  const EPOCHS = Math.min(envNum('BENCH_AB_EPOCHS', PAIRS, 1, 500), PAIRS);
  const up = await startTarget('upstream');
  const ctx = {};
  let started = [];
  const stopAll = async () => {
    for (const t of started) await t.stop();
    started = [];
  };
  try {
    if (TARGETS[idA].redis || TARGETS[idB].redis) ctx.redis = await startRedis();
    // Per route, one ratio per epoch (the median of its pairs): the pairs of one process pair share
    // its bias, so the interval is over epochs, not pairs.
    const rps = Object.fromEntries(routeIds.map((r) => [r, []]));
    const cpu = Object.fromEntries(routeIds.map((r) => [r, []]));
    // Fresh processes per epoch, started in turn A-first and B-first (see the top of the file).
    for (let epoch = 0; epoch < EPOCHS; epoch++) {
      const first = epoch % 2 === 0 ? idA : idB;
      const t1 = await TARGETS[first].start(up, ctx);
      started.push(t1);
      const t2 = await TARGETS[first === idA ? idB : idA].start(up, ctx);
      started.push(t2);
      const [a, b] = first === idA ? [t1, t2] : [t2, t1];
      const pairs = Math.round(((epoch + 1) * PAIRS) / EPOCHS) - Math.round((epoch * PAIRS) / EPOCHS);
      for (const routeId of routeIds) {
        const opts = { ...loadOptions(ROUTES[routeId]), connections: CONNECTIONS };
        // Warm both (JIT, pools) outside the pairs.
        for (const t of [a, b]) await measured(t.url, [t.pid], { ...opts, duration: 1 });
        const epochRps = [];
        const epochCpu = [];
        for (let p = 0; p < pairs; p++) {
          const order = p % 2 === 0 ? [a, b] : [b, a];
          const res = new Map();
          for (const t of order) res.set(t, await measured(t.url, [t.pid], { ...opts, duration: SECONDS }));
          const ra = res.get(a);
          const rb = res.get(b);
          if (ra.non2xx > 0 || rb.non2xx > 0 || ra.errors > 0 || rb.errors > 0) throw new Error(`${routeId}: non-2xx answers or errors in epoch ${epoch + 1}`);
          epochRps.push(rb.rps / ra.rps);
          epochCpu.push(rb.cpuUsPerReq / ra.cpuUsPerReq);
          log(`  ${ROUTES[routeId].name.padEnd(24)} epoch ${epoch + 1}/${EPOCHS} pair ${p + 1}/${pairs}  ${idA} ${fmt(ra.rps)} req/s ${fmt(ra.cpuUsPerReq)} µs  ${idB} ${fmt(rb.rps)} req/s ${fmt(rb.cpuUsPerReq)} µs  ratio ${ratio(rb.rps / ra.rps)}`);
        }
        rps[routeId].push(median(epochRps));
        cpu[routeId].push(median(epochCpu));
      }
      await stopAll();
    }
    const rows = routeIds.map((routeId) => {
      const [rLo, rHi] = bootstrapMedian(rps[routeId]);
      const [cLo, cHi] = bootstrapMedian(cpu[routeId]);
      return [
        ROUTES[routeId].name,
        `**${ratio(median(rps[routeId]))}** [${ratio(rLo)}–${ratio(rHi)}]`,
        `${fmt((rps[routeId].filter((x) => x > 1).length / rps[routeId].length) * 100)}%`,
        `**${ratio(median(cpu[routeId]))}** [${ratio(cLo)}–${ratio(cHi)}]`,
      ];
    });
    const m = machine();
    const markdown = [
      `node ${m.node}, ${m.nproc} × ${m.model}, load ${m.loadavg}, ${m.date}`,
      '',
      `${TARGETS[idB].name} (B) against ${TARGETS[idA].name} (A): ${PAIRS} alternating pairs of ${SECONDS} s runs per route over ${EPOCHS} fresh pairs of processes, ${CONNECTIONS} connections; the median over process pairs (each the median of its runs) with a 95% bootstrap interval over process pairs.`,
      '',
      table(['route', 'req/s B ÷ A', 'process pairs where B served more', 'CPU µs/req B ÷ A'], rows),
    ].join('\n');
    return { markdown };
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
