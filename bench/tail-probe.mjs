// Preloaded into a bench target (node --import ./bench/tail-probe.mjs bench/target.mjs ...): the
// event-loop delay (perf_hooks.monitorEventLoopDelay, 1 ms resolution) and the GC pauses by kind,
// printed as one `PROBE {...}` line on stderr at each SIGUSR2, then reset. Used for the tail
// figures in BENCHMARKS.md ("The tail"): SIGUSR2 after a warm-up, load, SIGUSR2 again.
import { monitorEventLoopDelay, PerformanceObserver, constants } from 'node:perf_hooks';
const h = monitorEventLoopDelay({ resolution: 1 });
h.enable();
let gc = [];
new PerformanceObserver((list) => { for (const e of list.getEntries()) gc.push([e.detail?.kind ?? e.kind, e.duration]); }).observe({ entryTypes: ['gc'] });
process.on('SIGUSR2', () => {
  const kinds = {};
  for (const [k, d] of gc) { const n = { [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor', [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major', [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental', [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb' }[k] ?? String(k); (kinds[n] ??= { count: 0, totalMs: 0, maxMs: 0 }); kinds[n].count++; kinds[n].totalMs += d; kinds[n].maxMs = Math.max(kinds[n].maxMs, d); }
  for (const v of Object.values(kinds)) { v.totalMs = +v.totalMs.toFixed(1); v.maxMs = +v.maxMs.toFixed(2); }
  process.stderr.write('PROBE ' + JSON.stringify({ loopDelayMs: { p50: h.percentile(50) / 1e6, p99: h.percentile(99) / 1e6, max: h.max / 1e6, mean: +(h.mean / 1e6).toFixed(3) }, gc: kinds }) + '\n');
  h.reset(); gc = [];
});
