// Instructions per request, counted, not timed: a shared machine's req/s moves by ±30% with the
// load of others, an instruction count does not. Each gateway target runs under valgrind's
// callgrind with instrumentation off (--instr-atstart=no) while it starts and warms up; then, per
// route, instrumentation is switched on (callgrind_control -i on) around a fixed number of requests
// and the counters dumped, in several windows. V8's JIT compiler and its garbage collector run in
// bursts (a window with a major GC or a re-optimisation reads 2-3x), so each dump's functions are
// split by name into "run" (JIT code, builtins, the runtime, libuv, the kernel interface), "gc" and
// "compile"; the table shows the least "run" over the windows (compiling and collecting only ever
// add) and the median "gc" (its steady cost is the garbage per request: bench/alloc.mjs). The
// upstream and the load generator run outside valgrind. Instructions are the x86 instructions
// valgrind executes for the target: JIT code under valgrind is the same code V8 would run natively
// (tiering counts calls, not time). JIT code is named through V8's perf map (--perf-basic-prof)
// and every function put in a part (front, exchange, forward layers, policies, access log,
// metrics, undici, node, V8 builtins, runtime); the target runs without V8's clock-driven memory
// reducer and code flushing (STEADY below). The least window of one build still moved by up to 25%
// between runs: compare builds by the per-function table, which repeats.
//
//   npm run build && node bench/instr.mjs [--baseline /path/to/older/checkout] [--configs undici,no-ops] [--compare A,B]
//     [--inclusive REGEX] [--keep DIR] [--json]
//
// --inclusive REGEX: for each route, the inclusive cost per request of the calls into the
// functions whose name matches (e.g. '^JS:(record dist/ops/metrics|onEnd dist/ops/index)'), with
// the C++ runtime and builtins under them, which the self costs leave without a caller's name.
// --keep DIR: the callgrind dumps (one per window, cg.PID.N) and V8's perf map of each target are
// kept in DIR/<checkout>-<config>/, for `callgrind_annotate --inclusive=yes --tree=caller`.
// --baseline: a second checkout (built) measured with the same configs and routes; its own
// bench/target.mjs is used, so both must know the flags of a config (--ops, --rate-limit: every
// checkout since the rate-limit stores). Configs (bench/target.mjs gateway flags, engine undici):
//   undici    everything on: ops (metrics, access log, deprecation report) and a memory rate limit;
//             response-contract off (bench/target.mjs's default), as in every config but `contract`
//   contract  undici + response-contract enforce (--compare undici,contract: what the contract costs)
//   no-ops    ops off, memory rate limit
//   no-limit  ops on, no rate-limit section
//   core      ops off, no rate-limit section (the exchange, the policies and the header rules)
//   floor     node:http + an undici Pool and nothing else (this checkout's bench/target.mjs floor)
//   builtin   everything on, the built-in backend as the upstream (`upstream.url: builtin`)
//   cached    everything on, the response cache (memory store, a TTL longer than the run): every
//             counted request a hit, checked per route (Cache-Status and Age of one request before
//             its own warm-up and one after its windows name the same entry); GET routes only
// --compare A,B: two of --configs; per checkout and route, B against A by part and the functions
// that differ most (e.g. --configs builtin,cached --compare builtin,cached: what a hit costs
// beyond the built-in backend's answer).
// Environment: BENCH_INSTR_N (300 requests per window), BENCH_INSTR_WINDOWS (3), BENCH_INSTR_WARMUP
// (1500 requests per route, uninstrumented, every route first, then each again before its
// windows), BENCH_INSTR_CONNECTIONS (4), BENCH_ROUTES (list20,list100,get,create), BENCH_INSTR_TOP (12: functions in the per-function difference, with
// --baseline), BENCH_VALGRIND (valgrind). Needs valgrind (Debian: apt-get install valgrind).
// One config and checkout takes 2-4 minutes on an idle core.
import { execFileSync } from 'node:child_process';
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ROUTES, loadOptions } from './forward.mjs';
import { ROOT, envNum, fmt, isMain, load, machine, median, startProcess, startTarget, table } from './lib.mjs';

const VALGRIND = process.env.BENCH_VALGRIND || 'valgrind';

export const CONFIGS = {
  undici: { name: 'everything on', args: (up) => ['gateway', up, '--engine', 'undici'] },
  contract: { name: 'everything on, response-contract enforce', args: (up) => ['gateway', up, '--engine', 'undici', '--contract', 'enforce'] },
  'no-ops': { name: 'ops off', args: (up) => ['gateway', up, '--engine', 'undici', '--ops', 'off'] },
  'no-limit': { name: 'no rate limit', args: (up) => ['gateway', up, '--engine', 'undici', '--rate-limit', 'off'] },
  core: { name: 'ops off, no rate limit', args: (up) => ['gateway', up, '--engine', 'undici', '--ops', 'off', '--rate-limit', 'off'] },
  floor: { name: 'node:http + undici Pool', args: (up) => ['floor', up], thisCheckoutOnly: true },
  // The built-in backend as the upstream, everything on: what a cache hit must cost less than.
  builtin: { name: 'everything on, built-in backend', args: () => ['gateway', 'builtin', '--engine', 'undici'] },
  // The response cache (memory store), everything on: after the warm-up every counted request is a
  // hit (checked per window from Cache-Status and Age); the TTL outlives the run under valgrind.
  cached: { name: 'everything on, response cache', args: (up) => ['gateway', up, '--engine', 'undici', '--cache', 'on', '--cache-ttl', '3600'], hits: true },
};

// Self cost by function name. JIT code has no name under valgrind (an address); it is "run".
// Code generation's own C++ (assembler, relocation, deoptimisation tables, the identity maps and
// std::map/unordered_map work of the compiler) counts as compile too.
const COMPILE = /\(for the compiler\)$|v8::internal::(compiler|maglev|baseline)::|Assembler|RelocIterator|RelocInfo|TranslationArrayBuilder|IdentityMap|RootIndexMap|SourcePositionTable|SafepointTable|std::_Rb_tree|_Prime_rehash|v8::internal::Compiler::|OptimizedCompilationJob|v8::internal::Zone|RegisterAllocat|InstructionSelector|Deoptimizer|Turbofan|BytecodeGenerator|v8::internal::interpreter::|v8::internal::Parser|v8::internal::Scanner|v8::internal::ParserBase|v8::internal::PreParser/;
const GC = /\(for the collector\)$|Marking|Mark(er|Compact)|Sweep|Evacuat|Scaveng|v8::internal::Heap::|heap::base::|MemoryChunk|RememberedSet|SlotSet|v8::internal::Page::|GCTracer|Compactor|IterateObjectCache|BodyDescriptor|SizeFromMap|ObjectVisitor|ActiveSystemPages|MemoryAllocator|PagedSpace|FreeList|RecordMigratedSlot|PointersUpdating|TypedSlot|Worklist|LocalHeap|Safepoint|ArrayBufferSweeper|cppgc::/;
// Parts of "run" worth a column of their own: strings written into the socket's buffers (the
// response head, the access line), and the kernel interface (libuv, system calls).
const WRITES = /WriteLatin1|WriteOneByte|StringBytes::Write|WriteToFlat|WriteUtf8|Utf8Length|StreamBase::Write|WriteString/;
const IO = /^\?\?\?:uv_|\buv__|epoll|writev|\bread\b|libc\.so.*(write|send|recv)|node::LibuvStreamWrap|TCPWrap/;

export function classify(name) {
  if (COMPILE.test(name)) return 'compile';
  if (GC.test(name)) return 'gc';
  return 'run';
}

/**
 * V8's perf map (node --perf-basic-prof writes /tmp/perf-PID.map: "start size name" per compiled
 * function, and code is then never moved): the JS function behind a JIT address callgrind could
 * not name.
 */
export function perfMap(pid, file = `/tmp/perf-${pid}.map`) {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return () => undefined;
  }
  const rows = [];
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
    if (m !== null) rows.push([parseInt(m[1], 16), parseInt(m[2], 16), m[3]]);
  }
  rows.sort((a, b) => a[0] - b[0]);
  return (addr) => {
    let lo = 0;
    let hi = rows.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (rows[mid][0] <= addr) lo = mid + 1;
      else hi = mid - 1;
    }
    const r = rows[hi];
    return r !== undefined && addr < r[0] + r[1] ? r[2] : undefined;
  };
}

/** Self Ir per function of one callgrind dump (callgrind_annotate, every function), JIT code named through `lookup`. */
export function functions(file, lookup = () => undefined, root = '') {
  const out = execFileSync('callgrind_annotate', ['--threshold=100', file], { maxBuffer: 1 << 28 }).toString();
  const fns = new Map();
  for (const line of out.split('\n')) {
    const m = /^\s*([\d,]+) \([^)]*\)\s+(.*)$/.exec(line);
    if (m === null || m[2].startsWith('PROGRAM TOTALS')) continue;
    const jit = /^\?\?\?:0x([0-9a-f]+) \[\?\?\?\]$/.exec(m[2]);
    // JIT code: named by V8's perf map (the tier's marker, `*` optimised, `~` not, dropped), else one entry.
    const name = jit === null ? m[2].replace(/^\?\?\?:/, '') : (lookup(parseInt(jit[1], 16))?.replace(/^(JS|LazyCompile|Function):[*~^+]?/, 'JS:') ?? '(JIT code)');
    // The same function in two checkouts: without the checkout's folder and the line and column.
    // (node_modules too: a checkout may link another's).
    const key = name.startsWith('JS:') ? name.replaceAll(`file://${root}/`, '').replaceAll(`${root}/`, '').replace(/ (file:\/\/)?\/\S*\/node_modules\//, ' node_modules/').replace(/:\d+:\d+$/, '') : name;
    fns.set(key, (fns.get(key) ?? 0) + Number(m[1].replaceAll(',', '')));
  }
  splitShared(fns, callerShares(file));
  return fns;
}

/**
 * libc's memory functions (memset, memcpy, malloc, free) serve the compiler and the collector as
 * well as the requests: V8's compiler zeroes and copies its zones with them, so a window in which
 * V8 still optimises reads hundreds of extra "run" instructions per request in memset alone. Their
 * self cost is split by who called them (the callers' inclusive cost into them, through
 * operator new/delete and the allocator's own functions), and the compiler's and the collector's
 * shares are filed under "NAME (for the compiler)" and "NAME (for the collector)".
 */
const SHARED = /^(__mem(set|cpy|move)\w*|malloc|free|cfree|realloc|calloc|_int_(malloc|free|realloc|memalign)|malloc_consolidate|unlink_chunk(\.\w+)*)$/;
// Allocation helpers that pass the cost on to their own callers.
const PASS = /^(operator (new|delete)|v8::internal::(AccountingAllocator|AlignedAlloc|Malloced|StrDup)|v8::base::(Malloc|Free|Realloc|Calloc|AlignedAlloc)|std::)/;

/** Per shared libc function (its bare name): the share of its cost that each class of caller caused. */
export function callerShares(file) {
  const names = new Map();
  const named = (spec) => {
    const m = /^\((\d+)\)(?: (.*))?$/.exec(spec);
    if (m === null) return spec;
    if (m[2] !== undefined) names.set(m[1], m[2]);
    return names.get(m[1]) ?? spec;
  };
  // callee -> caller -> inclusive Ir of the calls
  const edges = new Map();
  let fn = '';
  let callee = '';
  let inCall = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.startsWith('fn=')) fn = named(line.slice(3));
    else if (line.startsWith('cfn=')) callee = named(line.slice(4));
    else if (line.startsWith('calls=')) inCall = true;
    else if (inCall && /^[\d+*-]/.test(line)) {
      inCall = false;
      if (!SHARED.test(callee) && !PASS.test(callee)) continue;
      const e = edges.get(callee) ?? new Map();
      e.set(fn, (e.get(fn) ?? 0) + Number(line.split(' ')[1] ?? 0));
      edges.set(callee, e);
    }
  }
  const memo = new Map();
  const share = (f, depth) => {
    const known = memo.get(f);
    if (known !== undefined) return known;
    const s = { run: 0, gc: 0, compile: 0 };
    const e = edges.get(f);
    if (e === undefined || depth > 8) {
      s[classify(f)] = 1;
      return s;
    }
    memo.set(f, { run: 1, gc: 0, compile: 0 }); // a cycle through allocator helpers counts as run
    let total = 0;
    for (const [caller, ir] of e) {
      const sub = caller !== f && (SHARED.test(caller) || PASS.test(caller)) ? share(caller, depth + 1) : { [classify(caller)]: 1 };
      for (const k of ['run', 'gc', 'compile']) s[k] += (sub[k] ?? 0) * ir;
      total += ir;
    }
    for (const k of ['run', 'gc', 'compile']) s[k] = total > 0 ? s[k] / total : Number(k === 'run');
    memo.set(f, s);
    return s;
  };
  const out = new Map();
  for (const f of edges.keys()) if (SHARED.test(f)) out.set(f, share(f, 0));
  return out;
}

/** Moves the compiler's and the collector's shares of each shared function's self cost to entries of their own. */
export function splitShared(fns, shares) {
  for (const [key, ir] of [...fns]) {
    // callgrind_annotate's name: "FILE:FUNCTION [OBJECT]" (FILE "???" when unknown).
    const m = /^(?:\?\?\?|[^:\s]*\.\w+):(?!:)(\S+) \[/.exec(key);
    const s = m === null ? undefined : shares.get(m[1]);
    if (s === undefined) continue;
    fns.set(key, ir * s.run);
    if (s.compile > 0) fns.set(`${key} (for the compiler)`, ir * s.compile);
    if (s.gc > 0) fns.set(`${key} (for the collector)`, ir * s.gc);
  }
}

/**
 * Inclusive cost per callee of one callgrind dump: for every call into a function whose name
 * matches `re` from a caller that does not match (so a matching function called by another one
 * is not counted twice), the Ir of the call with everything under it, and the number of calls.
 * Self costs (above) leave a C++ runtime function or a V8 builtin without a caller's name: this
 * puts it under the JS function that called into it (e.g. `^JS:record dist/ops/metrics`: the
 * metrics observer with prom-client and the runtime work its observations cause). Names as in
 * `functions`: JIT code through V8's perf map, without the checkout's folder.
 */
export function inclusiveCalls(file, re, lookup = () => undefined, root = '') {
  const names = new Map();
  const named = (spec) => {
    const m = /^\((\d+)\)(?: (.*))?$/.exec(spec);
    let name = spec;
    if (m !== null) {
      if (m[2] !== undefined) names.set(m[1], m[2]);
      name = names.get(m[1]) ?? spec;
    }
    const jit = /^0x([0-9a-f]+)$/.exec(name);
    if (jit === null) return name;
    const js = lookup(parseInt(jit[1], 16));
    if (js === undefined) return '(JIT code)';
    return js
      .replace(/^(JS|LazyCompile|Function):[*~^+]?/, 'JS:')
      .replaceAll(`file://${root}/`, '')
      .replaceAll(`${root}/`, '')
      .replace(/ (file:\/\/)?\/\S*\/node_modules\//, ' node_modules/')
      .replace(/:\d+:\d+$/, '');
  };
  const out = new Map();
  let fn = '';
  let callee = '';
  let calls = -1;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.startsWith('fn=')) fn = named(line.slice(3));
    else if (line.startsWith('cfn=')) callee = named(line.slice(4));
    else if (line.startsWith('calls=')) calls = Number(line.slice(6).split(' ')[0]);
    else if (calls >= 0 && /^[\d+*-]/.test(line)) {
      // The line after `calls=` holds the call's inclusive cost.
      if (re.test(callee) && !re.test(fn)) {
        const o = out.get(callee) ?? { ir: 0, calls: 0 };
        o.ir += Number(line.split(' ')[1] ?? 0);
        o.calls += calls;
        out.set(callee, o);
      }
      calls = -1;
    }
  }
  return out;
}

/** Which part of the gateway (or of its stack) a function belongs to, from its name or its JS file. */
export function component(name) {
  const c = classify(name);
  if (c !== 'run') return c;
  if (name.startsWith('JS:')) {
    const parts = [
      [/[ /]dist\/core\/forward\//, 'forward layers'],
      [/[ /]dist\/core\/exchange\./, 'exchange'],
      [/[ /]dist\/core\/(headers|header-rules|header-values|request-id)\./, 'headers, request ids'],
      [/[ /]dist\/core\//, 'core (chain, facts, deadlines, ...)'],
      [/[ /]dist\/policies\//, 'policies'],
      [/[ /]dist\/fronts\//, 'front'],
      [/[ /]dist\/ops\/(access-log|log-destination)/, 'access log'],
      [/[ /]dist\/ops\/(metrics|series)/, 'metrics'],
      [/[ /]dist\/ops\//, 'ops (other)'],
      [/[ /]dist\/(upstreams|engines)\//, 'upstream adapter'],
      [/[ /]dist\/stores\//, 'stores'],
      [/node_modules\/undici\//, 'undici'],
      [/node_modules\/prom-client\//, 'prom-client'],
      [/node_modules\/lru-cache\//, 'lru-cache'],
      [/node:internal\/(http|_http|streams|stream_base|net)|node:(_http|http|net)/, 'node http, streams (JS)'],
      [/node:/, 'node (JS, other)'],
      [/\/bench\//, 'bench target'],
    ];
    for (const [re, part] of parts) if (re.test(name)) return part;
    return 'JS (other)';
  }
  if (name === '(JIT code)') return 'JIT code (unnamed)';
  if (name.startsWith('Builtins_')) return 'V8 builtins';
  if (WRITES.test(name)) return 'string writes';
  if (IO.test(name)) return 'libuv, syscalls';
  return 'runtime (C++)';
}

function summarise(fns, n) {
  const s = { run: 0, gc: 0, compile: 0, parts: {} };
  for (const [name, ir] of fns) {
    const c = classify(name);
    s[c] += ir / n;
    if (c !== 'run') continue;
    const part = component(name);
    s.parts[part] = (s.parts[part] ?? 0) + ir / n;
  }
  return s;
}

/**
 * V8 heuristics that run on the clock: under valgrind the process is 20-50 times slower, so the
 * memory reducer collects again and again and code unused for a few collections is flushed, then
 * compiled again in a later window (a window then reads 2-3 times the others). Off, a window holds
 * the requests' own work; neither flag changes what a request does.
 */
const STEADY = ['--no-memory-reducer', '--no-flush-bytecode', '--no-flush-baseline-code'];

const ctl = (...args) => execFileSync('callgrind_control', args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 60_000 });

/** The dump files of one valgrind process, newest (highest part number) last. */
function dumps(dir, pid) {
  return readdirSync(dir)
    .filter((f) => f.startsWith(`cg.${pid}.`))
    .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()))
    .map((f) => join(dir, f));
}

/**
 * One GET with autocannon's bytes (bench/lib.mjs `load`: Host, Connection, then the route's
 * fields), on a connection of its own: a request shaped otherwise (fetch adds fields) makes V8
 * deoptimise code the load specialised, and compile it again in the next counted window.
 * Resolves with the status and the head's fields (lower-case names).
 */
function getLikeLoad(url, opts) {
  const { hostname, port } = new URL(url);
  const lines = [`GET ${opts.path} HTTP/1.1`, `Host: ${hostname}:${port}`, 'Connection: keep-alive', ...Object.entries(opts.headers).map(([k, v]) => `${k}: ${v}`)];
  return new Promise((resolvePromise, reject) => {
    const socket = connect(Number(port), hostname);
    let got = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(new Error('no answer within 60 s')), 60_000);
    socket.on('error', reject);
    socket.on('data', (chunk) => {
      got = Buffer.concat([got, chunk]);
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [status, ...fields] = got.subarray(0, end).toString('latin1').split('\r\n');
      const headers = new Map(fields.map((f) => [f.slice(0, f.indexOf(':')).toLowerCase(), f.slice(f.indexOf(':') + 1).trim()]));
      if (got.length < end + 4 + Number(headers.get('content-length') ?? 0)) return;
      clearTimeout(timer);
      socket.destroy();
      resolvePromise({ status: Number(status.split(' ')[1]), headers });
    });
    socket.write(lines.join('\r\n') + '\r\n\r\n');
  });
}

/**
 * A cached target's answer to one request of the route, outside the counted window: it must be a
 * hit, and when the stored answer was made (from Age, to the second) tells one entry from another.
 */
async function storedEntry(url, opts, what, mustHit = true) {
  const sent = Date.now();
  const r = await getLikeLoad(url, opts);
  const status = r.headers.get('cache-status') ?? '';
  if (r.status !== 200 || (mustHit && !/; hit(;|$)/.test(status))) throw new Error(`${what}: not a cache hit (${r.status}, Cache-Status: ${status})`);
  const age = Number(r.headers.get('age'));
  // Born within [sent - (age + 1) s, now - age s]: Age is whole seconds, counted down (RFC 9111 section 5.1).
  return { from: sent - (age + 1) * 1000, to: Date.now() - age * 1000 };
}

/**
 * Every request of a route's warm-up and windows was a hit when the answers just before and just
 * after them were hits on the same entry: a miss in between would have stored a new one (the
 * entry's TTL outlives the run, and nothing else is stored that could push it out of the LRU).
 */
function sameEntry(a, b, what) {
  if (a.from > b.to + 1000 || b.from > a.to + 1000) throw new Error(`${what}: the entry was stored again during the window (a miss)`);
}

/** One checkout and config under callgrind: per route, the least-run window and its functions. */
export async function measureTarget({ cwd, config, upstream, routes, n, windows, warmup, connections, log, keep, id, inclusive }) {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-instr-'));
  const vg = ['--tool=callgrind', '--instr-atstart=no', '--smc-check=all-non-file', `--callgrind-out-file=${dir}/cg.%p`];
  const t = await startProcess([join(cwd, 'bench', 'target.mjs'), ...CONFIGS[config].args(upstream.url)], {
    node: VALGRIND,
    execArgv: [...vg, process.execPath, '--perf-basic-prof', ...STEADY],
    cwd,
    timeoutMs: 600_000,
  });
  const result = {};
  try {
    // A cached config's check requests: each route's first one, a miss that fills its entry.
    if (CONFIGS[config].hits) for (const r of routes) await storedEntry(t.url, loadOptions(ROUTES[r]), `${config} ${r}`, false);
    // Every route warmed up before any is measured: the code they share (the front, the chain,
    // the transport) is then compiled for all of them, as under a real mix.
    for (const r of routes) await load(t.url, { ...loadOptions(ROUTES[r]), amount: warmup, connections, maxSeconds: 600 });
    for (const r of routes) {
      const opts = loadOptions(ROUTES[r]);
      // A few non-2xx answers (a connection the upstream closed as it was reused) are tolerated and
      // counted; more would measure the error path instead of the route.
      const ok = (x, what) => {
        if (x.total < what * 0.9 || x.ok < x.total * 0.99) throw new Error(`${config} ${r}: ${x.ok} of ${x.total} answers 2xx (${JSON.stringify(x.statuses)})`);
      };
      // A cached config's check request (below) is made before this route's own warm-up: the
      // connection it opens and closes is not the load's, and runs code the windows must not hold.
      const before = CONFIGS[config].hits ? await storedEntry(t.url, opts, `${config} ${r}`) : undefined;
      ok(await load(t.url, { ...opts, amount: warmup, connections, maxSeconds: 600 }), warmup);
      // then this route's own, just before its windows
      const got = [];
      for (let w = 0; w < windows; w++) {
        ctl('-z', String(t.pid));
        ctl('-i', 'on', String(t.pid));
        const x = await load(t.url, { ...opts, amount: n, connections, maxSeconds: 600 });
        ctl('-i', 'off', String(t.pid));
        ctl('-d', `${r}-${w}`, String(t.pid));
        ok(x, n);
        const file = dumps(dir, t.pid).at(-1);
        const lookup = perfMap(t.pid);
        const fns = functions(file, lookup, cwd);
        got.push({ fns, s: summarise(fns, x.total), n: x.total, incl: inclusive === undefined ? undefined : inclusiveCalls(file, inclusive, lookup, cwd) });
      }
      if (before !== undefined) sameEntry(before, await storedEntry(t.url, opts, `${config} ${r}`), `${config} ${r}`);
      got.sort((a, b) => a.s.run - b.s.run);
      const best = got[0];
      result[r] = { ...best.s, gcMedian: median(got.map((g) => g.s.gc)), runs: got.map((g) => Math.round(g.s.run)), fns: best.fns, n: best.n, incl: best.incl };
      log(`  ${config} ${r}: run ${fmt(best.s.run / 1000, 1)}k Ir/req (windows ${result[r].runs.map((x) => fmt(x / 1000, 1)).join(', ')}), gc ${fmt(result[r].gcMedian / 1000, 1)}k`);
    }
  } finally {
    await t.stop();
    if (keep !== undefined) {
      // The dumps and the perf map, for callgrind_annotate's inclusive costs and call trees
      // (JIT callers are addresses there: look them up in the kept perf-PID.map).
      const to = join(keep, `${id}-${config}`);
      mkdirSync(to, { recursive: true });
      cpSync(dir, to, { recursive: true });
      try {
        copyFileSync(`/tmp/perf-${t.pid}.map`, join(to, `perf-${t.pid}.map`));
      } catch {
        // no perf map: JIT code stays unnamed
      }
    }
    rmSync(dir, { recursive: true, force: true });
    rmSync(`/tmp/perf-${t.pid}.map`, { force: true });
  }
  return result;
}

/** The functions whose self Ir per request differs most between two measurements of a route. */
export function diffFunctions(a, b, top) {
  const names = new Set([...a.fns.keys(), ...b.fns.keys()]);
  const rows = [];
  for (const name of names) {
    if (classify(name) !== 'run') continue;
    const x = (a.fns.get(name) ?? 0) / a.n;
    const y = (b.fns.get(name) ?? 0) / b.n;
    rows.push({ name, a: x, b: y, d: y - x });
  }
  return rows.sort((p, q) => Math.abs(q.d) - Math.abs(p.d)).slice(0, top);
}

export async function runInstr(o = {}) {
  const log = o.log ?? ((s) => process.stderr.write(s + '\n'));
  const configs = o.configs ?? ['undici'];
  for (const c of configs) if (!(c in CONFIGS)) throw new Error(`--configs: unknown config ${c}`);
  const routes = (process.env.BENCH_ROUTES ?? 'list20,list100,get,create').split(',').map((s) => s.trim());
  for (const r of routes) if (!(r in ROUTES)) throw new Error(`BENCH_ROUTES: unknown route ${r}`);
  // A createPet drops every list entry: the hits of a cached config would no longer be hits.
  for (const c of configs) if (CONFIGS[c].hits && routes.some((r) => ROUTES[r].method !== 'GET')) throw new Error(`--configs ${c}: BENCH_ROUTES must name GET routes only (list20,list100,get)`);
  const compare = o.compare;
  if (compare !== undefined && (compare.length !== 2 || !compare.every((c) => configs.includes(c)))) throw new Error('--compare: two configs of --configs, A,B');
  const common = {
    routes,
    n: envNum('BENCH_INSTR_N', 300, 20, 100_000),
    windows: envNum('BENCH_INSTR_WINDOWS', 3, 1, 20),
    warmup: envNum('BENCH_INSTR_WARMUP', 1500, 0, 1_000_000),
    connections: envNum('BENCH_INSTR_CONNECTIONS', 4, 1, 200),
    log,
  };
  const checkouts = [...(o.baseline ? [{ id: 'baseline', cwd: resolve(o.baseline) }] : []), { id: 'this', cwd: ROOT }];
  process.env.BENCH_UPSTREAM_KEEPALIVE_MS ??= '600000';
  const upstream = await startTarget('upstream');
  const results = {};
  try {
    // Every checkout and config at once: the counts do not depend on the load, the wall time does.
    const todo = configs.flatMap((config) => checkouts.filter((c) => !CONFIGS[config].thisCheckoutOnly || c.id === 'this').map((c) => ({ ...c, config })));
    const got = await Promise.all(todo.map((c) => measureTarget({ ...common, cwd: c.cwd, config: c.config, upstream, keep: o.keep, id: c.id, inclusive: o.inclusive })));
    todo.forEach((c, i) => {
      results[`${c.id}/${c.config}`] = got[i];
    });
  } finally {
    await upstream.stop();
  }
  return { results, checkouts: checkouts.map((c) => c.id), configs, compare, routes, inclusive: o.inclusive !== undefined, n: common.n, windows: common.windows, warmup: common.warmup, connections: common.connections };
}

/** Markdown, with --compare A,B: per checkout and route, config B against config A by part and by function. */
function compareConfigs(run, top) {
  const k = (x) => fmt(x / 1000, 1);
  const [ca, cb] = run.compare;
  let out = '';
  for (const id of run.checkouts) {
    const a = run.results[`${id}/${ca}`];
    const b = run.results[`${id}/${cb}`];
    if (a === undefined || b === undefined) continue;
    for (const r of run.routes) {
      const parts = [...new Set([...Object.keys(a[r].parts), ...Object.keys(b[r].parts)])].sort();
      const rows = parts.map((p) => [p, k(a[r].parts[p] ?? 0), k(b[r].parts[p] ?? 0), k((b[r].parts[p] ?? 0) - (a[r].parts[p] ?? 0))]);
      rows.push(['**run**', k(a[r].run), k(b[r].run), k(b[r].run - a[r].run)]);
      out += `\n\n${id}, ${ROUTES[r].name}: ${cb} against ${ca}, "run" by part (thousands of Ir per request)\n\n` + table(['part', ca, cb, 'difference'], rows);
      out += `\n\n${id}, ${ROUTES[r].name}: ${cb} against ${ca}, the functions that differ most (self Ir per request)\n\n`;
      out += table(['function', ca, cb, 'difference'], diffFunctions(a[r], b[r], top).map((f) => [f.name.slice(0, 110).replaceAll('|', '\\|'), fmt(f.a), fmt(f.b), (f.d > 0 ? '+' : '') + fmt(f.d)]));
    }
  }
  return out;
}

/** Markdown: "run" per checkout, config and route; the parts of each; with a baseline, the function differences. */
export function report(run, top) {
  const k = (x) => fmt(x / 1000, 1);
  const rows = [];
  for (const config of run.configs) {
    for (const id of run.checkouts) {
      const res = run.results[`${id}/${config}`];
      if (res === undefined) continue;
      for (const r of run.routes) {
        const x = res[r];
        rows.push([id, config, ROUTES[r].name, k(x.run), x.runs.map(k).join(' / '), k(x.gcMedian), k(x.compile)]);
      }
    }
  }
  let out = `${run.n} requests per window, ${run.windows} windows, after ${run.warmup} per route; ${run.connections} connections; thousands of instructions (Ir) per request.\n\n`;
  out += table(['checkout', 'config', 'route', 'run (least window)', 'run per window', 'gc (median)', 'compile (least window)'], rows);
  for (const config of run.configs) {
    const ids = run.checkouts.filter((id) => run.results[`${id}/${config}`] !== undefined);
    const parts = new Set();
    for (const id of ids) for (const r of run.routes) for (const p of Object.keys(run.results[`${id}/${config}`][r].parts)) parts.add(p);
    const head = ['part'];
    for (const r of run.routes) for (const id of ids) head.push(`${ROUTES[r].name} ${id}`);
    const prow = [...parts].sort().map((p) => {
      const row = [p];
      for (const r of run.routes) for (const id of ids) row.push(k(run.results[`${id}/${config}`][r].parts[p] ?? 0));
      return row;
    });
    out += `\n\n${config}: "run" by part (thousands of Ir per request)\n\n` + table(head, prow);
  }
  if (run.compare !== undefined) out += compareConfigs(run, top);
  if (run.inclusive) {
    for (const config of run.configs) {
      const ids = run.checkouts.filter((id) => run.results[`${id}/${config}`] !== undefined);
      for (const r of run.routes) {
        const names = new Set();
        for (const id of ids) for (const name of run.results[`${id}/${config}`][r].incl.keys()) names.add(name);
        const head = ['callee (inclusive Ir per request, calls per request)', ...ids];
        const rows = [...names].sort().map((name) => [
          name.slice(0, 110).replaceAll('|', '\\|'),
          ...ids.map((id) => {
            const x = run.results[`${id}/${config}`][r];
            const c = x.incl.get(name);
            return c === undefined ? '' : `${fmt(c.ir / x.n)} (${fmt(c.calls / x.n, 2)})`;
          }),
        ]);
        out += `\n\n${config}, ${ROUTES[r].name}: inclusive cost of the calls into the functions --inclusive names\n\n` + table(head, rows);
      }
    }
  }
  if (run.checkouts.includes('baseline')) {
    for (const config of run.configs) {
      const a = run.results[`baseline/${config}`];
      const b = run.results[`this/${config}`];
      if (a === undefined || b === undefined) continue;
      for (const r of run.routes) {
        out += `\n\n${config}, ${ROUTES[r].name}: this checkout ${k(b[r].run)}k against ${k(a[r].run)}k (${fmt((b[r].run / a[r].run - 1) * 100, 1)}%); the functions that differ most (self Ir per request):\n\n`;
        out += table(['function', 'baseline', 'this', 'difference'], diffFunctions(a[r], b[r], top).map((f) => [f.name.slice(0, 110).replaceAll('|', '\\|'), fmt(f.a), fmt(f.b), (f.d > 0 ? '+' : '') + fmt(f.d)]));
      }
    }
  }
  return out;
}

if (isMain(import.meta.url)) {
  const argv = process.argv.slice(2);
  const flag = (name) => {
    const i = argv.indexOf(name);
    return i === -1 ? undefined : argv[i + 1];
  };
  const m = machine();
  const keep = flag('--keep');
  const inclusive = flag('--inclusive');
  const run = await runInstr({
    baseline: flag('--baseline'),
    keep: keep === undefined ? undefined : resolve(keep),
    inclusive: inclusive === undefined ? undefined : new RegExp(inclusive),
    configs: flag('--configs')?.split(',').map((s) => s.trim()),
    compare: flag('--compare')?.split(',').map((s) => s.trim()),
  });
  if (argv.includes('--json')) {
    const plain = JSON.parse(JSON.stringify(run, (key, v) => (key === 'fns' || key === 'incl' ? undefined : v)));
    process.stdout.write(JSON.stringify({ machine: m, ...plain }) + '\n');
  } else {
    process.stdout.write(`${m.model}, ${m.node}, valgrind callgrind\n\n` + report(run, envNum('BENCH_INSTR_TOP', 12, 1, 200)) + '\n');
  }
  process.exit(0);
}
