/**
 * The gateway's life as a process manager, a load balancer and an operator see it, through the
 * built CLI on 127.0.0.1: a start that fails ends the process with a non-zero code and one line
 * naming the culprit; SIGTERM drains (readiness first, then the listener); SIGHUP is safe at any
 * moment; `--workers` hands every worker the policy in force; readiness follows a reload.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer as createNetServer, type AddressInfo, type Server } from 'node:net';
import { join } from 'node:path';
import type { TapTest } from '../helpers/assert.js';
import { spawn } from 'node:child_process';
import { REDIS_SKIP, startRedis } from '../helpers/redis.js';
import {
  bearer,
  childEnv,
  CLI,
  PROJECT_ROOT,
  withAdminPort,
  ensureBuilt,
  forEachEngine,
  nodeCommand,
  request,
  runCli,
  sleep,
  spawnCliUntil,
  tempDir,
  testKey,
  waitFor,
  type ProcessHandle,
} from '../helpers/servers.js';

ensureBuilt();

const dir = tempDir(t, 'lifecycle');
const KEY = testKey();
const OTHER_KEY = testKey();
const hash = (key: string) => `sha256:${createHash('sha256').update(key).digest('hex')}`;

/** A policy file accepting one key (by its hash), plus `extra` YAML lines at the top level. */
function policyFile(name: string, key: string, extra = ''): string {
  const file = join(dir, name);
  writeFileSync(file, `version: 1\npolicies:\n  auth:\n    keys:\n      - { id: k, hash: "${hash(key)}" }\n    keysFromEnv: null\n${extra}`);
  return file;
}

const BANNER = /petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) /;
const ADMIN = /(?:"msg":"admin listening[^\n]*?"url":"(http:\/\/127\.0\.0\.1:\d+)"|"url":"(http:\/\/127\.0\.0\.1:\d+)","msg":"admin listening)/;

/** A port some other listener holds, for the test's life. */
async function busyPort(t: TapTest): Promise<number> {
  const blocker: Server = createNetServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
  return (blocker.address() as AddressInfo).port;
}

/** The JSON log lines a process wrote so far. */
function logLines(handle: ProcessHandle): Array<Record<string, unknown>> {
  return handle
    .output()
    .stdout.split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

function linesWith(handle: ProcessHandle, msg: string): Array<Record<string, unknown>> {
  return logLines(handle).filter((l) => l.msg === msg);
}

/** The exit of a process, or 'timeout' past `ms`. */
function exitWithin(handle: ProcessHandle, ms: number) {
  return Promise.race([handle.exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), ms).unref())]);
}

/** Whether process `pid` catches signal number `signal` now (Linux: its bit of SigCgt in /proc/PID/status). */
function catches(pid: number, signal: number): boolean {
  try {
    const m = /^SigCgt:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m !== null && ((BigInt(`0x${m[1]}`) >> BigInt(signal - 1)) & 1n) === 1n;
  } catch {
    return false;
  }
}
const catchesSighup = (pid: number) => catches(pid, 1);

/**
 * The CLI as a process manager starts it: plain node (nodeCommand). The test runner's loader in a
 * child's NODE_OPTIONS would catch SIGHUP itself before main.ts runs (and re-raise it when alone),
 * which would make "node catches SIGHUP" true too early.
 */
function spawnPlain(
  t: TapTest,
  args: string[],
  ready: RegExp,
  options: { detached?: boolean } = {},
): { pid: number; handle: ProcessHandle; started: Promise<{ handle: ProcessHandle; match: RegExpMatchArray }> } {
  // detached: a process group of its own (the test may signal the whole group, as a terminal's hangup does).
  const child = spawn(...nodeCommand([CLI, ...withAdminPort(args)]), { cwd: PROJECT_ROOT, env: childEnv({ LOG_LEVEL: 'info' }), stdio: ['ignore', 'pipe', 'pipe'], detached: options.detached === true });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })));
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    // The group: workers too, should the primary be gone.
    if (options.detached === true) process.kill(-(child.pid ?? 0), 'SIGKILL');
    else child.kill('SIGKILL');
    await exited;
  });
  const handle: ProcessHandle = { child, output: () => ({ stdout, stderr }), exited };
  const started = (async () => {
    const match = await waitFor(`${String(ready)}; stderr: ${stderr}`, () => (child.exitCode === null && child.signalCode === null ? (ready.exec(stderr) ?? undefined) : 'exited'), 30_000);
    if (match === 'exited') throw new Error(`exited (${child.exitCode ?? child.signalCode}) before ${String(ready)}\nstdout: ${stdout}\nstderr: ${stderr}`);
    return { handle, match };
  })();
  started.catch(() => undefined);
  return { pid: child.pid ?? 0, handle, started };
}

/** Statuses of `n` requests, each on a fresh connection (so the cluster spreads them over workers). */
async function statuses(url: string, key: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await request(`${url}/v1/pets`, { headers: bearer(key) })).status);
  return out;
}

// 1. A start that fails ends the process: non-zero, within the bound, one line naming the port
// and the option that changes it; on every engine, alone and with --workers.
forEachEngine(t, async (t, engine) => {
  for (const workers of ['1', '2']) {
    t.test(`serve --engine ${engine} --workers ${workers} on a busy port exits 1 with one clear line`, async (t) => {
      const port = await busyPort(t);
      const started = performance.now();
      const r = await runCli(t, ['serve', '--engine', engine, '--port', String(port), '--ephemeral-key', '--workers', workers, '--upstream', 'http://127.0.0.1:9/v1'], {
        env: { LOG_LEVEL: 'info' },
        timeoutMs: 20_000,
      });
      const ms = Math.round(performance.now() - started);
      t.comment(`exited after ${ms} ms`);
      t.equal(r.code, 1, 'exit 1');
      // Before, the process kept running (admin listener open) until killed, then exited 0. The
      // failure itself ends the process at once; the bound is wide because on a loaded 2-core
      // machine node's own start (loading the engine) takes seconds, yet far below the 20 s at
      // which runCli gives up on a process that idles.
      t.ok(ms < 15_000, `ended by itself, within ${ms} ms`);
      const lines = r.stderr.split('\n').filter((l) => l.includes(`cannot listen on 127.0.0.1:${port}`));
      t.ok(lines.length >= 1, 'the culprit is named');
      t.match(lines[0] ?? '', new RegExp(`^petstore-gateway: cannot listen on 127\\.0\\.0\\.1:${port}: EADDRINUSE \\(.*--port or server\\.port`), 'with the option that changes it');
      t.notMatch(r.stderr, /listening on http/, 'no banner');
      if (workers === '2') {
        t.match(r.stderr, /petstore-gateway: a worker \(pid \d+\) could not start \(exit code 1\); see its message above\. Stopping\.\n/, "the supervisor's decision");
        const line = r.stdout.split('\n').find((l) => l.includes('"msg":"a worker could not start; stopping"'));
        t.ok(line, 'and a JSON log line');
        if (line !== undefined) t.equal((line.match(/"pid":/g) ?? []).length, 1, 'with one pid field (the worker is workerPid)');
      }
    });
  }
});

// parity: the admin listener is the CLI's own node:http server, the same whatever engine serves the API.
t.test('serve with the admin port busy exits 1 and names server.admin / --admin-port', async (t) => {
  const port = await busyPort(t);
  const r = await runCli(t, ['serve', '--port', '0', '--ephemeral-key', '--admin-port', String(port)], { timeoutMs: 20_000 });
  t.equal(r.code, 1);
  t.match(r.stderr, `the admin listener cannot listen on 127.0.0.1:${port}: EADDRINUSE (set server.admin or --admin-port`);
});

// 3. Drain: /readyz 503 at once, the listener still accepts during server.drainDelayMs, then not.
forEachEngine(t, async (t, engine) => {
  t.test(`SIGTERM with drainDelayMs 1500 (${engine}): draining at once, new connections served during the delay, refused after, exit 0`, async (t) => {
    const file = policyFile(`drain-${engine}.yaml`, KEY, 'server:\n  drainDelayMs: 1500\n  shutdownGraceMs: 2000\n');
    const { handle, match } = await spawnCliUntil(t, ['serve', '--engine', engine, '--policy', file, '--port', '0'], new RegExp(`^(?=[\\s\\S]*${ADMIN.source})(?=[\\s\\S]*${BANNER.source})`), {
      env: { LOG_LEVEL: 'info' },
      timeoutMs: 30_000,
    });
    const admin = match[1] ?? match[2] ?? '';
    const url = match[3] ?? '';
    t.equal((await request(`${admin}/readyz`)).status, 200, 'ready before');
    const since = performance.now();
    handle.child.kill('SIGTERM');
    // The signal is delivered asynchronously: poll, each probe on a fresh connection.
    const draining = await waitForValue('readyz 503', () => request(`${admin}/readyz`), (r) => r.status === 503);
    const drainingMs = performance.now() - since;
    t.match(draining.json, { status: 'not ready', reason: 'draining' }, `readyz says draining ${Math.round(drainingMs)} ms after SIGTERM`);
    t.ok(drainingMs < 1000, 'long before the delay ends');
    await sleep(100);
    // A connection opened during the delay (a load balancer that has not yet removed the endpoint).
    const during = await request(`${url}/v1/pets`, { headers: bearer(KEY) });
    const duringMs = performance.now() - since;
    t.equal(during.status, 200, `a request on a new connection ${Math.round(duringMs)} ms after SIGTERM is served`);
    t.equal(during.headers.connection, 'close', 'and told to close its connection');
    t.ok(duringMs < 1500, 'within the delay (else this proves nothing)');
    const exit = await exitWithin(handle, 10_000);
    const exitMs = performance.now() - since;
    t.not(exit, 'timeout', 'stops after the delay');
    if (exit !== 'timeout') t.equal(exit.code, 0);
    t.ok(exitMs >= 1500, `not before the delay (${Math.round(exitMs)} ms)`);
    const port = Number(new URL(url).port);
    const refused = await new Promise<boolean>((resolve) => {
      const s = connect({ host: '127.0.0.1', port });
      s.once('connect', () => (s.destroy(), resolve(false)));
      s.once('error', () => resolve(true));
    });
    t.ok(refused, 'and then refuses connections');
    t.ok(linesWith(handle, 'draining: /readyz answers 503 while the listener still accepts').length === 1, 'one log line says it drains');
  });
});

// 9. SIGHUP before ready is deferred, never fatal.
// parity: the early SIGHUP handler is main.ts's, installed before any engine is loaded.
t.test('a SIGHUP while serve starts is deferred with a line, then the reload runs; the process serves', async (t) => {
  const file = policyFile('early-hup.yaml', KEY);
  const { pid, started } = spawnPlain(t, ['serve', '--policy', file, '--port', '0'], BANNER);
  await waitFor('SIGHUP caught', () => catchesSighup(pid), 10_000);
  process.kill(pid, 'SIGHUP');
  const { handle, match } = await started;
  t.pass('it survived the SIGHUP');
  const reloaded = await waitFor('the reload line', () => linesWith(handle, 'policy reloaded')[0], 10_000);
  const early = handle.output().stderr.includes('SIGHUP while starting: the policy is reloaded as soon as the gateway can');
  t.comment(early ? 'the SIGHUP came while starting' : 'the SIGHUP came once serve had its handler');
  t.equal(reloaded.reason, early ? 'SIGHUP (deferred)' : 'SIGHUP');
  t.equal(linesWith(handle, 'policy reloaded').length, 1, 'one reload');
  t.equal((await request(`${match[1]}/v1/pets`, { headers: bearer(KEY) })).status, 200, 'serving');
});

// 9b. Signals on a schedule from the moment node runs main.ts (it catches SIGHUP): before that
// instant node itself is booting and no program can catch a signal (signals.ts).
const SCHEDULE_MS = [0, 50, 150, 400];

// parity: the early signal handlers are main.ts's and the supervisor's, installed before any engine is loaded.
t.test('SIGHUP 0, 50, 150 and 400 ms into the start never stops serve, alone or with --workers 2 (the whole process group)', async (t) => {
  for (const workers of [1, 2]) {
    await t.test(`--workers ${workers}`, async (t) => {
      const file = policyFile(`hup-schedule-${workers}.yaml`, KEY);
      const { pid, handle, started } = spawnPlain(t, ['serve', '--policy', file, '--port', '0', '--workers', String(workers)], BANNER, { detached: true });
      await waitFor('SIGHUP caught', () => catchesSighup(pid), 10_000);
      const since = performance.now();
      for (const at of SCHEDULE_MS) {
        await sleep(Math.max(0, at - (performance.now() - since)));
        if (handle.child.exitCode !== null || handle.child.signalCode !== null) break;
        // To the group: with --workers, a worker still booting gets it too.
        process.kill(-pid, 'SIGHUP');
      }
      const { match } = await started;
      t.pass(`serving after ${SCHEDULE_MS.length} SIGHUPs`);
      t.strictSame(await statuses(match[1] ?? '', KEY, 4), [200, 200, 200, 200], 'answers with the key');
      // And it still reloads: with --workers, each worker logs its own line.
      const before = linesWith(handle, 'policy reloaded').length;
      handle.child.kill('SIGHUP');
      await waitFor('the reload lines', () => linesWith(handle, 'policy reloaded').length >= before + workers, 10_000);
      t.notOk(linesWith(handle, 'a worker could not start; stopping').length > 0, 'no worker stopped the group');
      handle.child.kill('SIGTERM');
      const exit = await exitWithin(handle, 20_000);
      t.not(exit, 'timeout');
      if (exit !== 'timeout') t.strictSame(exit, { code: 0, signal: null }, 'then SIGTERM stops it, exit 0');
    });
  }
});

/** The pids of the children of `pid` (Linux: /proc/PID/task/PID/children). */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter((p) => p !== '').map(Number);
  } catch {
    return [];
  }
}

// parity: the supervisor's rule for a worker that never listened is the CLI's, whatever engine the workers run.
t.test('--workers 2: a worker of the first set killed by a signal while it starts is replaced; the group starts', async (t) => {
  const file = policyFile('worker-killed.yaml', KEY);
  const { pid, handle, started } = spawnPlain(t, ['serve', '--policy', file, '--port', '0', '--workers', '2'], /listening on (http:\/\/127\.0\.0\.1:\d+) .* with 2 workers\n/);
  const first = await waitFor('a worker forked', () => childrenOf(pid)[0], 20_000);
  // Long before it listens (a start takes hundreds of ms): as a hangup or the OOM killer would.
  process.kill(first, 'SIGKILL');
  const { match } = await started;
  t.strictSame(await statuses(match[1] ?? '', KEY, 4), [200, 200, 200, 200], 'serving');
  t.match(linesWith(handle, 'worker exited; starting another')[0], { workerPid: first, signal: 'SIGKILL' }, 'the killed worker was replaced');
  handle.child.kill('SIGTERM');
  const exit = await exitWithin(handle, 20_000);
  if (exit !== 'timeout') t.equal(exit.code, 0);
});

// parity: the early stop handler is main.ts's, installed before any engine is loaded.
t.test('SIGTERM 0, 50, 150 or 400 ms into the start exits 0 with a line, alone or with --workers 2', async (t) => {
  const file = policyFile('term-schedule.yaml', KEY);
  for (const workers of [1, 2]) {
    for (const at of SCHEDULE_MS) {
      const { pid, handle } = spawnPlain(t, ['serve', '--policy', file, '--port', '0', '--workers', String(workers)], BANNER);
      await waitFor('SIGHUP caught', () => catchesSighup(pid), 10_000);
      await sleep(at);
      process.kill(pid, 'SIGTERM');
      const exit = await exitWithin(handle, 20_000);
      const { stdout, stderr } = handle.output();
      const what = `--workers ${workers}, SIGTERM at +${at} ms`;
      t.strictSame(exit, { code: 0, signal: null }, `${what}: exit 0`);
      // Before the logger exists, a line on stderr; after, a JSON line (or the stop of a gateway that already served).
      const said = /SIGTERM while starting: stopped before serving/.test(stderr) || /"msg":"stopped before serving"/.test(stdout) || /"msg":"stopped"/.test(stdout);
      t.ok(said, `${what}: a line says it stopped`);
    }
  }
});

// 9. --workers: the policy in force for every worker, SIGHUP at once after start, a crash never
// stops the group.
// parity: the supervisor (node:cluster, its IPC hand-over of the policy) is the CLI's, whatever engine
// the workers run; each engine's reload is tested on every engine (reload.test.ts).
t.test('--workers 2: SIGHUP right after start, refused reload, edited file, worker crashes: every worker runs the policy in force', async (t) => {
  const file = policyFile('workers.yaml', KEY);
  const { pid: primary, started } = spawnPlain(t, ['serve', '--policy', file, '--port', '0', '--workers', '2'], /listening on (http:\/\/127\.0\.0\.1:\d+) .* with 2 workers\n/);
  await waitFor('SIGHUP caught', () => catchesSighup(primary), 10_000);
  // At once: before, the primary passed it on to workers still loading, which died of it (exit 129)
  // and stopped the group.
  process.kill(primary, 'SIGHUP');
  const { handle, match } = await started;
  const url = match[1] ?? '';
  t.match(handle.output().stderr, /warning: the built-in backend keeps its pets per process: with --workers 2/, 'the built-in backend with workers is warned about');
  t.strictSame(await statuses(url, KEY, 10), Array(10).fill(200), 'serving with the key');

  // A refused reload: the file stays invalid on disk.
  writeFileSync(file, 'version: 1\npolicies:\n  auth:\n    keys: [ { id: k } ]\n');
  handle.child.kill('SIGHUP');
  await waitFor('the refusal', () => linesWith(handle, 'policy reload refused; the previous policy stays')[0], 10_000);
  t.equal(linesWith(handle, 'policy reload refused; the previous policy stays').length, 1, 'refused once, by the primary');

  const workerPids = () => linesWith(handle, 'petstore-gateway listening').map((l) => Number(l.pid));
  const crash = async (n: number) => {
    const pid = workerPids().at(-1) ?? 0;
    process.kill(pid, 'SIGKILL');
    await waitFor(`replacement ${n}`, () => workerPids().length >= 2 + n, 15_000);
  };
  await crash(1);
  t.equal(handle.child.exitCode, null, 'a crash after a refused reload does not stop the group');
  t.strictSame(await statuses(url, KEY, 10), Array(10).fill(200), 'the replacement runs the policy in force, not the invalid file');

  // A valid file, edited but not reloaded: a replacement still runs the policy in force.
  policyFile('workers.yaml', OTHER_KEY);
  await crash(2);
  t.equal(handle.child.exitCode, null, 'a second crash does not stop the group');
  t.strictSame(await statuses(url, KEY, 10), Array(10).fill(200), 'the old key on every worker');
  t.strictSame(await statuses(url, OTHER_KEY, 10), Array(10).fill(401), 'the key of the unloaded file on none');

  const before = linesWith(handle, 'policy reloaded').length;
  handle.child.kill('SIGHUP');
  await waitFor('both workers reloaded', () => linesWith(handle, 'policy reloaded').length >= before + 2, 10_000);
  t.strictSame(await statuses(url, OTHER_KEY, 10), Array(10).fill(200), 'after SIGHUP, the new key on every worker');
  handle.child.kill('SIGTERM');
  const exit = await exitWithin(handle, 20_000);
  t.not(exit, 'timeout');
  if (exit !== 'timeout') t.equal(exit.code, 0);
});

// 10. --watch: one reload line per change of the file.
// parity: the file watch and the reload's log line are the CLI's, the same for every engine.
t.test('--watch: one "policy reloaded" line per change; a write that changes nothing reloads nothing', async (t) => {
  const file = policyFile('watch.yaml', KEY);
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--port', '0', '--watch'], BANNER, { env: { LOG_LEVEL: 'info' }, timeoutMs: 30_000 });
  policyFile('watch.yaml', OTHER_KEY);
  await waitFor('the reload', () => linesWith(handle, 'policy reloaded')[0], 10_000);
  await sleep(600);
  t.equal(linesWith(handle, 'policy reloaded').length, 1, 'one line for one change');
  policyFile('watch.yaml', OTHER_KEY);
  await sleep(800);
  t.equal(linesWith(handle, 'policy reloaded').length, 1, 'the same content again: no reload');
  t.equal((await request(`${match[1]}/v1/pets`, { headers: bearer(OTHER_KEY) })).status, 200);
});

// 2. Readiness follows the policy in force: rate-limit.onStoreError, reloaded both ways, Redis down.
// parity: readiness is the CLI's ops (src/ops), read the same whatever engine serves the API.
t.test('/readyz follows a reloaded rate-limit.onStoreError with Redis down', { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const limits = (mode: string) => `  rate-limit:\n    limit: 100\n    store: { redis: { url: "${redis.url}", commandTimeoutMs: 250 } }\n    onStoreError: ${mode}\n`;
  const write = (mode: string) => {
    const file = policyFile('readiness.yaml', KEY);
    writeFileSync(file, readFileSync(file, 'utf8') + limits(mode));
    return file;
  };
  const file = write('closed');
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--port', '0'], new RegExp(`^(?=[\\s\\S]*${ADMIN.source})(?=[\\s\\S]*${BANNER.source})`), {
    env: { LOG_LEVEL: 'info' },
    timeoutMs: 30_000,
  });
  const admin = match[1] ?? match[2] ?? '';
  const readyz = async () => ((await request(`${admin}/readyz`)).json as { reason?: string }).reason ?? 'ready';
  // The store connects once the gateway runs: ready when it has.
  t.equal(await waitForValue('ready', readyz, (r) => r === 'ready'), 'ready', 'ready with Redis up');
  await redis.kill();
  t.equal(await waitForValue('store down', readyz, (r) => r === 'store down'), 'store down', 'closed: not ready while Redis is down');
  const reloads = () => linesWith(handle, 'policy reloaded').length;
  write('open');
  handle.child.kill('SIGHUP');
  await waitFor('reload to open', () => reloads() === 1, 10_000);
  t.equal(await readyz(), 'ready', 'open (reloaded): ready, since requests are served without the store');
  write('closed');
  handle.child.kill('SIGHUP');
  await waitFor('reload to closed', () => reloads() === 2, 10_000);
  t.equal(await readyz(), 'store down', 'closed (reloaded): not ready again');
});

/** Polls an async value until `ok` (at most 10 s); the last value. */
async function waitForValue<T>(what: string, get: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  let last = await get();
  for (let i = 0; i < 100 && !ok(last); i++) {
    await sleep(100);
    last = await get();
  }
  if (!ok(last)) throw new Error(`${what}: still ${JSON.stringify(last)}`);
  return last;
}
