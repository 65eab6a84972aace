/**
 * The built command line (`node dist/cli/main.js`), each run as its own process: usage, exit codes
 * (0 ok, 2 usage, 78 bad config), `check`, `hash-key`, `new-key`, and `serve` for real.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { assertError, assertJson } from '../helpers/assert.js';
import { bearer, childEnv, ENGINES, ensureBuilt, plainCommand, PROJECT_ROOT, request, runCli, sendJson, spawnCliUntil, startStubUpstream, closedPort, tempDir } from '../helpers/servers.js';
import { waitFor, within } from '../helpers/wait.js';

ensureBuilt();

const dir = tempDir(t, 'cli');

const BAD_POLICY = join(dir, 'bad.yaml');
writeFileSync(
  BAD_POLICY,
  [
    'version: 2',
    'upstream:',
    '  url: ftp://example.com/v1',
    '  timeouts: { headersMs: 0 }',
    'policies:',
    '  auth:',
    '    keys:',
    '      - { id: a, hash: "sha256:nothex" }',
    '  new-pet:',
    '    maxBytes: 10',
    '    unknownFields: maybe',
    '  bogus: {}',
    '',
  ].join('\n'),
);
const DATES_POLICY = join(dir, 'dates.yaml');
writeFileSync(
  DATES_POLICY,
  [
    'version: 1',
    'policies:',
    '  auth: { keysFromEnv: PETSTORE_API_KEYS }',
    '  deprecation:',
    '    deprecatedAt: tomorrow',
    '    brownouts:',
    '      - { start: "2029-01-02T00:00:00Z", end: "2029-01-01T00:00:00Z" }',
    '      - { start: soon, end: "2029-01-01T00:00:00Z" }',
    '',
  ].join('\n'),
);
// A key registry on a port where nothing listens: `check` never contacts it, and `serve` starts
// without it (its keys come once Redis answers).
const REGISTRY_POLICY = join(dir, 'registry.yaml');
const registryPolicyWritten = closedPort().then((port) =>
  writeFileSync(REGISTRY_POLICY, `version: 1\npolicies:\n  auth:\n    registry:\n      redis: { url: "redis://127.0.0.1:${port}" }\n`),
);
/** Names the demo backend itself: a choice. */
const CHOSEN_BUILTIN = join(dir, 'chosen-builtin.yaml');
writeFileSync(CHOSEN_BUILTIN, 'version: 1\nupstream: { url: builtin }\n');
/** Leaves upstream.url out: the demo backend by default, no choice. */
const NO_UPSTREAM = join(dir, 'no-upstream.yaml');
writeFileSync(NO_UPSTREAM, 'version: 1\nupstream: { timeouts: { headersMs: 5000 } }\n');
/** The image's default command (deploy/Dockerfile CMD), with free ports. */
const IMAGE_CMD = (() => {
  const text = readFileSync(join(PROJECT_ROOT, 'deploy', 'Dockerfile'), 'utf8');
  const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(text)?.[1] ?? '[]') as string[];
  return cmd.map((a, i) => (cmd[i - 1] === '--port' || cmd[i - 1] === '--admin-port' ? '0' : a));
})();

/** Runs the functions given to it at most `n` at a time, in the order given; each call's result. */
function pool(n: number): <T>(run: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: Array<() => void> = [];
  return async <T>(run: () => Promise<T>): Promise<T> => {
    if (active >= n) await new Promise<void>((r) => waiting.push(r));
    active++;
    try {
      return await run();
    } finally {
      active--;
      waiting.shift()?.();
    }
  };
}

const KEY = 'psg_example-key_0123456789';
const SERVE = ['serve', '--host', '127.0.0.1', '--port', '0'];

// Each run loads the whole CLI (about a second of CPU): the processes start now, a few at a time,
// and the tests below await their results. A few, not all at once: each run's time bound starts
// with its process, and twenty processes started together on a loaded 2-core machine each took
// longer than the bound to load.
const queued = pool(3);
const runs = {
  help: queued(() => runCli(t, ['--help'], { timeoutMs: 30_000 })),
  unknown: queued(() => runCli(t, ['frobnicate'], { timeoutMs: 30_000 })),
  checkDefault: queued(() => runCli(t, ['check', 'policies/default.yaml'], { env: { PETSTORE_API_KEYS: KEY }, timeoutMs: 30_000 })),
  checkNoKey: queued(() => runCli(t, ['check', 'policies/default.yaml'], { timeoutMs: 30_000 })),
  checkNoKeyEphemeral: queued(() => runCli(t, ['check', 'policies/default.yaml', '--ephemeral-key'], { timeoutMs: 30_000 })),
  checkDates: queued(() => runCli(t, ['check', DATES_POLICY], { env: { PETSTORE_API_KEYS: KEY }, timeoutMs: 30_000 })),
  serveHelp: queued(() => runCli(t, ['serve', '--help'], { timeoutMs: 30_000 })),
  checkHelp: queued(() => runCli(t, ['check', '-h'], { timeoutMs: 30_000 })),
  version: queued(() => runCli(t, ['--version'], { timeoutMs: 30_000 })),
  servePortAbc: queued(() => runCli(t, [...SERVE.slice(0, 3), '--port', 'abc'], { env: { PETSTORE_API_KEYS: KEY }, timeoutMs: 30_000 })),
  serveAdminPort: queued(() => runCli(t, [...SERVE, '--admin-port', '99999'], { env: { PETSTORE_API_KEYS: KEY }, timeoutMs: 30_000 })),
  checkBad: queued(() => runCli(t, ['check', BAD_POLICY], { timeoutMs: 30_000 })),
  hashKey: queued(() => runCli(t, ['hash-key', '--id', 'ops'], { stdin: KEY + '\n', timeoutMs: 30_000 })),
  hashKeySpaced: queued(() => runCli(t, ['hash-key'], { stdin: 'two words', timeoutMs: 30_000 })),
  newKey: queued(() => runCli(t, ['new-key'], { timeoutMs: 30_000 })),
  serveNoKey: queued(() => runCli(t, SERVE, { timeoutMs: 30_000 })),
  serveBadUpstream: queued(() => runCli(t, [...SERVE, '--ephemeral-key', '--upstream', 'not-a-url'], { timeoutMs: 30_000 })),
  serveUpstreamUser: queued(() => runCli(t, [...SERVE, '--ephemeral-key', '--upstream', 'http://partner@127.0.0.1:1/v1'], { timeoutMs: 30_000 })),
  serveBadUpstreamPassword: queued(() => runCli(t, [...SERVE, '--ephemeral-key', '--upstream', 'http://partner:hunter2@127.0.0.1:1/v1?x'], { timeoutMs: 30_000 })),
  checkRegistry: registryPolicyWritten.then(() => queued(() => runCli(t, ['check', REGISTRY_POLICY], { timeoutMs: 30_000 }))),
  checkRegistryEphemeral: registryPolicyWritten.then(() => queued(() => runCli(t, ['check', REGISTRY_POLICY, '--ephemeral-key'], { timeoutMs: 30_000 }))),
  imageCmd: queued(() => runCli(t, IMAGE_CMD, { env: { PETSTORE_API_KEYS: KEY }, timeoutMs: 30_000 })),
  checkExposedDefault: queued(() => runCli(t, ['check', '--host', '::'], { env: { PETSTORE_API_KEYS: KEY }, timeoutMs: 30_000 })),
  checkExposedFlag: queued(() => runCli(t, ['check', '--host', '0.0.0.0', '--upstream', 'builtin'], { env: { PETSTORE_API_KEYS: KEY }, timeoutMs: 30_000 })),
  checkExposedChosen: queued(() => runCli(t, ['check', CHOSEN_BUILTIN, '--host', '0.0.0.0'], { env: { PETSTORE_API_KEYS: KEY }, timeoutMs: 30_000 })),
  checkExposedUnset: queued(() => runCli(t, ['check', NO_UPSTREAM, '--host', '0.0.0.0'], { env: { PETSTORE_API_KEYS: KEY }, timeoutMs: 30_000 })),
  checkLoopbackUnset: queued(() => runCli(t, ['check', NO_UPSTREAM, '--host', 'localhost'], { env: { PETSTORE_API_KEYS: KEY }, timeoutMs: 30_000 })),
};
// At LOG_LEVEL info, so that the test can check the key reaches no log line. `serve` is the one
// command that depends on the engine: it runs once per engine.
const ephemerals = ENGINES.map((engine) =>
  queued(() => spawnCliUntil(
    t,
    [...SERVE, '--ephemeral-key', '--engine', engine],
    new RegExp(
      `^(?=[\\s\\S]*petstore-gateway listening on (http://127\\.0\\.0\\.1:\\d+) \\(upstream: builtin, engine: ${engine}\\)\\n)` +
        '(?=[\\s\\S]*API key for this run \\(kept in memory only\\): (psg_[A-Za-z0-9_-]{43})\\n)',
    ),
    { timeoutMs: 30_000, env: { LOG_LEVEL: 'info' } },
  )),
);
// A rejection is reported by the test that awaits it, not as an unhandled rejection first.
for (const p of [...Object.values(runs), ...ephemerals]) p.catch(() => undefined);

// parity: the CLI's own usage text; no engine is loaded.
t.test('--help prints the usage and exits 0', async (t) => {
  const r = await runs.help;
  t.equal(r.code, 0);
  t.match(r.stdout, /^petstore-gateway: /);
  for (const command of ['serve', 'check [FILE]', 'hash-key', 'new-key', 'backend', 'health', 'schema']) t.match(r.stdout, `petstore-gateway ${command}`);
  t.equal(r.stderr, '');
});

// parity: the CLI's own usage and version text; no engine is loaded.
t.test('each command has its own --help; --version prints the package version', async (t) => {
  const serve = await runs.serveHelp;
  t.equal(serve.code, 0);
  t.match(serve.stdout, /^Usage: petstore-gateway serve /);
  for (const flag of ['--policy', '--upstream', '--port', '--admin-host', '--admin-port', '--ephemeral-key', '--engine', '--workers']) t.match(serve.stdout, flag);
  const check = await runs.checkHelp;
  t.equal(check.code, 0);
  t.match(check.stdout, /^Usage: petstore-gateway check /);
  const version = await runs.version;
  t.equal(version.code, 0);
  t.match(version.stdout, /^\d+\.\d+\.\d+\n$/);
});

// parity: the CLI's own argument handling; no engine is loaded.
t.test('an unknown command exits 2: one line and where to read more, not the whole help', async (t) => {
  const r = await runs.unknown;
  t.equal(r.code, 2);
  t.equal(r.stderr, "petstore-gateway: unknown command 'frobnicate'\nsee 'petstore-gateway --help'\n");
  t.equal(r.stdout, '');
});

// parity: a usage error from the CLI's argument parsing, before any engine is loaded.
t.test('serve --port abc is a usage error that names --port (exit 2), not a policy problem', async (t) => {
  const r = await runs.servePortAbc;
  t.equal(r.code, 2);
  t.equal(r.stderr, "petstore-gateway: --port must be a whole number from 0 to 65535, not 'abc'\nsee 'petstore-gateway serve --help'\n");
  t.equal(r.stdout, '');
  const admin = await runs.serveAdminPort;
  t.equal(admin.code, 2);
  t.match(admin.stderr, /^petstore-gateway: --admin-port must be a whole number from 0 to 65535, not '99999'\n/);
});

// parity: `check` validates the policy file and starts no engine.
t.test('check policies/default.yaml: ok when PETSTORE_API_KEYS has a key, exit 0', async (t) => {
  const r = await runs.checkDefault;
  t.equal(r.code, 0);
  t.equal(r.stdout, 'policies/default.yaml: ok\n  key PETSTORE_API_KEYS#1: never expires, all operations (from the environment)\n');
});

// parity: `check` starts no engine, and `serve` refuses the policy before it loads one.
t.test('check fails exactly where serve refuses: no API key configured (exit 78), unless --ephemeral-key', async (t) => {
  const r = await runs.checkNoKey;
  t.equal(r.code, 78);
  t.match(r.stdout, /^policies\/default\.yaml: \$\.policies\.auth: no API key is configured, so every request would be refused: .*PETSTORE_API_KEYS.*--ephemeral-key/);
  const serve = await runs.serveNoKey;
  t.equal(serve.code, 78);
  t.equal(serve.stderr.replace(/^.*?: /, ''), r.stdout.replace(/^.*?: /, ''), 'serve says the same');
  const ephemeral = await runs.checkNoKeyEphemeral;
  t.equal(ephemeral.code, 0, 'serve --ephemeral-key would start');
});

// parity: `check` validates the policy file and starts no engine.
t.test('check reports date-order problems in the same pass as format problems, saying what was expected', async (t) => {
  const r = await runs.checkDates;
  t.equal(r.code, 78);
  const lines = r.stdout.trimEnd().split('\n').map((l) => l.slice(DATES_POLICY.length + 2));
  t.strictSame(lines.sort(), [
    '$.policies.deprecation.brownouts[0]: must end after it starts',
    '$.policies.deprecation.brownouts[1].start: must be an RFC 3339 date-time with a zone, such as 2030-12-05T00:00:00Z',
    '$.policies.deprecation.deprecatedAt: must be an RFC 3339 date-time with a zone, such as 2030-12-05T00:00:00Z',
  ]);
});

// parity: `check` validates the policy file and starts no engine.
t.test('check on an invalid file: one FILE: $.path: message line per problem, exit 78', async (t) => {
  const r = await runs.checkBad;
  t.equal(r.code, 78);
  const lines = r.stdout.trimEnd().split('\n');
  for (const line of lines) t.ok(line.startsWith(`${BAD_POLICY}: $`), `FILE: $.path: message (${line})`);
  const expected: Array<[string, RegExp]> = [
    ['$.version', /must be 1/],
    ['$.upstream.url', /must be "builtin" or an http\(s\) base URL/],
    ['$.upstream.timeouts.headersMs', /must be >= 1/],
    ['$.policies.auth.keys[0].hash', /must be "sha256:" and 64 lower-case hex digits/],
    ['$.policies["new-pet"].maxBytes', /must be >= 64/],
    ['$.policies["new-pet"].unknownFields', /must be one of: reject, strip, allow/],
    ['$.policies.bogus', /unknown property 'bogus'/],
  ];
  for (const [path, message] of expected) {
    const line = lines.find((l) => l.startsWith(`${BAD_POLICY}: ${path}: `));
    t.ok(line, `a line for ${path}`);
    t.match(line ?? '', message);
  }
  t.equal(lines.length, expected.length, 'every problem once, nothing else');
});

// parity: `hash-key` only hashes its stdin; no engine is involved.
t.test('hash-key reads a key on stdin and prints its policy line', async (t) => {
  const hex = createHash('sha256').update(KEY, 'utf8').digest('hex');
  const r = await runs.hashKey;
  t.equal(r.code, 0);
  t.equal(r.stdout, `- { id: "ops", hash: "sha256:${hex}" }\n`, 'the sha256 of the key, without its newline');
  t.match(r.stdout, /^- \{ id: "[^"]+", hash: "sha256:[0-9a-f]{64}" \}\n$/);
  const spaced = await runs.hashKeySpaced;
  t.equal(spaced.code, 2, 'a key with spaces is a usage error');
  t.equal(spaced.stdout, '');
  t.notMatch(spaced.stderr, /two words/, 'the key is not echoed');
});

// parity: `new-key` only prints a random key; no engine is involved.
t.test('new-key prints a psg_ key of 256 bits', async (t) => {
  const r = await runs.newKey;
  t.equal(r.code, 0);
  t.match(r.stdout, /^psg_[A-Za-z0-9_-]{43}\n$/);
});

// A block body: forEach wants a callback that returns nothing, and t.test returns a promise.
ENGINES.forEach((engine, i) => {
  t.test(`serve --port 0 --ephemeral-key --engine ${engine}: the printed key works`, async (t) => {
    const { handle, match } = await ephemerals[i]!;
    const [, url, key] = match as unknown as [string, string, string];
    const list = await request(`${url}/v1/pets`, { headers: bearer(key) });
    t.equal(assertJson(t, list, 200), '[]', 'the printed key lists pets');
    const created = await request(`${url}/v1/pets`, {
      method: 'POST',
      headers: bearer(key, { 'content-type': 'application/json' }),
      body: '{"name":"Rex","categoryId":9223372036854775807}',
    });
    t.equal(assertJson(t, created, 201), '{"id":1,"name":"Rex","categoryId":9223372036854775807}');
    assertError(t, await request(`${url}/v1/pets`), 401, 'missing_api_key');
    assertError(t, await request(`${url}/v1/pets`, { headers: bearer('psg_not-the-key') }), 401, 'invalid_api_key');
    const { stdout, stderr } = handle.output();
    const logLines = stdout.split('\n').filter((l) => l !== '');
    t.ok(logLines.length > 0, 'the server logs (pino, JSON lines)');
    t.ok(logLines.every((l) => { try { return typeof JSON.parse(l) === 'object'; } catch { return false; } }), 'stdout is NDJSON: every line is a JSON object');
    t.ok(logLines.some((l) => l.includes('"msg":"petstore-gateway listening"') && l.includes(`"url":"${url}"`)), 'the banner facts are a JSON line too');
    t.notOk(stdout.includes(key), 'the key is in no log line');
    t.equal(stderr.split(key).length - 1, 2, 'stderr shows it exactly twice: the key line and the curl hint');

    handle.child.kill('SIGTERM');
    const exit = await within(handle.exited, 5000, 'timeout' as const);
    t.not(exit, 'timeout', 'it stops on SIGTERM');
    if (exit !== 'timeout') t.equal(exit.code, 0, 'and exits 0');
    t.match(handle.output().stdout.trimEnd().split('\n').at(-1), /"msg":"stopped"/, 'the last line says it stopped');
  });
});

// parity: `check` starts no engine; `serve` with a registry refuses or starts before any engine matters.
t.test('a key registry never makes a key nobody asked for: check lists none, serve prints none (only --ephemeral-key does)', async (t) => {
  const r = await runs.checkRegistry;
  t.equal(r.code, 0, 'a registry alone is enough to start');
  t.notMatch(r.stdout, /ephemeral/, 'no ephemeral key listed');
  t.notMatch(r.stdout, /PETSTORE_API_KEYS#1/, 'nor a key of the environment');
  const asked = await runs.checkRegistryEphemeral;
  t.equal(asked.code, 0);
  t.match(asked.stdout, /key \(ephemeral\): made at each start, all operations/, 'asked for: listed');

  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', REGISTRY_POLICY, '--host', '127.0.0.1', '--port', '0'], /petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) /, {
    timeoutMs: 30_000,
    env: { LOG_LEVEL: 'info' },
    stream: 'stderr',
  });
  assertError(t, await request(`${match[1]}/v1/pets`, { headers: bearer('psg_' + 'A'.repeat(43)) }), 401, 'invalid_api_key');
  // After a round trip: the banner's next lines (a key, when one is made) are out by now.
  t.notMatch(handle.output().stderr, /API key for this run|try: curl/, 'serve prints no key');
  t.notMatch(handle.output().stdout, /psg_/, 'and logs none');
  handle.child.kill('SIGTERM');
  await within(handle.exited, 10_000, 'timeout' as const);
});

// parity: `check` and `serve` refuse the policy before any engine is loaded.
t.test('the built-in demo backend on a non-loopback host only when chosen: the flag or the file given, else 78', async (t) => {
  const image = await runs.imageCmd;
  t.equal(image.code, 78, `the image's default command (${IMAGE_CMD.join(' ')}) refuses`);
  t.match(image.stderr, /\$\.upstream\.url: is the built-in demo backend \(pets in memory\) by default, and server\.host 0\.0\.0\.0 is not loopback: set upstream\.url .* --upstream builtin or upstream: \{ url: builtin \} in the file given with --policy/);
  t.equal(image.stdout, '', 'it never listened');
  const dflt = await runs.checkExposedDefault;
  t.equal(dflt.code, 78, 'check without FILE (the packaged policy is no choice), host ::');
  t.match(dflt.stdout, /\$\.upstream\.url: .*server\.host :: is not loopback/);
  t.equal((await runs.checkExposedUnset).code, 78, 'a file that leaves upstream.url out');
  t.equal((await runs.checkExposedFlag).code, 0, '--upstream builtin is a choice');
  t.equal((await runs.checkExposedChosen).code, 0, 'a file given that writes upstream: { url: builtin } is a choice');
  t.equal((await runs.checkLoopbackUnset).code, 0, 'on loopback the default stays the quickstart');
});

// parity: `serve` refuses the policy (no API key) before it loads any engine.
t.test('serve with no key and no --ephemeral-key exits 78', async (t) => {
  const r = await runs.serveNoKey;
  t.equal(r.code, 78);
  t.match(r.stderr, /: \$\.policies\.auth: no API key is configured/);
  t.equal(r.stdout, '', 'it never listened');
});

// parity: a usage error from the CLI's argument parsing, before any engine is loaded.
t.test('serve --upstream not-a-url is a usage error that names --upstream (exit 2)', async (t) => {
  const r = await runs.serveBadUpstream;
  t.equal(r.code, 2);
  t.match(r.stderr, /^petstore-gateway: --upstream must be 'builtin' or an http\(s\) base URL such as http:\/\/127\.0\.0\.1:8081\/v1, not 'not-a-url'\nsee 'petstore-gateway serve --help'\n$/);
  t.equal(r.stdout, '', 'it never listened');
});

// parity: a usage error from the CLI's argument parsing, before any engine is loaded.
t.test('serve --upstream with a user or password: refused, echoed masked (exit 2)', async (t) => {
  const user = await runs.serveUpstreamUser;
  t.equal(user.code, 2);
  t.match(user.stderr, /--upstream takes no user or password \('http:\/\/\*\*\*@127\.0\.0\.1:1\/v1'\)/);
  t.notMatch(user.stderr, /partner/, 'the user is not echoed');
  const bad = await runs.serveBadUpstreamPassword;
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--upstream must be 'builtin'/);
  t.notMatch(bad.stderr, /partner|hunter2/, 'nor a password, in an otherwise refused URL');
});

// parity: the supervisor (node:cluster, one banner, SIGHUP and SIGTERM passed to the workers) is the
// CLI's, whatever engine the workers run; each engine's serve, reload and stop are tested on every engine
// (the --engine scenarios above, reload.test.ts, shutdown.test.ts).
t.test('serve --workers 2: one banner, both workers serve, SIGHUP reloads, SIGTERM stops all with exit 0', async (t) => {
  const { handle, match } = await spawnCliUntil(
    t,
    [...SERVE, '--ephemeral-key', '--workers', '2'],
    /^(?=[\s\S]*petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) \(upstream: builtin, engine: undici\) with 2 workers\n)(?=[\s\S]*API key for this run \(kept in memory only\): (psg_[A-Za-z0-9_-]{43})\n)/,
    { timeoutMs: 30_000, env: { LOG_LEVEL: 'info' } },
  );
  const [, url, key] = match as unknown as [string, string, string];
  const statuses: number[] = [];
  for (let i = 0; i < 10; i++) statuses.push((await request(`${url}/v1/pets`, { headers: bearer(key) })).status);
  t.strictSame(statuses, Array(10).fill(200), 'every request is served with the one printed key');
  handle.child.kill('SIGHUP');
  const reloaded = await new Promise<boolean>((resolve) => {
    const deadline = setTimeout(() => resolve(false), 10_000);
    const poll = setInterval(() => {
      if ((handle.output().stdout.match(/"msg":"policy reloaded"/g) ?? []).length >= 2) {
        clearInterval(poll);
        clearTimeout(deadline);
        resolve(true);
      }
    }, 50);
  });
  t.ok(reloaded, 'both workers logged the reload');
  t.equal((await request(`${url}/v1/pets`, { headers: bearer(key) })).status, 200, 'still serving after the reload');
  handle.child.kill('SIGTERM');
  const exit = await within(handle.exited, 10_000, 'timeout' as const);
  t.not(exit, 'timeout', 'the primary stops on SIGTERM');
  if (exit !== 'timeout') t.equal(exit.code, 0, 'and exits 0 once its workers have');
  t.notOk(handle.output().stdout.includes(key), 'the key is in no log line');
  t.equal(handle.output().stderr.split(key).length - 1, 1, 'the key is printed once, by the primary, on stderr');
  const pidFields = handle.output().stdout.split('\n').filter((l) => l.includes('"msg":"stopped"'));
  t.ok(pidFields.length >= 1, 'the primary logs that it stopped');
});

// A worker that cannot start (--workers 2 on a port in use) stops the supervisor: lifecycle.test.ts,
// on every engine.

// parity: the signal handling and the last 'stopped' line are the CLI's one stop(); each engine's stop on
// SIGTERM is tested on every engine (the --engine scenarios above, shutdown.test.ts).
t.test('an idle SIGTERM stops at once and logs "stopped" last', async (t) => {
  const { handle } = await spawnCliUntil(t, [...SERVE, '--ephemeral-key'], /listening on /, { timeoutMs: 30_000, env: { LOG_LEVEL: 'info' }, stream: 'stderr' });
  const since = performance.now();
  handle.child.kill('SIGTERM');
  const exit = await within(handle.exited, 10_000, 'timeout' as const);
  const ms = performance.now() - since;
  t.comment(`idle SIGTERM to exit: ${Math.round(ms)} ms`);
  t.not(exit, 'timeout');
  // Measured 15-40 ms here; the bound is generous so a loaded 2-core machine cannot fail it, yet
  // far below the keep-alive (5 s) and connection-check intervals a stop must not wait for.
  t.ok(ms < 1000, `exits within 1000 ms (${Math.round(ms)} ms)`);
  const last = JSON.parse(handle.output().stdout.trimEnd().split('\n').at(-1) ?? '{}') as { msg?: string; signal?: string };
  t.equal(last.msg, 'stopped');
  t.equal(last.signal, 'SIGTERM');
});

// parity: the start probe is the CLI's own fetch, apart from the engine; each engine's 502 for an
// unreachable upstream is tested on every engine (upstream-faults.test.ts, secrets.test.ts).
t.test('the start probe: an upstream URL without /v1 is warned about; an unreachable one logged; the gateway starts either way', async (t) => {
  const stub = await startStubUpstream(t, (req, res) => {
    if (req.url.startsWith('/v1/pets')) return sendJson(res, 200, '[]');
    return sendJson(res, 404, { code: 'not_found', message: 'no such path', status: 404 });
  });
  const warned = await spawnCliUntil(t, [...SERVE, '--ephemeral-key', '--upstream', stub.origin], /^(?=[\s\S]*listening on )(?=[\s\S]*(\{[^\n]*"msg":"upstream probe: [^\n]*)\n)/, {
    timeoutMs: 30_000,
    env: { LOG_LEVEL: 'info' },
  });
  const line = JSON.parse(warned.match[1]!) as { level: number; verdict: string; status: number; msg: string };
  t.equal(line.level, 40, 'a warning');
  t.equal(line.verdict, 'wrong-base-path');
  t.equal(line.status, 404);
  t.match(line.msg, `try --upstream ${stub.origin}/v1`);
  t.ok(stub.requests.some((r) => r.url === '/pets?limit=1' && r.headers.authorization === undefined), 'one GET /pets?limit=1 without a key');

  const ok = await spawnCliUntil(t, [...SERVE, '--ephemeral-key', '--upstream', `${stub.origin}/v1`], /(\{[^\n]*"msg":"upstream probe: [^\n]*)\n/, { timeoutMs: 30_000, env: { LOG_LEVEL: 'info' } });
  t.match(JSON.parse(ok.match[1]!), { level: 30, verdict: 'ok', status: 200 }, 'the right base path: info');

  const down = await spawnCliUntil(t, [...SERVE, '--ephemeral-key', '--upstream', `http://127.0.0.1:${await closedPort()}/v1`], /^(?=[\s\S]*listening on (http:\S+))(?=[\s\S]*(\{[^\n]*"msg":"upstream probe: [^\n]*)\n)/, {
    timeoutMs: 30_000,
    env: { LOG_LEVEL: 'info' },
  });
  t.match(JSON.parse(down.match[2]!), { level: 50, verdict: 'unreachable', msg: /ECONNREFUSED/ }, 'unreachable: an error line');
  const key = /API key for this run \(kept in memory only\): (\S+)/.exec(down.handle.output().stderr)?.[1] ?? '';
  t.equal((await request(`${down.match[1]}/v1/pets`, { headers: bearer(key) })).status, 502, 'and it serves (502 while the upstream is down)');
});

// parity: npm's own output around the CLI, whatever engine serves.
t.test("`npm start -s` (README's advice for a log collector): stdout carries JSON lines only", async (t) => {
  // Its own process group: npm does not pass SIGTERM on, so the group is stopped.
  const child = spawn(...plainCommand('npm', ['start', '-s', '--', '--port', '0', '--admin-port', '0']), { cwd: PROJECT_ROOT, env: childEnv({ LOG_LEVEL: 'info' }), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise((r) => child.once('exit', r));
  t.teardown(async () => {
    try {
      process.kill(-(child.pid ?? 0), 'SIGKILL');
    } catch {
      /* gone */
    }
    await within(exited, 5000, undefined);
  });
  const [, url, key] = await waitFor('the banner and key', () => /listening on (http:\/\/127\.0\.0\.1:\d+) [\s\S]*API key for this run \(kept in memory only\): (\S+)\n/.exec(stderr) ?? undefined, 30_000);
  t.equal((await request(`${url}/v1/pets`, { headers: bearer(key!) })).status, 200);
  await waitFor('the access line', () => (stdout.includes('"status":200') ? true : undefined), 10_000);
  process.kill(-(child.pid ?? 0), 'SIGTERM');
  await within(exited, 20_000, undefined);
  const lines = stdout.split('\n').filter((l) => l !== '');
  t.ok(lines.length >= 3, `${lines.length} lines`);
  const notJson = lines.filter((l) => {
    try {
      return typeof JSON.parse(l) !== 'object';
    } catch {
      return true;
    }
  });
  t.strictSame(notJson, [], 'every stdout line is a JSON object');
});

