// The gateway's garbage collections under steady load: one gateway target (bench/target.mjs
// gateway, engine undici, ops on: everything on, as `serve` runs) under --trace-gc, loaded by wrk
// with BENCH_CONNECTIONS (50) connections for BENCH_GC_SECONDS (20) per route after a warm-up of
// BENCH_GC_WARMUP (5) s, and, per route, the full collections (Mark-Compact) and scavenges V8
// reported in that window with their pauses, the event loop's delay (monitorEventLoopDelay in the
// target, through a preloaded module) and wrk's p99. With 2 or more CPUs the target is pinned to
// the last one and wrk and the upstream to the others.
//
//   npm run build && node bench/gc.mjs
//
// Environment: BENCH_ROUTES (list20,list100,get,create), BENCH_GC_FLAGS (more V8 flags for the
// target, e.g. "--trace-pretenuring"), BENCH_GC_ARGS (more target arguments, e.g. "--ops off"),
// BENCH_GC_OUT (a file to write the target's whole stdout to: every --trace-gc line).
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { ROUTES, loadOptions } from './forward.mjs';
import { BENCH, envNum, fmt, isMain, machine, median, pin, startProcess, startTarget, table, wrkLoad } from './lib.mjs';

// Loaded into the target with --import: prints the event loop's delay histogram on SIGUSR2 and
// starts a new one.
const ELD_MODULE = `import { monitorEventLoopDelay } from 'node:perf_hooks';
let h = monitorEventLoopDelay({ resolution: 10 });
h.enable();
process.on('SIGUSR2', () => {
  process.stdout.write('eld ' + JSON.stringify({ p50: h.percentile(50) / 1e6, p99: h.percentile(99) / 1e6, max: h.max / 1e6 }) + '\\n');
  h.disable();
  h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
});
`;

/** The collections of --trace-gc lines: kind and pause (ms, the first of "a / b ms"). */
export function parseTraceGc(lines) {
  const out = [];
  for (const l of lines) {
    const m = /ms: (Scavenge|Mark-Compact(?: \(reduce\))?|Minor Mark-Sweep)\b.*?, ([\d.]+) \/ [\d.]+ ms/.exec(l);
    if (m !== null) out.push({ kind: m[1].startsWith('Mark-Compact') ? 'Mark-Compact' : m[1], ms: Number(m[2]), line: l });
  }
  return out;
}

export async function runGc(o = {}) {
  const log = o.log ?? ((s) => process.stderr.write(s + '\n'));
  const SECONDS = envNum('BENCH_GC_SECONDS', 20, 1, 600);
  const WARMUP = envNum('BENCH_GC_WARMUP', 5, 1, 120);
  const CONNECTIONS = envNum('BENCH_CONNECTIONS', 50, 1, 2000);
  const routeIds = (process.env.BENCH_ROUTES ?? 'list20,list100,get,create').split(',').map((s) => s.trim());
  for (const r of routeIds) if (!(r in ROUTES)) throw new Error(`BENCH_ROUTES: unknown route ${r}`);
  const flags = (process.env.BENCH_GC_FLAGS ?? '').split(' ').filter(Boolean);
  const args = (process.env.BENCH_GC_ARGS ?? '').split(' ').filter(Boolean);
  const cpuCount = cpus().length;
  const targetCpu = String(cpuCount - 1);
  const otherCpus = cpuCount === 2 ? '0' : `0-${cpuCount - 2}`;
  const PIN = cpuCount >= 2;
  const m = machine();
  if (PIN) pin(process.pid, otherCpus);
  const dir = mkdtempSync(join(tmpdir(), 'petstore-gateway-bench-gc-'));
  const eld = join(dir, 'eld.mjs');
  writeFileSync(eld, ELD_MODULE);
  const up = await startTarget('upstream');
  if (PIN) pin(up.pid, otherCpus);
  let gw;
  try {
    gw = await startProcess([join(BENCH, 'target.mjs'), 'gateway', up.url, '--engine', 'undici', ...args], { execArgv: ['--trace-gc', '--import', eld, ...flags] });
    if (PIN) pin(gw.pid, targetCpu);
    const lines = [];
    let partial = '';
    gw.child.stdout.on('data', (s) => {
      const parts = (partial + s).split('\n');
      partial = parts.pop();
      lines.push(...parts);
    });
    const gen = { generator: 'wrk', connections: CONNECTIONS, ...(PIN ? { cpus: otherCpus } : {}) };
    const eldNow = async () => {
      const before = lines.length;
      process.kill(gw.pid, 'SIGUSR2');
      for (let i = 0; i < 100; i++) {
        const l = lines.slice(before).find((x) => x.startsWith('eld '));
        if (l !== undefined) return JSON.parse(l.slice(4));
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error('no event loop delay from the target');
    };
    // A pass over every route first: nothing compiles during a measured window.
    for (const r of routeIds) await wrkLoad(gw.url, { ...loadOptions(ROUTES[r]), ...gen, duration: WARMUP });
    const rows = [];
    const result = {};
    for (const r of routeIds) {
      await wrkLoad(gw.url, { ...loadOptions(ROUTES[r]), ...gen, duration: WARMUP });
      await eldNow();
      const from = lines.length;
      const w = await wrkLoad(gw.url, { ...loadOptions(ROUTES[r]), ...gen, duration: SECONDS });
      const d = await eldNow();
      // The window's lines: what the target wrote up to the eld line that closed it.
      const window = lines.slice(from);
      const gcs = parseTraceGc(window.slice(0, window.findIndex((x) => x.startsWith('eld '))));
      const mc = gcs.filter((g) => g.kind === 'Mark-Compact').map((g) => g.ms);
      const sc = gcs.filter((g) => g.kind !== 'Mark-Compact').map((g) => g.ms);
      result[r] = { rps: w.rps, p99: w.p99, markCompact: mc, scavenges: sc.length, scavengeMedian: median(sc), scavengeMax: Math.max(0, ...sc), eld: d, mcLines: gcs.filter((g) => g.kind === 'Mark-Compact').map((g) => g.line) };
      log(`  ${ROUTES[r].name.padEnd(24)} ${fmt(w.rps)} req/s p99 ${w.p99.toFixed(2)} ms  Mark-Compact ${mc.length} [${mc.join(', ')}] ms  scavenges ${sc.length} (median ${median(sc)?.toFixed?.(2)} ms, max ${Math.max(0, ...sc)} ms)  loop delay p99 ${d.p99.toFixed(2)} max ${d.max.toFixed(2)} ms`);
      for (const l of result[r].mcLines) log(`    ${l.trim()}`);
      rows.push([
        ROUTES[r].name,
        fmt(w.rps),
        w.p99.toFixed(2),
        String(mc.length),
        mc.length === 0 ? '–' : `${median(mc).toFixed(2)} / ${Math.max(...mc).toFixed(2)}`,
        `${sc.length} (${(median(sc) ?? 0).toFixed(2)} / ${Math.max(0, ...sc).toFixed(2)})`,
        `${d.p99.toFixed(2)} / ${d.max.toFixed(2)}`,
      ]);
    }
    if (process.env.BENCH_GC_OUT) writeFileSync(process.env.BENCH_GC_OUT, lines.join('\n') + '\n');
    const markdown = [
      `node ${m.node}, ${m.nproc} × ${m.model}, load ${m.loadavg}, ${m.date}`,
      '',
      `gateway (engine undici, ops on${args.length > 0 ? `, ${args.join(' ')}` : ''}${flags.length > 0 ? `, ${flags.join(' ')}` : ''}) under wrk, ${CONNECTIONS} connections, ${SECONDS} s per route after ${WARMUP} s of warm-up${PIN ? `, target on CPU ${targetCpu}` : ''}:`,
      '',
      table(['route', 'req/s', 'wrk p99 ms', 'Mark-Compact', 'its pause median / max ms', 'scavenges (median / max ms)', 'loop delay p99 / max ms'], rows),
    ].join('\n');
    return { markdown, result };
  } finally {
    if (gw !== undefined) await gw.stop();
    await up.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) {
  const { markdown } = await runGc();
  console.log(markdown);
  process.exit(0);
}
