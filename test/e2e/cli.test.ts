/**
 * The built command line (`node dist/cli/main.js`), each run as its own process: usage, exit codes
 * (0 ok, 2 usage, 78 bad config), `check`, `hash-key`, `new-key`, and `serve` for real.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { assertError, assertJson } from '../helpers/assert.js';
import { bearer, ENGINES, ensureBuilt, request, runCli, spawnCliUntil, tempDir } from '../helpers/servers.js';

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
const KEY = 'psg_example-key_0123456789';
const SERVE = ['serve', '--host', '127.0.0.1', '--port', '0'];

// Each run loads the whole CLI (about a second of CPU): every process starts now, concurrently,
// and the tests below await their results.
const runs = {
  help: runCli(t, ['--help'], { timeoutMs: 30_000 }),
  unknown: runCli(t, ['frobnicate'], { timeoutMs: 30_000 }),
  checkDefault: runCli(t, ['check', 'policies/default.yaml'], { timeoutMs: 30_000 }),
  checkBad: runCli(t, ['check', BAD_POLICY], { timeoutMs: 30_000 }),
  hashKey: runCli(t, ['hash-key', '--id', 'ops'], { stdin: KEY + '\n', timeoutMs: 30_000 }),
  hashKeySpaced: runCli(t, ['hash-key'], { stdin: 'two words', timeoutMs: 30_000 }),
  newKey: runCli(t, ['new-key'], { timeoutMs: 30_000 }),
  serveNoKey: runCli(t, SERVE, { timeoutMs: 30_000 }),
  serveBadUpstream: runCli(t, [...SERVE, '--ephemeral-key', '--upstream', 'not-a-url'], { timeoutMs: 30_000 }),
};
// At LOG_LEVEL info, so that the test can check the key reaches no log line. `serve` is the one
// command that depends on the engine: it runs once per engine.
const ephemerals = ENGINES.map((engine) =>
  spawnCliUntil(
    t,
    [...SERVE, '--ephemeral-key', '--engine', engine],
    new RegExp(
      `^(?=[\\s\\S]*petstore-gateway listening on (http://127\\.0\\.0\\.1:\\d+) \\(upstream: builtin, engine: ${engine}\\)\\n)` +
        '(?=[\\s\\S]*API key for this run \\(kept in memory only\\): (psg_[A-Za-z0-9_-]{43})\\n)',
    ),
    { timeoutMs: 30_000, env: { LOG_LEVEL: 'info' } },
  ),
);
// A rejection is reported by the test that awaits it, not as an unhandled rejection first.
for (const p of [...Object.values(runs), ...ephemerals]) p.catch(() => undefined);

t.test('--help prints the usage and exits 0', async (t) => {
  const r = await runs.help;
  t.equal(r.code, 0);
  t.match(r.stdout, /^petstore-gateway: /);
  for (const command of ['serve', 'check FILE', 'hash-key', 'new-key', 'backend', 'schema']) t.match(r.stdout, `petstore-gateway ${command}`);
  t.equal(r.stderr, '');
});

t.test('an unknown command exits 2 with a message on stderr', async (t) => {
  const r = await runs.unknown;
  t.equal(r.code, 2);
  t.match(r.stderr, /^petstore-gateway: unknown command 'frobnicate'\n/);
  t.equal(r.stdout, '');
});

t.test('check policies/default.yaml: ok, exit 0', async (t) => {
  const r = await runs.checkDefault;
  t.equal(r.code, 0);
  t.equal(r.stdout, 'policies/default.yaml: ok\n');
});

t.test('check on an invalid file: one FILE: $.path: message line per problem, exit 78', async (t) => {
  const r = await runs.checkBad;
  t.equal(r.code, 78);
  const lines = r.stdout.trimEnd().split('\n');
  for (const line of lines) t.ok(line.startsWith(`${BAD_POLICY}: $`), `FILE: $.path: message (${line})`);
  const expected: Array<[string, RegExp]> = [
    ['$.version', /must be 1/],
    ['$.upstream.url', /has the wrong format/],
    ['$.upstream.timeouts.headersMs', /must be >= 1/],
    ['$.policies.auth.keys[0].hash', /has the wrong format/],
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

t.test('new-key prints a psg_ key of 256 bits', async (t) => {
  const r = await runs.newKey;
  t.equal(r.code, 0);
  t.match(r.stdout, /^psg_[A-Za-z0-9_-]{43}\n$/);
});

ENGINES.forEach((engine, i) => t.test(`serve --port 0 --ephemeral-key --engine ${engine}: the printed key works`, async (t) => {
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
  const logLines = stdout.split('\n').filter((l) => l.startsWith('{'));
  t.ok(logLines.length > 0, 'the server logs (pino, JSON lines)');
  t.notOk(logLines.some((l) => l.includes(key)), 'the key is in no log line');
  t.notOk(stderr.includes(key), 'nor on stderr');
  t.equal(stdout.split(key).length - 1, 2, 'stdout shows it exactly twice: the key line and the curl hint');

  handle.child.kill('SIGTERM');
  const exit = await Promise.race([handle.exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 5000))]);
  t.not(exit, 'timeout', 'it stops on SIGTERM');
  if (exit !== 'timeout') t.equal(exit.code, 0, 'and exits 0');
}));

t.test('serve with no key and no --ephemeral-key exits 78', async (t) => {
  const r = await runs.serveNoKey;
  t.equal(r.code, 78);
  t.match(r.stderr, /: \$\.policies\.auth: no API key is configured/);
  t.equal(r.stdout, '', 'it never listened');
});

t.test('serve --upstream not-a-url exits 78', async (t) => {
  const r = await runs.serveBadUpstream;
  t.equal(r.code, 78);
  t.match(r.stderr, /: \$\.upstream\.url: has the wrong format/);
  t.equal(r.stdout, '', 'it never listened');
});

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
  const exit = await Promise.race([handle.exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 10_000))]);
  t.not(exit, 'timeout', 'the primary stops on SIGTERM');
  if (exit !== 'timeout') t.equal(exit.code, 0, 'and exits 0 once its workers have');
  t.equal(handle.output().stdout.split(key).length - 1, 1, 'the key is printed once, by the primary, and in no log line');
});
