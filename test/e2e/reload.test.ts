/**
 * Hot reload of the built CLI (`serve --policy FILE`), each gateway its own process on 127.0.0.1
 * port 0: SIGHUP and --watch swap the policy; an invalid file, or one that changes `upstream` or
 * `server`, is refused with its problems logged and the old policy stays; reloads under load fail
 * no request; a request in flight finishes under the policy it started with.
 *
 * The file reload itself (signals, --watch, refusals) is the CLI's and the same for every engine:
 * (a)-(d) run on the default engine; the load and in-flight tests, which depend on how each
 * engine's front holds the gateway of a request, run on each engine.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { Agent, request as httpRequest, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { assertError } from '../helpers/assert.js';
import {
  bearer,
  ENGINES,
  ensureBuilt,
  request,
  sendJson,
  sleep,
  spawnCliUntil,
  startStubUpstream,
  tempDir,
  testKey,
  waitFor,
  type Engine,
  type ProcessHandle,
  logEntries,
  type LogEntry,
} from '../helpers/servers.js';
import { hashKey } from '../../src/policies/auth/index.js';
import { httpsRequest, makeTestPki } from '../helpers/certs.js';

ensureBuilt();

const dir = tempDir(t, 'reload');

/** The key every gateway here gets through PETSTORE_API_KEYS. */
const KEY = testKey();
/** A key that only policy files name, by its hash. */
const KEY2 = testKey();
const READY = /petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) /;
const RELOADED = 'policy reloaded';
const REFUSED = 'policy reload refused; the previous policy stays';
const JSON_BODY = { 'content-type': 'application/json' };

// ---------------------------------------------------------------------------------------------
// Small helpers (bounded in time)

/** Waits for the next reload outcome (reloaded or refused) after `since`. */
function nextReload(handle: ProcessHandle, since: number, timeoutMs = 5000): Promise<LogEntry> {
  return waitFor('a reload outcome', () => logEntries(handle, since).find((e) => e.msg === RELOADED || e.msg === REFUSED), timeoutMs);
}

/** Replaces a file atomically (write then rename), as a config management tool would. */
function writeAtomic(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, file);
}

/**
 * A directory as the kubelet lays out a ConfigMap or Secret volume: each file a symlink through
 * `..data`, itself a symlink to a timestamped directory; `update` writes a new one and swaps
 * `..data` atomically (through `..data_tmp`), then removes nothing the test needs.
 */
function kubeletVolume(root: string, files: Record<string, string | Buffer>): { dir: string; update(next: Record<string, string | Buffer>): void } {
  mkdirSync(root, { recursive: true });
  let version = 0;
  const write = (next: Record<string, string | Buffer>) => {
    const name = `..2026_11_28_00_00_0${version++}`;
    mkdirSync(join(root, name));
    for (const [file, content] of Object.entries(next)) writeFileSync(join(root, name, file), content);
    return name;
  };
  symlinkSync(write(files), join(root, '..data'));
  for (const file of Object.keys(files)) symlinkSync(join('..data', file), join(root, file));
  return {
    dir: root,
    update(next) {
      symlinkSync(write(next), join(root, '..data_tmp'));
      renameSync(join(root, '..data_tmp'), join(root, '..data'));
    },
  };
}

/** A policy file text: JSON, which is YAML 1.2. */
function policy(policies: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ version: 1, upstream: { url: 'builtin' }, ...extra, policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' }, ...policies } }, null, 2) + '\n';
}

interface Gw {
  readonly url: string;
  readonly handle: ProcessHandle;
  readonly file: string;
  /** Rewrites the policy file, sends SIGHUP and returns the reload outcome logged. */
  reload(text: string): Promise<LogEntry>;
}

async function serve(name: string, text: string, extraArgs: string[] = []): Promise<Gw> {
  const sub = mkdtempSync(join(dir, `${name}-`));
  const file = join(sub, 'policy.yaml');
  writeFileSync(file, text);
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--host', '127.0.0.1', '--port', '0', ...extraArgs], READY, {
    env: { PETSTORE_API_KEYS: KEY, LOG_LEVEL: 'info' },
    timeoutMs: 30_000,
  });
  return {
    url: match[1]!,
    handle,
    file,
    async reload(next: string) {
      const since = handle.output().stdout.length;
      writeAtomic(file, next);
      handle.child.kill('SIGHUP');
      return nextReload(handle, since);
    },
  };
}

const list = (gw: Gw, key: string, query = '') => request(`${gw.url}/v1/pets${query}`, { headers: bearer(key) });

// Every gateway process starts now, concurrently (each loads the whole CLI); the tests await them.
const stub = startStubUpstream(t, stubHandler);
const BASE = policy();
const load = Object.fromEntries(ENGINES.map((e) => [e, serve(`load-${e}`, BASE, ['--engine', e])])) as Record<Engine, Promise<Gw>>;
// (d2): the policy from a ConfigMap volume, the certificate from a Secret volume, over TLS.
const pki = makeTestPki(t);
const configMap = kubeletVolume(join(dir, 'configmap'), { 'policy.yaml': policy({}, { server: { tls: { certFile: join(dir, 'secret', 'tls.crt'), keyFile: join(dir, 'secret', 'tls.key') } } }) });
const secret = kubeletVolume(join(dir, 'secret'), { 'tls.crt': pki.read(pki.server.cert), 'tls.key': pki.read(pki.server.key) });
const kubelet = spawnCliUntil(t, ['serve', '--policy', join(configMap.dir, 'policy.yaml'), '--host', '127.0.0.1', '--port', '0', '--watch'], /petstore-gateway listening on (https:\/\/127\.0\.0\.1:\d+) /, {
  env: { PETSTORE_API_KEYS: KEY, LOG_LEVEL: 'info' },
  timeoutMs: 30_000,
});
kubelet.catch(() => undefined);
const processes = {
  // The SIGHUP tests (a) (b) (c) run on the default engine's load process, before its load test.
  main: load.fastify,
  watched: serve('watched', BASE, ['--watch']),
  load,
  inflight: Object.fromEntries(
    ENGINES.map((e) => [e, stub.then((s) => serve(`inflight-${e}`, policy({}, { upstream: { url: `${s.origin}/v1` } }), ['--engine', e]))]),
  ) as Record<Engine, Promise<Gw>>,
};
for (const p of [processes.main, processes.watched, ...Object.values(processes.load), ...Object.values(processes.inflight)]) p.catch(() => undefined);

// ---------------------------------------------------------------------------------------------
// (a) (b) (c) SIGHUP

// parity: the SIGHUP reload (read, validate, refuse, swap the holder) is the CLI's, the same for every engine;
// how each engine picks up the new policy under load and in flight is tested on every engine in (e) and (f).
t.test('SIGHUP reloads the policy file: a new key hash and list-pets.outOfRange: clamp take effect', async (t) => {
  const gw = await processes.main;
  t.equal((await list(gw, KEY)).status, 200, 'the env key works');
  assertError(t, await list(gw, KEY2), 401, 'invalid_api_key');
  assertError(t, await list(gw, KEY, '?limit=500'), 400, 'invalid_query', { message: 'limit must be at most 100' });

  const outcome = await gw.reload(policy({ auth: { keys: [{ id: 'second', hash: hashKey(KEY2) }], keysFromEnv: 'PETSTORE_API_KEYS' }, 'list-pets': { outOfRange: 'clamp' } }));
  t.equal(outcome.msg, RELOADED, 'logged: policy reloaded');
  t.equal(outcome.reason, 'SIGHUP');
  t.equal(outcome.level, 30, 'at info level');

  t.equal((await list(gw, KEY2)).status, 200, 'the key added by hash is accepted');
  t.equal((await list(gw, KEY)).status, 200, 'the env key still is');
  const clamped = await list(gw, KEY, '?limit=500');
  t.equal(clamped.status, 200, 'limit=500 is clamped, not refused');
  t.ok(Array.isArray(clamped.json), 'a list');
  t.equal(gw.handle.child.exitCode, null, 'the process is still running');
});

// parity: the SIGHUP reload (read, validate, refuse, swap the holder) is the CLI's, the same for every engine;
// how each engine picks up the new policy under load and in flight is tested on every engine in (e) and (f).
t.test('an invalid file is refused: its problems are logged and the old policy stays', async (t) => {
  const gw = await processes.main;
  // The state left by the previous test: KEY2 accepted, limit clamped.
  const cases: Array<[string, string, RegExp[]]> = [
    [
      'schema violations',
      policy({ auth: { keys: [{ id: 'second', hash: 'sha256:nothex' }], keysFromEnv: 'PETSTORE_API_KEYS' }, 'list-pets': { outOfRange: 'sometimes' } }),
      [/^\$\.policies\.auth\.keys\[0\]\.hash: must be "sha256:" and 64 lower-case hex digits/, /^\$\.policies\["list-pets"\]\.outOfRange: must be one of: reject, clamp/],
    ],
    ['not YAML', 'policies: [\n  auth: {\n', [/^\$: not valid YAML or JSON/]],
    ['an unknown policy', policy({ 'ip-filter': {} }), [/^\$\.policies\["ip-filter"\]: unknown property 'ip-filter'/]],
  ];
  for (const [name, text, expected] of cases) {
    await t.test(name, async (t) => {
      const outcome = await gw.reload(text);
      t.equal(outcome.msg, REFUSED, `logged: ${REFUSED}`);
      t.equal(outcome.level, 50, 'at error level');
      t.equal(outcome.reason, 'SIGHUP');
      t.equal(outcome.file, gw.file, 'names the file');
      const problems = outcome.problems as string[];
      t.ok(Array.isArray(problems) && problems.length >= expected.length, `problems listed: ${JSON.stringify(problems)}`);
      for (const re of expected) t.ok(problems.some((p) => re.test(p)), `a problem matches ${re}`);
      const line = JSON.stringify(outcome);
      t.notOk(line.includes(KEY) || line.includes(KEY2), 'no key in the log line');
      t.equal((await list(gw, KEY2)).status, 200, 'the old policy stays: the key added by hash still works');
      t.equal((await list(gw, KEY, '?limit=500')).status, 200, 'the old policy stays: limit still clamped');
    });
  }
});

// parity: the SIGHUP reload (read, validate, refuse, swap the holder) is the CLI's, the same for every engine;
// how each engine picks up the new policy under load and in flight is tested on every engine in (e) and (f).
t.test('a file that leaves no API key at all is refused, as serve refuses to start on it', async (t) => {
  const gw = await processes.main;
  const outcome = await gw.reload(policy({ auth: { keys: [], keysFromEnv: null } }));
  t.equal(outcome.msg, REFUSED, 'refused');
  t.equal((await list(gw, KEY)).status, 200, 'the env key still works');
  t.equal((await list(gw, KEY2)).status, 200, 'the key added by hash still works');
  // Whatever happened, put the state of the previous tests back for the next one.
  const back = await gw.reload(policy({ auth: { keys: [{ id: 'second', hash: hashKey(KEY2) }], keysFromEnv: 'PETSTORE_API_KEYS' }, 'list-pets': { outOfRange: 'clamp' } }));
  t.equal(back.msg, RELOADED, 'a valid file reloads again');
  t.equal((await list(gw, KEY)).status, 200);
});

// parity: the SIGHUP reload (read, validate, refuse, swap the holder) is the CLI's, the same for every engine;
// how each engine picks up the new policy under load and in flight is tested on every engine in (e) and (f).
t.test('a change to upstream or server is refused (restart only), the rest of that file too', async (t) => {
  const gw = await processes.main;
  const policies = { auth: { keys: [{ id: 'second', hash: hashKey(KEY2) }], keysFromEnv: 'PETSTORE_API_KEYS' }, 'list-pets': { outOfRange: 'reject' } };
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['upstream.url', { upstream: { url: 'http://127.0.0.1:9/v1' } }, '$.upstream'],
    ['upstream.timeouts', { upstream: { url: 'builtin', timeouts: { headersMs: 1234 } } }, '$.upstream'],
    ['server.keepAliveTimeoutMs', { server: { keepAliveTimeoutMs: 4000 } }, '$.server'],
    ['server.shutdownGraceMs', { server: { shutdownGraceMs: 1 } }, '$.server'],
  ];
  for (const [name, extra, path] of cases) {
    await t.test(name, async (t) => {
      const outcome = await gw.reload(policy(policies, extra));
      t.equal(outcome.msg, REFUSED, 'refused');
      t.strictSame(outcome.problems, [`${path}: changed: this section takes effect only on a restart`], 'the problem names the section');
      const res = await list(gw, KEY, '?limit=500');
      t.equal(res.status, 200, 'the policy part of the refused file (outOfRange: reject) did not take effect either');
    });
  }
  await t.test('the same sections written out with their defaults are not a change', async (t) => {
    const explicit = {
      upstream: { url: 'builtin', timeouts: { connectMs: 2000, headersMs: 10000, bodyMs: 10000 }, connections: 128 },
      server: { host: '127.0.0.1', port: 8080 /* --port 0 overrides it, as at start */ },
    };
    const outcome = await gw.reload(policy(policies, explicit));
    t.equal(outcome.msg, RELOADED, 'reloaded');
    assertError(t, await list(gw, KEY, '?limit=500'), 400, 'invalid_query', { message: 'limit must be at most 100' });
  });
});

// ---------------------------------------------------------------------------------------------
// (d) --watch

// parity: --watch is the CLI's file watcher, before any engine; (e) and (f) cover each engine's side of a reload.
t.test('--watch: writing the file reloads it without a signal', async (t) => {
  const gw = await processes.watched;
  assertError(t, await list(gw, KEY, '?limit=0'), 400, 'invalid_query', { message: 'limit must be at least 1' });

  await t.test('an in-place write', async (t) => {
    const since = gw.handle.output().stdout.length;
    writeFileSync(gw.file, policy({ 'list-pets': { outOfRange: 'clamp' } }));
    const outcome = await nextReload(gw.handle, since);
    t.equal(outcome.msg, RELOADED);
    t.equal(outcome.reason, 'file changed');
    t.equal((await list(gw, KEY, '?limit=0')).status, 200, 'limit=0 clamped to 1');
  });

  await t.test('an editor-style replace (write elsewhere, rename into place)', async (t) => {
    const since = gw.handle.output().stdout.length;
    writeAtomic(gw.file, policy({ auth: { keys: [{ id: 'second', hash: hashKey(KEY2) }], keysFromEnv: 'PETSTORE_API_KEYS' } }));
    const outcome = await nextReload(gw.handle, since);
    t.equal(outcome.msg, RELOADED);
    t.equal(outcome.reason, 'file changed');
    t.equal((await list(gw, KEY2)).status, 200, 'the new key works');
    assertError(t, await list(gw, KEY, '?limit=0'), 400, 'invalid_query', { message: 'limit must be at least 1' });
  });

  await t.test('an invalid write is refused and logged; the policy stays', async (t) => {
    const since = gw.handle.output().stdout.length;
    writeFileSync(gw.file, policy({ 'new-pet': { maxBytes: 1 } }));
    const outcome = await nextReload(gw.handle, since);
    t.equal(outcome.msg, REFUSED);
    t.equal(outcome.reason, 'file changed');
    t.match(JSON.stringify(outcome.problems), /new-pet.*maxBytes/);
    t.equal((await list(gw, KEY2)).status, 200, 'the previous policy stays');
  });

  await t.test('another file in the same directory does not trigger a reload', async (t) => {
    const since = gw.handle.output().stdout.length;
    writeFileSync(join(gw.file, '..', 'unrelated.txt'), 'x');
    await sleep(400);
    t.equal(logEntries(gw.handle, since).filter((e) => e.msg === RELOADED || e.msg === REFUSED).length, 0, 'no reload');
  });
});

// parity: --watch is the CLI's file watcher, before any engine; the TLS listener's reload is the same node server on every engine (tls.test.ts).
t.test('--watch follows a Kubernetes ConfigMap and Secret update (the ..data symlink swap): the policy and the certificate', async (t) => {
  const { handle, match } = await kubelet;
  const url = match[1]!;
  const ca = pki.read(pki.ca);
  const limit0 = () => httpsRequest(`${url}/v1/pets?limit=0`, { ca, headers: { authorization: `Bearer ${KEY}` } });
  t.equal((await limit0()).status, 400, 'limit=0 refused under the first policy');

  let since = handle.output().stdout.length;
  const tls = { certFile: join(dir, 'secret', 'tls.crt'), keyFile: join(dir, 'secret', 'tls.key') };
  configMap.update({ 'policy.yaml': policy({ 'list-pets': { outOfRange: 'clamp' } }, { server: { tls } }) });
  const outcome = await nextReload(handle, since);
  t.equal(outcome.msg, RELOADED, 'the ConfigMap update is reloaded');
  t.equal(outcome.reason, 'file changed');
  t.equal((await limit0()).status, 200, 'limit=0 clamped: the new policy serves');
  await sleep(400);
  t.equal(logEntries(handle, since).filter((e) => e.msg === RELOADED || e.msg === REFUSED).length, 1, 'one reload for one update');

  since = handle.output().stdout.length;
  secret.update({ 'tls.crt': pki.read(pki.server2.cert), 'tls.key': pki.read(pki.server2.key) });
  const notAfter = new Date(Date.parse(new X509Certificate(readFileSync(pki.server2.cert)).validTo)).toISOString();
  const reloaded = await waitFor('the certificate reload', () => logEntries(handle, since).find((e) => e.msg === 'TLS certificate reloaded'), 5000);
  t.match(reloaded, { reason: 'certificate file changed', notAfter }, 'the Secret update is reloaded: the second certificate');
  await sleep(400);
  t.equal(logEntries(handle, since).filter((e) => e.msg === 'TLS certificate reloaded').length, 1, 'one reload for the certificate and key swapped together');
  t.equal(logEntries(handle, since).filter((e) => e.msg === RELOADED || e.msg === REFUSED).length, 0, 'a Secret update is no policy change');
  t.equal((await limit0()).status, 200, 'still serving over TLS');
});

// ---------------------------------------------------------------------------------------------
// (e) SIGHUP under load

interface Answer {
  readonly status: number;
  readonly body: string;
}

/** One request with the given agent (keep-alive) or a fresh connection; bounded by timeoutMs. */
function call(url: string, options: { method?: string; headers?: Record<string, string>; body?: string; agent?: Agent }, timeoutMs = 5000): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...(options.headers ?? {}) };
    if (options.body !== undefined) headers['content-length'] = Buffer.byteLength(options.body);
    const req = httpRequest(url, { method: options.method ?? 'GET', headers, agent: options.agent ?? false });
    const timer = setTimeout(() => req.destroy(new Error('timed out')), timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
      });
    });
    req.end(options.body);
  });
}

for (const engine of ENGINES) t.test(`engine ${engine}: SIGHUP every ~100 ms between two valid policies under load: no request fails`, async (t) => {
  const gw = await processes.load[engine];
  const A = policy({ 'list-pets': { outOfRange: 'reject', unknownParams: 'drop' } });
  const B = policy({
    auth: { keys: [{ id: 'second', hash: hashKey(KEY2) }], keysFromEnv: 'PETSTORE_API_KEYS' },
    'list-pets': { outOfRange: 'clamp', unknownParams: 'reject' },
    'new-pet': { maxBytes: 1024, unknownFields: 'strip' },
    'response-contract': { mode: 'monitor' },
  });
  const agent = new Agent({ keepAlive: true, maxSockets: 10 });
  t.teardown(() => agent.destroy());
  const since = gw.handle.output().stdout.length;

  // The load runs until DURATION_MS have passed, MIN_REQUESTS were sent and MIN_SIGNALS reloads
  // asked (a machine busy with other work does less in 3 s than the assertions below ask), within
  // HARD_CAP_MS and MAX_REQUESTS; the reloader signals for as long as the load runs, at most
  // MAX_SIGNALS times, each SIGHUP ~100 ms after the reload of the one before was logged.
  const DURATION_MS = 3000;
  const WORKERS = 20;
  const MIN_REQUESTS = WORKERS * 10;
  const MAX_REQUESTS = 50_000;
  const MIN_SIGNALS = 20;
  const MAX_SIGNALS = 200;
  const HARD_CAP_MS = 20_000;
  const start = Date.now();
  let sent = 0;
  let signals = 0;
  const loading = () => {
    const elapsed = Date.now() - start;
    return elapsed < HARD_CAP_MS && sent < MAX_REQUESTS && (elapsed < DURATION_MS || sent < MIN_REQUESTS || signals < MIN_SIGNALS);
  };
  const failures: string[] = [];
  const byOperation = { list: 0, create: 0, get: 0 };
  const latencies: number[] = [];

  // Both policies accept KEY, the query and the body below.
  const worker = async (w: number) => {
    const useAgent = w % 2 === 0 ? agent : undefined;
    while (loading()) {
      const n = sent++;
      const kind = n % 10 === 0 ? 'create' : n % 10 === 1 ? 'get' : 'list';
      byOperation[kind]++;
      const began = performance.now();
      try {
        const res =
          kind === 'create'
            ? await call(`${gw.url}/v1/pets`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, ...JSON_BODY }, body: `{"name":"w${w}","categoryId":${n},"status":"available"}`, agent: useAgent })
            : kind === 'get'
              ? await call(`${gw.url}/v1/pets/1`, { headers: { authorization: `Bearer ${KEY}` }, agent: useAgent })
              : await call(`${gw.url}/v1/pets?limit=5&status=available`, { headers: { authorization: `Bearer ${KEY}` }, agent: useAgent });
        latencies.push(performance.now() - began);
        const expected = kind === 'create' ? 201 : 200;
        if (res.status !== expected) failures.push(`${kind}: ${res.status} ${res.body.slice(0, 200)}`);
      } catch (err) {
        failures.push(`${kind}: ${(err as Error).message}`);
      }
    }
  };
  // A first pet so that getPet /v1/pets/1 is a 200.
  t.equal((await call(`${gw.url}/v1/pets`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, ...JSON_BODY }, body: '{"name":"first","categoryId":1}' })).status, 201);

  // Reload outcomes logged since `since` (reloaded, refused or failed), counted incrementally: the
  // access log lines of the load make the output long.
  let scanned = since;
  let outcomes = 0;
  const outcomeCount = (): number => {
    const stdout = gw.handle.output().stdout;
    for (let i = stdout.indexOf('"msg":"policy reload', scanned); i !== -1; i = stdout.indexOf('"msg":"policy reload', scanned)) {
      outcomes++;
      scanned = i + 1;
    }
    return outcomes;
  };

  // A reload costs the gateway some 30 ms of CPU: on a machine busy with other work it takes
  // longer than 100 ms, and SIGHUPs sent every 100 ms whatever happens pile up reloads that leave
  // the requests seconds of waiting (5 s timeouts seen under two CPU hogs). Each SIGHUP waits for
  // the outcome of the one before (at most 5 s), then ~100 ms: reloads back to back, under load.
  let loaded = false;
  const reloader = (async () => {
    while (!loaded && signals < MAX_SIGNALS) {
      const before = outcomeCount();
      writeAtomic(gw.file, signals % 2 === 0 ? B : A);
      gw.handle.child.kill('SIGHUP');
      signals++;
      await waitFor('the reload', () => loaded || outcomeCount() > before, 5000).catch(() => undefined);
      await sleep(100);
    }
  })();
  await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
  loaded = true;
  await reloader;
  const elapsed = Date.now() - start;

  latencies.sort((a, b) => a - b);
  const pct = (p: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? NaN);
  t.comment(`${sent} requests (${JSON.stringify(byOperation)}) in ${elapsed} ms, ${signals} SIGHUPs, ${failures.length} failures; latency p50 ${pct(0.5)} ms, p99 ${pct(0.99)} ms, max ${pct(1)} ms`);
  t.strictSame(failures.slice(0, 10), [], 'zero failed requests');
  t.equal(failures.length, 0, 'zero failed requests (count)');
  t.ok(sent > WORKERS * 5, `a real load (${sent} requests)`);
  // The last reload may be logged after the load ended.
  await waitFor('the last reload', () => outcomeCount() >= signals, 5000).catch(() => undefined);
  await sleep(200);
  const entries = logEntries(gw.handle, since);
  const reloaded = entries.filter((e) => e.msg === RELOADED).length;
  const refused = entries.filter((e) => e.msg === REFUSED);
  t.ok(reloaded >= Math.min(10, signals / 2), `the policy was swapped many times (${reloaded} reloads for ${signals} signals)`);
  t.strictSame(refused, [], 'no reload refused');
  t.equal(gw.handle.child.exitCode, null, 'the gateway is still running');
});

// ---------------------------------------------------------------------------------------------
// (f) in-flight requests keep their policy

/** Requests that carry `x-request-id: NAME (forwarded by default)` wait (at least 500 ms) until the test releases NAME. */
const gates = new Map<string, () => void>();
const released = new Set<string>();
const OTHER = testKey();

function release(name: string): void {
  released.add(name);
  gates.get(name)?.();
}

function pet(id: number, status = 'available'): string {
  return `{"id":${id},"name":"pet${id}","categoryId":1,"status":"${status}"}`;
}

function stubHandler(req: { method: string; url: string; headers: IncomingHttpHeaders; body: Buffer }, res: ServerResponse): void {
  const answer = () => {
    if (res.destroyed) return;
    const path = req.url.split('?')[0]!;
    if (req.method === 'POST') {
      const body = JSON.parse(req.body.toString('utf8')) as Record<string, unknown>;
      return sendJson(res, 201, { id: 1, ...body });
    }
    if (path === '/v1/pets') return sendJson(res, 200, `[${[1, 2, 3, 4, 5].map((i) => pet(i)).join(',')}]`);
    const id = Number(path.split('/').pop());
    return sendJson(res, 200, pet(id));
  };
  // Only ids the test made hold: the gateway gives every other request an id of its own.
  const hold = req.headers['x-request-id'];
  if (typeof hold !== 'string' || !hold.startsWith('hold-')) return answer();
  const arrived = Date.now();
  const failsafe = setTimeout(answer, 8000);
  const go = () => {
    clearTimeout(failsafe);
    setTimeout(answer, Math.max(0, 500 - (Date.now() - arrived)));
  };
  if (released.has(hold)) go();
  else gates.set(hold, go);
}

for (const engine of ENGINES) t.test(`engine ${engine}: a request in flight finishes under the policy it started with`, async (t) => {
  const s = await stub;
  const gw = await processes.inflight[engine];
  const upstream = { upstream: { url: `${s.origin}/v1` } };
  const A = policy({}, upstream);
  const hold = (name: string) => `hold-${engine}-${name}`;
  const arrivedUpstream = (name: string) => waitFor(`${name} at the upstream`, () => s.requests.some((r) => r.headers['x-request-id'] === hold(name)));

  await t.test('a reload that removes its key: the request already authenticated completes 200', async (t) => {
    const inFlight = request(`${gw.url}/v1/pets/7`, { headers: bearer(KEY, { 'x-request-id': hold('auth') }), timeoutMs: 10_000 });
    inFlight.catch(() => undefined);
    await arrivedUpstream('auth');
    const outcome = await gw.reload(policy({ auth: { keys: [{ id: 'other', hash: hashKey(OTHER) }], keysFromEnv: null } }, upstream));
    t.equal(outcome.msg, RELOADED);
    assertError(t, await request(`${gw.url}/v1/pets/7`, { headers: bearer(KEY) }), 401, 'invalid_api_key');
    t.equal((await request(`${gw.url}/v1/pets/7`, { headers: bearer(OTHER) })).status, 200, 'the new policy is in force');
    release(hold('auth'));
    const res = await inFlight;
    t.equal(res.status, 200, 'the in-flight request completes 200');
    t.equal(res.body, pet(7), 'with the upstream answer');
    t.ok('deprecation' in res.headers, 'and its getPet headers');
  });

  await t.test('a reload that turns list enforcement off: the in-flight list is still enforced', async (t) => {
    t.equal((await gw.reload(A)).msg, RELOADED);
    const inFlight = request(`${gw.url}/v1/pets?limit=2`, { headers: bearer(KEY, { 'x-request-id': hold('list') }), timeoutMs: 10_000 });
    inFlight.catch(() => undefined);
    await arrivedUpstream('list');
    t.equal((await gw.reload(policy({ 'list-pets': { enforceResponse: false } }, upstream))).msg, RELOADED);
    const now = await request(`${gw.url}/v1/pets?limit=2`, { headers: bearer(KEY) });
    t.equal((now.json as unknown[]).length, 5, 'a new request is no longer enforced (the stub sends 5)');
    release(hold('list'));
    const res = await inFlight;
    t.equal(res.status, 200);
    t.equal((res.json as unknown[]).length, 2, 'the in-flight one still is: 2 animals');
  });

  await t.test('a reload that lowers new-pet.maxBytes: the body in flight is read within its own limit', async (t) => {
    t.equal((await gw.reload(A)).msg, RELOADED);
    const body = JSON.stringify({ name: 'x'.repeat(260), categoryId: 1 });
    t.ok(body.length > 256, `a ${body.length}-byte body`);
    // The head goes first; the body follows after the reload.
    const inFlight = new Promise<Answer>((resolve, reject) => {
      const req = httpRequest(`${gw.url}/v1/pets`, {
        method: 'POST',
        agent: false,
        headers: { authorization: `Bearer ${KEY}`, ...JSON_BODY, 'content-length': Buffer.byteLength(body) },
      });
      const timer = setTimeout(() => req.destroy(new Error('timed out')), 10_000);
      req.on('error', reject);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
        });
      });
      req.flushHeaders();
      req.write(body.slice(0, 10));
      (async () => {
        // The head has been through the request phase well before this (no observable signal).
        await sleep(300);
        const outcome = await gw.reload(policy({ 'new-pet': { maxBytes: 64 } }, upstream));
        t.equal(outcome.msg, RELOADED);
        assertError(t, await request(`${gw.url}/v1/pets`, { method: 'POST', headers: bearer(KEY, JSON_BODY), body }), 413, 'payload_too_large');
        req.end(body.slice(10));
      })().catch(reject);
    });
    const res = await inFlight;
    t.equal(res.status, 201, `the in-flight createPet is accepted under its own limit: ${res.body.slice(0, 100)}`);
  });
});
