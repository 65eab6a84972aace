#!/usr/bin/env node
/**
 * A bounded soak of the built gateway (dist), run as a plain node script:
 *
 *   node test/soak/soak.mjs            # SOAK_SECONDS=40 by default, at most 60
 *
 * The gateway runs in a child process (`serve` with the built-in backend on 127.0.0.1 port 0), so
 * the RSS sampled from /proc/<pid>/status is the gateway's alone. autocannon (programmatic API,
 * 50 connections) drives it in phases:
 *
 *   (a) steady valid load: listPets and getPet with the key (nothing is created during the
 *       phase, so the store does not grow and neither should memory);
 *   (b) a stream of distinct invalid keys: every request a new random well-formed key (401).
 *
 * RSS is sampled every second. After a warm-up, the mean RSS of the last third of each phase may
 * exceed that of the first third by at most the bound (SOAK_MAX_GROWTH_MB, default 30, and
 * SOAK_MAX_GROWTH_PCT, default 15: growth fails only when it is over both). Prints a table and
 * the final line `soak: N passed, M failed`; exits 1 when anything failed.
 *
 * Environment: SOAK_SECONDS (total phase time, default 40, capped at 60 minus start-up),
 * SOAK_CONNECTIONS (default 50), SOAK_ENGINE (undici | fastify | http-proxy-3, default undici),
 * SOAK_MAX_GROWTH_MB, SOAK_MAX_GROWTH_PCT.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CLI = join(ROOT, 'dist', 'cli', 'main.js');
const TOTAL_S = Math.max(6, Math.min(Number(process.env.SOAK_SECONDS ?? 40), 52));
const PHASE_S = Math.floor(TOTAL_S / 2);
const WARMUP_S = Math.max(2, Math.round(PHASE_S * 0.2));
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 50);
const ENGINE = process.env.SOAK_ENGINE ?? 'undici';
const MAX_GROWTH_MB = Number(process.env.SOAK_MAX_GROWTH_MB ?? 30);
const MAX_GROWTH_PCT = Number(process.env.SOAK_MAX_GROWTH_PCT ?? 15);
/** Everything, start-up and shutdown included, is over by then. */
const WATCHDOG_MS = (TOTAL_S + 25) * 1000;

const results = [];
/** The gateway child, for the watchdog to kill. */
let running;
function check(name, ok, detail = '') {
  results.push({ name, ok });
  console.log(`${ok ? 'ok    ' : 'FAILED'} ${name}${detail === '' ? '' : `: ${detail}`}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// The built CLI, current with src

function newestTs(dir, depth = 0) {
  if (depth > 8 || !existsSync(dir)) return 0;
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) newest = Math.max(newest, newestTs(p, depth + 1));
    else if (e.name.endsWith('.ts')) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

function ensureBuilt() {
  if (existsSync(CLI) && statSync(CLI).mtimeMs >= newestTs(join(ROOT, 'src'))) return;
  console.log('building dist (npm run build) ...');
  const r = spawnSync('npm', ['run', 'build'], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`npm run build failed:\n${r.stdout}\n${r.stderr}`);
}

// ---------------------------------------------------------------------------------------------
// The gateway process

function rssMb(pid) {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? NaN : Number(m[1]) / 1024;
  } catch {
    return NaN;
  }
}

async function startGateway(key, dir) {
  const policy = join(dir, 'policy.yaml');
  // bruteForce off: phase b must put every distinct invalid key through the key lookup (with the
  // default lock, one address is refused with 429 after 100 failures and the lookup never runs).
  writeFileSync(policy, JSON.stringify({ version: 1, upstream: { url: 'builtin' }, policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS', bruteForce: null } } }));
  const child = spawn(process.execPath, [CLI, 'serve', '--policy', policy, '--host', '127.0.0.1', '--port', '0', '--admin-port', '0', '--engine', ENGINE], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', PETSTORE_API_KEYS: key, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (s) => (stdout = (stdout + s).slice(-20_000)));
  child.stderr.setEncoding('utf8').on('data', (s) => (stderr = (stderr + s).slice(-20_000)));
  const exited = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
  const deadline = Date.now() + 20_000;
  for (;;) {
    // The human banner is on stderr (stdout is NDJSON).
    const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
    if (m !== null) return { child, url: m[1], exited, output: () => ({ stdout, stderr }) };
    if (child.exitCode !== null) throw new Error(`the gateway exited (${child.exitCode}) before listening:\n${stdout}\n${stderr}`);
    if (Date.now() > deadline) throw new Error(`the gateway did not listen within 20 s:\n${stdout}\n${stderr}`);
    await sleep(50);
  }
}

async function stopGateway(gw) {
  if (gw === undefined || gw.child.exitCode !== null || gw.child.signalCode !== null) return gw?.child.exitCode ?? null;
  gw.child.kill('SIGTERM');
  const timer = setTimeout(() => gw.child.kill('SIGKILL'), 5000);
  const { code } = await gw.exited;
  clearTimeout(timer);
  return code;
}

function call(url, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const h = { ...headers };
    if (body !== undefined) h['content-length'] = Buffer.byteLength(body);
    const req = httpRequest(url, { method, headers: h, agent: false });
    const timer = setTimeout(() => req.destroy(new Error('timed out')), 5000);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c) => (text += c));
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode, body: text });
      });
    });
    req.end(body);
  });
}

// ---------------------------------------------------------------------------------------------
// A phase: autocannon for `seconds`, RSS sampled every second

async function phase(name, gw, options) {
  const samples = [];
  const started = Date.now();
  const sampler = setInterval(() => samples.push({ t: (Date.now() - started) / 1000, mb: rssMb(gw.child.pid) }), 1000);
  samples.push({ t: 0, mb: rssMb(gw.child.pid) });
  let result;
  try {
    result = await autocannon({ url: gw.url, connections: CONNECTIONS, duration: PHASE_S, timeout: 10, ...options });
  } finally {
    clearInterval(sampler);
  }
  samples.push({ t: (Date.now() - started) / 1000, mb: rssMb(gw.child.pid) });
  const steady = samples.filter((s) => s.t >= WARMUP_S && Number.isFinite(s.mb));
  const third = Math.max(1, Math.floor(steady.length / 3));
  const mean = (xs) => xs.reduce((a, s) => a + s.mb, 0) / xs.length;
  const first = mean(steady.slice(0, third));
  const last = mean(steady.slice(-third));
  const growth = last - first;
  const statusCounts = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, v]) => [code, v.count]));
  return {
    name,
    result,
    statusCounts,
    samples,
    first,
    last,
    growth,
    growthPct: (growth / first) * 100,
    peak: Math.max(...samples.map((s) => s.mb).filter(Number.isFinite)),
  };
}

function growthOk(p) {
  // Fails only when over both bounds: a small process may move by more than 15%, a large one by more than 30 MB.
  return Number.isFinite(p.growth) && (p.growth <= MAX_GROWTH_MB || p.growthPct <= MAX_GROWTH_PCT);
}

function table(phases) {
  const rows = [['phase', 'requests', 'req/s', 'p99 ms', 'errors', 'statuses', 'RSS start MB', 'RSS end MB', 'first/last third MB', 'growth', 'peak MB']];
  for (const p of phases) {
    rows.push([
      p.name,
      String(p.result.requests.total),
      p.result.requests.average.toFixed(0),
      String(p.result.latency.p99),
      String(p.result.errors + p.result.timeouts),
      JSON.stringify(p.statusCounts),
      p.samples[0].mb.toFixed(1),
      p.samples[p.samples.length - 1].mb.toFixed(1),
      `${p.first.toFixed(1)} / ${p.last.toFixed(1)}`,
      `${p.growth >= 0 ? '+' : ''}${p.growth.toFixed(1)} MB (${p.growthPct.toFixed(1)}%)`,
      p.peak.toFixed(1),
    ]);
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  for (const [i, r] of rows.entries()) {
    console.log(r.map((c, j) => c.padEnd(widths[j])).join(' | '));
    if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('-|-'));
  }
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const startedAt = Date.now();
  console.log(`soak: ${PHASE_S} s per phase (warm-up ${WARMUP_S} s), ${CONNECTIONS} connections, engine ${ENGINE}, growth bound ${MAX_GROWTH_MB} MB or ${MAX_GROWTH_PCT}%`);
  ensureBuilt();
  const dir = mkdtempSync(join(tmpdir(), 'petstore-gateway-soak-'));
  const key = 'soak_' + randomBytes(24).toString('base64url');
  const auth = `Bearer ${key}`;
  let gw;
  try {
    gw = await startGateway(key, dir);
    running = gw;
    check('the gateway starts', true, `${gw.url}, pid ${gw.child.pid}, RSS ${rssMb(gw.child.pid).toFixed(1)} MB`);

    // Fixtures: 30 animals, so that a list of 20 is a real body; created before the phases.
    let created = 0;
    for (let i = 0; i < 30; i++) {
      const r = await call(`${gw.url}/v1/pets`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `pet${i}`, categoryId: i, status: ['available', 'pending', 'sold'][i % 3] }),
      });
      if (r.status === 201) created++;
    }
    check('fixtures created', created === 30, `${created}/30 animals`);

    const phases = [];
    const a = await phase('a: valid load', gw, {
      headers: { authorization: auth },
      requests: [
        { method: 'GET', path: '/v1/pets?limit=20' },
        { method: 'GET', path: '/v1/pets?limit=5&status=sold' },
        { method: 'GET', path: '/v1/pets/7' },
      ],
    });
    phases.push(a);
    check('phase a: no errors or timeouts', a.result.errors === 0 && a.result.timeouts === 0, `${a.result.errors} errors, ${a.result.timeouts} timeouts`);
    check('phase a: every answer 200', a.result.non2xx === 0 && a.result.requests.total > 0, JSON.stringify(a.statusCounts));
    check('phase a: RSS growth within the bound', growthOk(a), `${a.growth.toFixed(1)} MB (${a.growthPct.toFixed(1)}%)`);

    const b = await phase('b: distinct invalid keys', gw, {
      requests: [
        {
          method: 'GET',
          path: '/v1/pets',
          // A new well-formed key for every request: nothing may be kept per key.
          setupRequest: (req) => ({ ...req, headers: { ...(req.headers ?? {}), authorization: `Bearer inv_${randomBytes(24).toString('base64url')}` } }),
        },
      ],
    });
    phases.push(b);
    const only401 = Object.keys(b.statusCounts).length === 1 && b.statusCounts['401'] === b.result.requests.total;
    check('phase b: no errors or timeouts', b.result.errors === 0 && b.result.timeouts === 0, `${b.result.errors} errors, ${b.result.timeouts} timeouts`);
    check('phase b: every answer 401', only401 && b.result.requests.total > 0, JSON.stringify(b.statusCounts));
    check('phase b: RSS growth within the bound', growthOk(b), `${b.growth.toFixed(1)} MB (${b.growthPct.toFixed(1)}%)`);

    console.log('');
    table(phases);
    console.log('');
    console.log(`RSS samples (MB) a: ${a.samples.map((s) => s.mb.toFixed(0)).join(' ')}`);
    console.log(`RSS samples (MB) b: ${b.samples.map((s) => s.mb.toFixed(0)).join(' ')}`);

    const after = await call(`${gw.url}/v1/pets?limit=3`, { headers: { authorization: auth } });
    check('the gateway still answers afterwards', after.status === 200 && JSON.parse(after.body).length === 3, `${after.status}`);
    const code = await stopGateway(gw);
    check('SIGTERM: exit 0', code === 0, `exit ${code}`);
  } catch (err) {
    check('the soak ran to its end', false, err instanceof Error ? err.message : String(err));
  } finally {
    await stopGateway(gw).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
  const failed = results.filter((r) => !r.ok).length;
  console.log(`total ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
  console.log(`soak: ${results.length - failed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

const watchdog = setTimeout(() => {
  console.log(`soak: watchdog: still running after ${WATCHDOG_MS / 1000} s`);
  running?.child.kill('SIGKILL');
  console.log(`soak: ${results.filter((r) => r.ok).length} passed, ${results.filter((r) => !r.ok).length + 1} failed`);
  process.exit(1);
}, WATCHDOG_MS);
watchdog.unref();

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    console.log(`soak: ${results.filter((r) => r.ok).length} passed, ${results.filter((r) => !r.ok).length + 1} failed`);
    process.exit(1);
  },
);
