// The byte-level scanners alone (src/api/scan), in process, on the lists the bench upstream sends:
// a listPets answer checked as Pets (scanBody), cut and checked in one pass (scanPage, then finish
// on its findings), and the cut alone (filterArray). With --baseline, the same calls of an older
// checkout run in the same process, interleaved round by round (bench/lib.mjs microRounds), and
// the table gives this checkout's time over the baseline's: timed, so compare the ratio, which
// shares the machine's load, rather than the nanoseconds. A loaded machine still moves one
// checkout against a copy of itself by 10-20% that way: prefer --instr.
//
//   npm run build && node bench/scan.mjs [--baseline /path/to/older/checkout (built)] [--this /path/to/checkout] [--instr] [--json]
//
// --instr: instructions per call instead of time, which a loaded machine does not move. One node
// (--single-threaded: compiling happens in the warm-up, on the one thread; V8's clock-driven
// heuristics off, as bench/instr.mjs) runs under valgrind's callgrind with instrumentation off
// while it warms every call up (BENCH_SCAN_WARMUP, 3000 each); then, per call and window
// (BENCH_SCAN_WINDOWS, 3), instrumentation is on around BENCH_SCAN_N (1000) calls. A call's cost:
// its least window, less an empty window's (the stdin round trip), over N. The same checkout
// against a copy of itself reads 1.00 on every call. BENCH_SCAN_CASES (e.g. 0,2: only those calls),
// BENCH_SCAN_FUNCTIONS=1 (each call's functions by self instructions, JIT code named through V8's
// perf map, on stderr), BENCH_SCAN_KEEP=1 (the dumps kept; their folder on stderr).
// A checkout before src/api/scan is read through its src/core/pet-scan.ts and json-scan.ts.
// Environment: BENCH_SCAN_ROUNDS (15), BENCH_SCAN_PASS_MS (150), BENCH_VALGRIND (valgrind), and
// those of --instr above.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { envNum, fmt, isMain, machine, microRounds, ratio, ROOT, table } from './lib.mjs';
import { STATUSES } from './fixtures.mjs';

const ROUNDS = envNum('BENCH_SCAN_ROUNDS', 15, 1, 200);
const PASS_MS = envNum('BENCH_SCAN_PASS_MS', 150, 10, 5000);

const PET_SHAPE = {
  name: 'Pet',
  fields: [
    { name: 'id', type: { kind: 'int64' } },
    { name: 'name', type: { kind: 'string' } },
    { name: 'categoryId', type: { kind: 'int64' } },
    { name: 'status', type: { kind: 'enum', values: STATUSES } },
  ],
  required: ['id', 'name', 'categoryId'],
  forbidden: [],
};

/** The calls of one checkout, whichever API it has. */
async function scannerOf(checkout) {
  const dist = join(checkout, 'dist');
  const url = (p) => pathToFileURL(join(dist, p)).href;
  if (existsSync(join(dist, 'api/scan/index.js'))) {
    const api = await import(url('api/scan/index.js'));
    const pets = api.compileShape(PET_SHAPE, { filterField: 'status' });
    return {
      scanBody: (b, list, mode) => pets.scanBody(b, list, mode),
      scanPage: (b, limit, status) => pets.scanPage(b, limit, status),
      finish: (f, mode) => pets.finish(f, mode),
      filterArray: (b, limit, status) => api.filterArray(b, limit, 'status', status),
    };
  }
  const pet = await import(url('core/pet-scan.js'));
  const json = await import(url('core/json-scan.js'));
  return { scanBody: pet.scanPetBody, scanPage: pet.scanPetPage, finish: pet.finishPets, filterArray: json.filterArray };
}

/** A list as the bench upstream writes it (the reference backend's Pets). */
function list(n) {
  return Buffer.from(`[${Array.from({ length: n }, (_, i) => `{"id":${i + 1},"name":"pet ${i}","categoryId":${i},"status":"${STATUSES[i % 3]}"}`).join(',')}]`);
}

function cases(s, id) {
  const l20 = list(20);
  const l100 = list(100);
  const l150 = list(150);
  const page = (b, limit, status) => {
    const p = s.scanPage(b, limit, status);
    return p.findings === undefined ? p.body.length : s.finish(p.findings, 'drop').problems.length;
  };
  return [
    { name: 'scanBody, 20 Pets', fn: () => s.scanBody(l20, true, 'drop').problems.length },
    { name: 'scanBody, 100 Pets', fn: () => s.scanBody(l100, true, 'drop').problems.length },
    { name: 'scanPage + finish, limit 20 of 20', fn: () => page(l20, 20, undefined) },
    { name: 'scanPage + finish, limit 100 of 100', fn: () => page(l100, 100, undefined) },
    { name: 'scanPage, limit 20 of 150, status sold', fn: () => page(l150, 20, 'sold') },
    { name: 'filterArray, limit 20 of 20', fn: () => s.filterArray(l20, 20, undefined).body.length },
    { name: 'filterArray, limit 100 of 100', fn: () => s.filterArray(l100, 100, undefined).body.length },
    { name: 'filterArray, limit 20 of 150, status sold', fn: () => s.filterArray(l150, 20, 'sold').body.length },
  ].map((c) => ({ ...c, name: `${id}: ${c.name}` }));
}

export async function run({ baseline, self = ROOT } = {}) {
  const checkouts = [{ id: 'this', dir: resolve(self) }];
  if (baseline !== undefined) checkouts.unshift({ id: 'baseline', dir: resolve(baseline) });
  const all = [];
  for (const c of checkouts) all.push(...cases(await scannerOf(c.dir), c.id));
  const results = microRounds(all, ROUNDS, PASS_MS);
  const per = results.length / checkouts.length;
  const rows = [];
  for (let k = 0; k < per; k++) {
    const mine = results[results.length - per + k];
    const name = mine.name.slice(mine.name.indexOf(': ') + 2);
    const base = checkouts.length > 1 ? results[k] : undefined;
    rows.push([name, ...(base === undefined ? [] : [fmt(base.ns)]), fmt(mine.ns), ...(base === undefined ? [] : [ratio(mine.ns / base.ns)])]);
  }
  const head = ['call', ...(baseline === undefined ? [] : ['baseline ns']), 'this ns', ...(baseline === undefined ? [] : ['this / baseline'])];
  return { machine: machine(), rounds: ROUNDS, results, markdown: table(head, rows) };
}

const WARMUP = envNum('BENCH_SCAN_WARMUP', 3000, 100, 1e6);
const N = envNum('BENCH_SCAN_N', 1000, 10, 1e6);
const WINDOWS = envNum('BENCH_SCAN_WINDOWS', 3, 1, 20);
/** As bench/instr.mjs: V8's clock-driven heuristics off, so that a window holds the calls' own work. */
const STEADY = ['--no-memory-reducer', '--no-flush-bytecode', '--no-flush-baseline-code', '--single-threaded'];

/**
 * Under valgrind: every call of every checkout warmed up, then, per line `k` on stdin, N calls of
 * case k, answered `done` (the parent turns instrumentation on and off around them).
 */
async function child(dirs) {
  const all = [];
  for (const d of dirs) all.push(...cases(await scannerOf(d), 'x'));
  for (const c of all) for (let i = 0; i < WARMUP; i++) c.fn();
  let sink = 0;
  process.stdout.write('ready\n');
  for await (const line of createInterface({ input: process.stdin })) {
    const k = Number(line);
    if (k >= 0) for (let i = 0; i < N; i++) sink += all[k].fn();
    process.stdout.write('done\n');
  }
  globalThis.__benchSink = sink;
}

const ctl = (...args) => execFileSync('callgrind_control', args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 60_000 });

/** bench/instr.mjs's reading of a dump: self Ir by function, JIT code named from the perf map. */
async function functionsReader() {
  const { functions, perfMap } = await import('./instr.mjs');
  return (file, pid) => functions(file, perfMap(pid));
}

/** Instructions per call of each case (the least window, less an empty window's), per checkout. */
export async function runInstr({ baseline, self = ROOT } = {}) {
  const checkouts = [...(baseline === undefined ? [] : [{ id: 'baseline', dir: resolve(baseline) }]), { id: 'this', dir: resolve(self) }];
  const names = cases(await scannerOf(ROOT), 'x').map((c) => c.name.slice(3));
  const dir = mkdtempSync(join(tmpdir(), 'petstore-scan-'));
  // BENCH_SCAN_FUNCTIONS=1: the functions of each call too (JIT code named by V8's perf map), on stderr.
  const functionsOf = process.env.BENCH_SCAN_FUNCTIONS === '1' ? await functionsReader() : undefined;
  const args = ['--tool=callgrind', '--instr-atstart=no', '--smc-check=all-non-file', `--callgrind-out-file=${dir}/cg.%p`, process.execPath, ...STEADY, ...(functionsOf === undefined ? [] : ['--perf-basic-prof']), join(ROOT, 'bench/scan.mjs'), '--child', ...checkouts.map((c) => c.dir)];
  const vg = spawn(process.env.BENCH_VALGRIND || 'valgrind', args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: vg.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const r = await lines.next();
    if (r.done) throw new Error('the child ended');
    return r.value;
  };
  const only = process.env.BENCH_SCAN_CASES?.split(',').map(Number);
  const per = {};
  const top = {};
  try {
    if ((await next()) !== 'ready') throw new Error('the child did not start');
    let dumpNo = 0;
    const window = async (k) => {
      ctl('-z', String(vg.pid));
      ctl('-i', 'on', String(vg.pid));
      vg.stdin.write(`${k}\n`);
      if ((await next()) !== 'done') throw new Error('the child lost its way');
      ctl('-i', 'off', String(vg.pid));
      ctl('-d', `w${dumpNo++}`, String(vg.pid));
      const file = join(dir, readdirSync(dir).filter((f) => f.startsWith(`cg.${vg.pid}.`)).sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop())).at(-1));
      const m = /^totals: (\d+)/m.exec(readFileSync(file, 'utf8'));
      if (m === null) throw new Error(`no total in ${file}`);
      if (functionsOf !== undefined && k >= 0) top[k] = functionsOf(file, vg.pid);
      return Number(m[1]);
    };
    const empty = Math.min(await window(-1), await window(-1), await window(-1));
    for (const c of checkouts) per[c.id] = names.map(() => []);
    for (let w = 0; w < WINDOWS; w++) {
      for (const [ci, c] of checkouts.entries()) {
        for (let k = 0; k < names.length; k++) per[c.id][k].push(only === undefined || only.includes(k) ? (await window(ci * names.length + k)) - empty : NaN);
      }
    }
  } finally {
    vg.stdin.end();
    await new Promise((r) => vg.once('exit', r));
    if (process.env.BENCH_SCAN_KEEP === undefined) rmSync(dir, { recursive: true, force: true });
    else console.error(dir);
  }
  const least = (xs) => Math.min(...xs) / N;
  if (functionsOf !== undefined) {
    // The last window's functions of each call, self Ir per call, side by side per checkout.
    for (let k = 0; k < names.length; k++) {
      if (top[k] === undefined) continue;
      const cols = checkouts.map((_, ci) => top[ci * names.length + k] ?? new Map());
      const keys = [...new Set(cols.flatMap((m) => [...m.keys()]))].sort((a, b) => Math.max(...cols.map((m) => m.get(b) ?? 0)) - Math.max(...cols.map((m) => m.get(a) ?? 0)));
      console.error(`\n${names[k]}\n` + table(['function', ...checkouts.map((c) => c.id)], keys.slice(0, 16).map((f) => [f, ...cols.map((m) => fmt((m.get(f) ?? 0) / N))])));
    }
  }
  const rows = names.map((name, k) => [name, ...checkouts.map((c) => fmt(least(per[c.id][k]))), ...(baseline === undefined ? [] : [ratio(least(per.this[k]) / least(per.baseline[k]))])]);
  const head = ['call', ...checkouts.map((c) => `${c.id} Ir`), ...(baseline === undefined ? [] : ['this / baseline'])];
  return { machine: machine(), n: N, warmup: WARMUP, windows: WINDOWS, per, markdown: table(head, rows) };
}

if (isMain(import.meta.url) && process.argv[2] === '--child') {
  await child(process.argv.slice(3));
} else if (isMain(import.meta.url) && process.argv.includes('--instr')) {
  const args = process.argv.slice(2);
  const b = args.indexOf('--baseline');
  const m = args.indexOf('--this');
  const out = await runInstr({ baseline: b === -1 ? undefined : args[b + 1], self: m === -1 ? undefined : args[m + 1] });
  if (args.includes('--json')) console.log(JSON.stringify(out));
  else console.log(`${out.machine.node}, callgrind, the least of ${out.windows} windows of ${out.n} calls, after ${out.warmup} of each (instructions per call)\n\n${out.markdown}`);
} else if (isMain(import.meta.url)) {
  const args = process.argv.slice(2);
  const b = args.indexOf('--baseline');
  const m = args.indexOf('--this');
  const out = await run({ baseline: b === -1 ? undefined : args[b + 1], self: m === -1 ? undefined : args[m + 1] });
  if (args.includes('--json')) console.log(JSON.stringify(out));
  else console.log(`${out.machine.node}, load ${out.machine.loadavg}, ${out.rounds} rounds (median ns per call)\n\n${out.markdown}`);
}
