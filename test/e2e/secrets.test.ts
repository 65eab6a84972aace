/**
 * Secrets never reach a log line. The gateway is driven through everything that handles a secret
 * (valid keys, wrong keys, malformed Authorization headers, keys in the query string and in other
 * headers, upstream 5xx HTML error pages that carry a database password, the upstream down (502)
 * and hanging (504), a policy reload) with its logger at `trace`, every line captured; then no line
 * may contain a presented key, the SHA-256 hex of one, an Authorization header value, the gateway's
 * own upstream credential, nor the upstream's passwords (whole, or any part of them between
 * punctuation).
 *
 * In process, against each engine (Fastify: buildServer with a loggerInstance; http-proxy-3:
 * buildProxyServer with a log), the policies sharing the logger (compileGateway(config, {env, log})).
 * Then the built CLI at LOG_LEVEL=trace, with its stdout and stderr: `serve --port 0
 * --ephemeral-key` (where the only intended print of the key is the startup banner) and a policy
 * file reloaded by SIGHUP, including invalid files that name keys and hashes.
 */
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { formatProblems, parsePolicy } from '../../src/config/load.js';
import { compileGateway, GatewayHolder } from '../../src/gateway.js';
import { hashKey, newKey } from '../../src/policies/auth/keys.js';
import type { TapTest } from '../helpers/assert.js';
import {
  closedPort,
  ENGINES,
  ensureBuilt,
  JSON_TYPE,
  listenEngine,
  policyText,
  rawExchange,
  request,
  spawnCliUntil,
  startStubUpstream,
  tempDir,
  testKey,
  waitFor,
  type ProcessHandle,
  type Response,
} from '../helpers/servers.js';
import { within } from '../helpers/wait.js';


const sha256hex = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const rnd = (bytes: number) => randomBytes(bytes).toString('base64url').replace(/[-_]/g, 'x');



// ---------------------------------------------------------------------------------------------
// What counts as a secret, and the check of a log against them

interface Secret {
  readonly label: string;
  readonly value: string;
}

/** Everything the test presented or planted, collected as it goes. */
class Secrets {
  readonly all: Secret[] = [];
  private readonly seen = new Set<string>();

  private push(label: string, value: string): void {
    // Short strings (a bare scheme, an empty token) would match innocent text: not secrets.
    if (value.length < 8 || this.seen.has(value)) return;
    this.seen.add(value);
    this.all.push({ label, value });
  }

  /** A key: itself and the SHA-256 hex of it (what a policy file holds). */
  key(label: string, key: string): string {
    this.push(`${label} key`, key);
    this.push(`${label} key's sha256`, sha256hex(key));
    return key;
  }

  /** A whole Authorization header value as sent, and the token in it. */
  header(label: string, value: string): string {
    this.push(`${label} header value`, value);
    const token = value.replace(/^\S+\s+/, '');
    if (token !== value) this.push(`${label} header token`, token);
    return value;
  }

  /** A password: itself and each part of it between punctuation of 5 or more characters. */
  password(label: string, value: string): string {
    this.push(`${label} password`, value);
    for (const part of value.split(/[^A-Za-z0-9]+/)) if (part.length >= 5 && part !== value) this.push(`${label} password fragment`, part);
    return value;
  }

  plain(label: string, value: string): string {
    this.push(label, value);
    return value;
  }
}

/**
 * Asserts that no line holds any secret; `todo` maps a label prefix to a known bug (its assertions
 * are reported as todo).
 */
function assertNoSecrets(t: TapTest, lines: readonly string[], secrets: Secrets, where: string, todo: Record<string, string> = {}): void {
  for (const s of secrets.all) {
    const hits = lines.filter((l) => l.includes(s.value));
    const bug = Object.entries(todo).find(([prefix]) => s.label.startsWith(prefix))?.[1];
    t.equal(hits.length, 0, `${where}: no line holds the ${s.label}${hits.length > 0 ? `: ${hits[0]!.slice(0, 300)}` : ''}`, bug === undefined ? {} : { todo: bug });
  }
}

/** A pino destination that keeps every line. */
function captureLog() {
  const lines: string[] = [];
  const stream = {
    write(s: string) {
      for (const line of s.split('\n')) if (line !== '') lines.push(line);
    },
  };
  const log: Logger = pino({ level: 'trace' }, stream);
  return { log, lines };
}

// ---------------------------------------------------------------------------------------------
// The upstream: a stub whose error pages are what a misconfigured framework shows

const passwordsOf = (secrets: Secrets) => ({
  /** In an environment dump (`NAME=value`), as debug pages print them. */
  env: secrets.password('env-dump', `${rnd(6)}&${rnd(6)}`),
  /** In a connection URI. */
  uri: secrets.password('connection-URI', rnd(12)),
  /** In a JSON config excerpt. */
  json: secrets.password('JSON-config', `${rnd(6)};${rnd(6)},${rnd(6)}`),
  /** In an HTML table of settings (phpinfo-style): the name and the value in separate cells. */
  table: secrets.password('HTML-table', rnd(12)),
});

type Mode = 'ok' | 'html500' | 'json500' | 'hang';

async function stubUpstream(t: TapTest, pw: ReturnType<typeof passwordsOf>) {
  const state = { mode: 'ok' as Mode };
  const stub = await startStubUpstream(t, (req, res) => {
    if (state.mode === 'hang') return;
    if (state.mode === 'html500') {
      // A framework debug page: the failure, the settings, and the request as received.
      const headers = Object.entries(req.headers)
        .map(([k, v]) => `<tr><td>${k}</td><td>${String(v)}</td></tr>`)
        .join('');
      const page =
        `<!DOCTYPE html><html><head><title>500 Internal Server Error</title></head><body>` +
        `<h1>OperationalError at ${req.url}</h1>` +
        `<pre>could not connect to server: postgres://pets:${pw.uri}@db.internal:5432/pets\n` +
        `    at Pool.connect (/app/node_modules/pg-pool/index.js:45:11)\n` +
        `DB_USER=pets\nDB_PASSWORD=${pw.env}\nDB_HOST=db.internal</pre>` +
        `<h2>Settings</h2><table><tr><td class="e">DB_PASSWORD</td><td class="v">${pw.table}</td></tr></table>` +
        `<h2>Request</h2><p>${req.method} ${req.url}</p><table>${headers}</table></body></html>`;
      res.writeHead(500, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(page) });
      res.end(page);
      return;
    }
    if (state.mode === 'json500') {
      // A JSON error dump with no plain message to show: the gateway logs an excerpt of it.
      const body = JSON.stringify({
        exception: 'org.postgresql.util.PSQLException: Connection refused',
        path: req.url,
        datasource: { url: 'jdbc:postgresql://db.internal:5432/pets', username: 'pets', password: pw.json },
      });
      res.writeHead(500, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    const body = req.method === 'POST' ? '{"id":1,"name":"Rex","categoryId":1}' : req.url.startsWith('/v1/pets/') ? '{"id":1,"name":"Rex","categoryId":1}' : '[]';
    res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  return { stub, state };
}

// ---------------------------------------------------------------------------------------------
// In process

/** Wrong keys close to a real one: a changed last character, one fewer, one more, case flipped. */
function nearMisses(key: string): string[] {
  const last = key.at(-1)!;
  return [key.slice(0, -1) + (last === 'A' ? 'B' : 'A'), key.slice(0, -1), key + 'Q', key.replace(/[a-z]/, (c) => c.toUpperCase())];
}

// The two CLI processes boot (about a second of CPU each) while the in-process tests run; the
// tests at the end await them. A failed start is reported there, not as an unhandled rejection.
ensureBuilt();
// Waits for the two facts it needs, each wherever it lands (stderr, in any order): log lines and
// human lines are written by different writers, so no order between them is promised.
const READY = /^(?=[\s\S]*petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+))(?=[\s\S]*API key for this run \(kept in memory only\): (\S+)\n)/;
const cliDir = tempDir(t, 'secrets');
const policyFile = join(cliDir, 'policy.yaml');
const POLICY_BASE = ['version: 1', 'upstream: { url: builtin }', 'server: { host: 127.0.0.1, port: 8080 }', 'policies:', '  auth:', '    keysFromEnv: PETSTORE_API_KEYS'];
writeFileSync(policyFile, [...POLICY_BASE, '    keys: []', ''].join('\n'));
const cliRuns = {
  ephemeral: spawnCliUntil(t, ['serve', '--port', '0', '--ephemeral-key'], READY, { env: { LOG_LEVEL: 'trace' }, timeoutMs: 30_000 }),
  policyFile: spawnCliUntil(t, ['serve', '--policy', policyFile, '--port', '0', '--ephemeral-key', '--engine', 'http-proxy-3'], READY, {
    env: { LOG_LEVEL: 'trace' },
    timeoutMs: 30_000,
  }),
};
for (const run of Object.values(cliRuns)) run.catch(() => undefined);

for (const engine of ENGINES) {
  t.test(`engine ${engine}: no key, hash, Authorization value or upstream password in any log line`, async (t) => {
    const secrets = new Secrets();
    const pw = passwordsOf(secrets);
    const { stub, state } = await stubUpstream(t, pw);
    const { log, lines } = captureLog();

    const envKey = secrets.key('env (psg_)', newKey());
    const shortKey = secrets.key('env (short)', testKey());
    const fileKey = secrets.key('policy-file', newKey());
    const reloadedKey = secrets.key('reloaded', newKey());
    const upstreamCredential = secrets.header('upstream credential', `Bearer up_${rnd(16)}`);
    const env = { PETSTORE_API_KEYS: `${envKey}, ${shortKey}`, UPSTREAM_AUTH: upstreamCredential };
    const policy = (keyForFile: string, upstreamUrl = `${stub.origin}/v1`) =>
      policyText({
        upstream: { url: upstreamUrl, timeouts: { connectMs: 500, headersMs: 300, bodyMs: 300 } },
        policies: { auth: { keys: [{ id: 'ops', hash: hashKey(keyForFile) }], upstreamAuthorization: { fromEnv: 'UPSTREAM_AUTH' } } },
      });
    const load = (text: string) => {
      const loaded = parsePolicy(text, { env });
      if (!loaded.ok) throw new Error(formatProblems('policy', loaded.problems));
      return compileGateway(loaded.config, { env, log });
    };
    const holder = new GatewayHolder(load(policy(fileKey)));
    const gw = await listenEngine(t, engine, holder, log);

    const statuses: string[] = [];
    const send = async (path: string, authorization?: string, extra: Record<string, string> = {}, method = 'GET'): Promise<Response> => {
      const headers: Record<string, string> = { ...extra };
      if (authorization !== undefined) headers.authorization = secrets.header('presented', authorization);
      const body = method === 'POST' ? '{"name":"Rex","categoryId":1}' : undefined;
      if (body !== undefined) headers['content-type'] = 'application/json';
      const res = await request(gw.url + path, { method, headers, ...(body === undefined ? {} : { body }) });
      statuses.push(`${method} ${path.slice(0, 40)} ${res.status}`);
      return res;
    };
    const bearer = (k: string) => `Bearer ${k}`;

    t.test('valid keys are served', async (t) => {
      for (const k of [envKey, shortKey, fileKey]) {
        t.equal((await send('/v1/pets', bearer(k))).status, 200);
        t.equal((await send('/v1/pets', bearer(k), {}, 'POST')).status, 201);
        t.equal((await send('/v1/pets/1', `bearer ${k}`)).status, 200);
      }
      t.equal(stub.requests.length, 9);
      t.ok(stub.requests.every((r) => r.headers.authorization === upstreamCredential), 'the upstream got the gateway credential, not the client key');
    });

    t.test('wrong keys are refused', async (t) => {
      const wrong = [...nearMisses(envKey), ...nearMisses(shortKey), ...nearMisses(fileKey), newKey(), testKey(), `${rnd(20)}==`];
      for (const k of wrong) {
        secrets.key('wrong', k);
        t.equal((await send('/v1/pets', bearer(k))).status, 401);
        t.equal((await send('/v1/pets/1', bearer(k))).status, 401);
        t.equal((await send('/admin/secret', bearer(k), {}, 'POST')).status, 401);
      }
    });

    t.test('malformed Authorization headers are refused', async (t) => {
      const basic = Buffer.from(`ops:${envKey}`).toString('base64');
      secrets.plain('Basic credentials (base64)', basic);
      const malformed = [
        `Basic ${basic}`,
        `Bearer ${envKey}!`,
        `Bearer "${envKey}"`,
        `Bearer ${envKey} ${shortKey}`,
        `Bearer\t${fileKey}`,
        `Token ${fileKey}`,
        envKey,
        `Bearer ${envKey},`,
        `Bearer ${shortKey}%00`,
        `Bearer ${'A'.repeat(600)}${shortKey}`,
      ];
      for (const h of malformed) {
        const res = await send('/v1/pets', h);
        t.equal(res.status, 401, `${h.slice(0, 20)}...: 401`);
        t.notOk(res.body.includes(envKey) || res.body.includes(shortKey) || res.body.includes(fileKey), 'the answer does not echo the key');
      }
      // Raw: two Authorization headers, and a header value node would not let a client build.
      const port = gw.port;
      const two = await rawExchange(port, `GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: ${secrets.header('first of two', bearer(testKey()))}\r\nAuthorization: ${secrets.header('second of two', bearer(envKey))}\r\nConnection: close\r\n\r\n`);
      t.match(two, /^HTTP\/1\.1 (401|400) /, 'two Authorization headers: refused');
      const ctl = await rawExchange(port, `GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: ${secrets.header('control-char', `Bearer ${shortKey}\u0001x`)}\r\nConnection: close\r\n\r\n`);
      t.match(ctl, /^HTTP\/1\.1 (401|400) /, 'a control character in the header: refused');
    });

    t.test('keys in the query string and in other headers', async (t) => {
      const q = (k: string) => encodeURIComponent(k);
      for (const [path, auth] of [
        [`/v1/pets?api_key=${q(envKey)}`, undefined],
        [`/v1/pets?key=${q(shortKey)}&limit=5`, undefined],
        [`/v1/pets/1?access_token=${q(fileKey)}`, undefined],
        [`/v1/pets?api_key=${q(envKey)}`, bearer(envKey)],
        [`/v1/pets/1?key=${q(shortKey)}`, bearer(envKey)],
        [`/v1/pets/1?${q(fileKey)}`, bearer(envKey)],
        [`/v1/pets?key=${q(shortKey)}&limit=500`, bearer(envKey)],
        [`/v1/${q(shortKey)}`, bearer(envKey)],
      ] as Array<[string, string | undefined]>) {
        const res = await send(path, auth);
        t.ok([200, 400, 401, 404].includes(res.status), `${path.slice(0, 30)}: ${res.status}`);
      }
      for (const [name, value] of [
        ['x-api-key', envKey],
        ['cookie', `session=${shortKey}`],
        ['proxy-authorization', `Bearer ${fileKey}`],
        ['x-forwarded-authorization', `Bearer ${envKey}`],
      ]) {
        secrets.plain(`${name} header`, value!);
        t.equal((await send('/v1/pets', undefined, { [name!]: value! })).status, 401, `${name} alone: 401`);
        t.equal((await send('/v1/pets/1', bearer(shortKey), { [name!]: value! })).status, 200, `${name} with a key: 200`);
      }
    });

    t.test('no client key reaches the upstream as Authorization or in a path', async (t) => {
      const clientKeys = [envKey, shortKey, fileKey];
      const encoded = clientKeys.map(encodeURIComponent);
      t.ok(stub.requests.length > 0, `${stub.requests.length} upstream requests`);
      t.ok(
        stub.requests.every((r) => r.headers.authorization === upstreamCredential),
        'the upstream always got the gateway credential as Authorization (upstreamAuthorization: fromEnv)',
      );
      // Recorded, not asserted: getPet and createPet forward the client's raw query string by design
      // (test/unit/route.test.ts pins it), so a key a client puts there reaches the upstream's URL.
      const inUrl = stub.requests.filter((r) => [...clientKeys, ...encoded].some((k) => r.url.includes(k))).map((r) => r.url.replace(/\?.*/, '?…'));
      t.comment(`upstream URLs carrying a client key from the client's query: ${inUrl.length} (${[...new Set(inUrl)].join(', ')})`);
      t.notOk(
        stub.requests.some((r) => r.url.split('?')[0]!.includes(envKey) || r.url.split('?')[0]!.includes(shortKey)),
        'no upstream path carries a client key (paths are rebuilt from the operation)',
      );
    });

    t.test('upstream 5xx error pages with passwords: the client gets the Error shape only', async (t) => {
      for (const mode of ['html500', 'json500'] as const) {
        state.mode = mode;
        for (const [path, method] of [
          ['/v1/pets', 'GET'],
          ['/v1/pets', 'POST'],
          [`/v1/pets/1?key=${encodeURIComponent(shortKey)}`, 'GET'],
          ['/v1/pets/2', 'GET'],
        ] as const) {
          const res = await send(path, bearer(envKey), {}, method);
          t.equal(res.status, 500, `${mode} ${method} ${path.slice(0, 12)}: 500`);
          t.strictSame(Object.keys((res.json ?? {}) as object).sort(), ['code', 'message', 'status'], 'the Error shape');
          for (const p of Object.values(pw)) t.notOk(res.body.includes(p), 'no password in the answer');
        }
      }
      state.mode = 'ok';
    });

    t.test('upstream timeout (504) and upstream down (502)', async (t) => {
      state.mode = 'hang';
      t.equal((await send('/v1/pets', bearer(envKey))).status, 504);
      t.equal((await send(`/v1/pets/1?key=${encodeURIComponent(shortKey)}`, bearer(fileKey))).status, 504);
      t.equal((await send('/v1/pets', bearer(shortKey), {}, 'POST')).status, 504);
      state.mode = 'ok';
      // A second gateway on the same logger, its upstream a closed port.
      const port = await closedPort();
      // A password in upstream.url is refused when the file loads (it would be printed), and the
      // problem does not echo it; the gateway takes its credential from upstreamAuthorization.
      const withPassword = parsePolicy(policy(fileKey, `http://ops:${secrets.password('upstream URL', rnd(10))}@127.0.0.1:${port}/v1`), { env });
      t.notOk(withPassword.ok, 'a user:password@ upstream.url is refused');
      assertNoSecrets(t, withPassword.ok ? [] : formatProblems('policy.yaml', withPassword.problems).split('\n'), secrets, 'the problem of a credential in upstream.url');
      const downHolder = new GatewayHolder(load(policy(fileKey, `http://127.0.0.1:${port}/v1`)));
      const down = await listenEngine(t, engine, downHolder, log);
      for (const [path, method] of [
        ['/v1/pets', 'GET'],
        ['/v1/pets', 'POST'],
        [`/v1/pets/1?key=${encodeURIComponent(shortKey)}`, 'GET'],
      ] as const) {
        const headers = { authorization: secrets.header('presented', bearer(envKey)), ...(method === 'POST' ? { 'content-type': 'application/json' } : {}) };
        const res = await request(down.url + path, { method, headers, ...(method === 'POST' ? { body: '{"name":"Rex","categoryId":1}' } : {}) });
        t.equal(res.status, 502, `${method} ${path.slice(0, 12)}: 502`);
      }
    });

    t.test('a reload swaps the keys; wrong keys after it are refused alike', async (t) => {
      t.strictSame(holder.replace(load(policy(reloadedKey))), [], 'the reload is accepted');
      t.equal((await send('/v1/pets', bearer(fileKey))).status, 401, 'the replaced file key is refused');
      t.equal((await send('/v1/pets', bearer(reloadedKey))).status, 200, 'the new file key is served');
      t.equal((await send('/v1/pets', bearer(envKey))).status, 200, 'the env key still is');
      const refused = holder.replace(load(policy(reloadedKey, `http://127.0.0.1:${stub.port}/other/v1`)));
      t.ok(refused.length > 0, 'a reload that changes the upstream is refused');
      for (const k of [...nearMisses(reloadedKey), fileKey]) t.equal((await send('/v1/pets', bearer(secrets.key('wrong after reload', k)))).status, 401);
      // What the CLI logs when a reload is refused: the problems of the file. A plaintext key
      // pasted where a hash belongs, and a broken YAML line next to a hash, must not be echoed.
      const pasted = parsePolicy(policyText({ policies: { auth: { keys: [{ id: 'ops', hash: reloadedKey }] } } }), { env });
      const broken = parsePolicy(`policies:\n  auth:\n    keys: [{ id: ops, hash: "${hashKey(reloadedKey)}" }\n  new-pet: {`, { env });
      t.notOk(pasted.ok || broken.ok, 'both files are invalid');
      const problems = [pasted, broken].flatMap((r) => (r.ok ? [] : formatProblems('policy.yaml', r.problems).split('\n')));
      t.ok(problems.length >= 2, `${problems.length} problem lines`);
      assertNoSecrets(t, problems, secrets, 'the problems of a refused policy file');
    });

    t.test('the log', async (t) => {
      t.comment(`${lines.length} log lines at trace over ${statuses.length} requests`);
      t.ok(lines.length > 0, 'the logger was used');
      t.ok(lines.some((l) => l.includes('upstream error body replaced by a generic message')), 'the 5xx pages were logged (redacted) for the operator');
      t.ok(lines.some((l) => l.includes('"upstream_timeout"')), 'the 504 was logged');
      t.ok(lines.some((l) => l.includes('"upstream_unavailable"')), 'the 502 was logged');
      t.ok(lines.filter((l) => l.includes('upstream error body replaced')).length >= 8, 'both kinds of 5xx page (HTML, JSON) were logged');
      assertNoSecrets(t, lines, secrets, 'gateway log');
      for (const s of secrets.all) {
        const hit = lines.find((l) => l.includes(s.value));
        if (hit !== undefined) t.comment(`LEAK (${s.label}): ${hit.slice(0, 400)}`);
      }
    });
  });
}

// ---------------------------------------------------------------------------------------------
// The built CLI


/** The output lines of a CLI process other than its startup banner (the intended print of the key). */
function logLinesOf(handle: ProcessHandle): string[] {
  const { stdout, stderr } = handle.output();
  return [...stdout.split('\n'), ...stderr.split('\n')].filter(
    (l) => l !== '' && !/^petstore-gateway listening on /.test(l) && !/^API key for this run \(kept in memory only\): /.test(l) && !/^try: curl /.test(l),
  );
}

async function stop(handle: ProcessHandle): Promise<void> {
  if (handle.child.exitCode !== null || handle.child.signalCode !== null) return;
  handle.child.kill('SIGTERM');
  await within(handle.exited, 5000, undefined);
}

async function drive(secrets: Secrets, url: string, key: string): Promise<string[]> {
  const out: string[] = [];
  const go = async (path: string, headers: Record<string, string>) => {
    for (const v of Object.values(headers)) secrets.header('presented', v);
    const res = await request(url + path, { headers });
    out.push(`${path.slice(0, 20)} ${res.status}`);
  };
  await go('/v1/pets', { authorization: `Bearer ${key}` });
  for (const k of [...nearMisses(key), newKey(), testKey()]) {
    secrets.key('wrong', k);
    await go('/v1/pets', { authorization: `Bearer ${k}` });
    await go('/v1/pets/1', { authorization: `bearer ${k}` });
    await go(`/v1/pets?api_key=${k}`, {});
    await go(`/v1/pets/1?key=${k}`, { authorization: `Bearer ${key}` });
  }
  for (const h of [`Basic ${Buffer.from(`u:${key}`).toString('base64')}`, `Bearer ${key}!`, `Token ${key}`, key, `Bearer "${key}"`]) await go('/v1/pets', { authorization: h });
  await go('/v1/pets', { 'x-api-key': key });
  return out;
}

// parity: the banner, the ephemeral key and the CLI's reload and stop log lines are the same for every
// engine; each engine's own log lines at trace (a logger with no redaction) are checked in process above.
t.test('CLI: serve --port 0 --ephemeral-key at LOG_LEVEL=trace logs no key', async (t) => {
  const secrets = new Secrets();
  const { handle, match } = await cliRuns.ephemeral;
  const url = match[1]!;
  const key = secrets.key('ephemeral', match[2]!);
  t.match(key, /^psg_[A-Za-z0-9_-]{43}$/, 'the key was printed at startup');
  await drive(secrets, url, key);
  handle.child.kill('SIGHUP');
  await waitFor('the reload', () => handle.output().stdout.includes('policy reloaded'));
  t.equal((await request(`${url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })).status, 200, 'the key still works after the reload');
  await drive(secrets, url, key);
  await stop(handle);
  const { stdout, stderr } = handle.output();
  t.notOk(stdout.includes(key), 'the key is on no stdout (log) line');
  const banner = stderr.split('\n').filter((l) => l.includes(key));
  t.equal(banner.length, 2, 'the key appears in the startup banner on stderr only (the key line and the curl hint)');
  const lines = logLinesOf(handle);
  t.ok(lines.some((l) => l.includes('policy reloaded')) && lines.some((l) => l.includes('shutting down')), `${lines.length} log lines, the reload and the shutdown among them`);
  assertNoSecrets(t, lines, secrets, 'CLI output');
});

// parity: a reload is read, validated and refused or accepted by the CLI, the same for every engine;
// each engine's log lines at trace, across a reload, are checked in process above.
t.test('CLI: refused and accepted reloads of a policy file log no key nor hash', async (t) => {
  const secrets = new Secrets();
  const file = policyFile;
  const base = POLICY_BASE;
  const { handle, match } = await cliRuns.policyFile;
  const url = match[1]!;
  const key = secrets.key('ephemeral', match[2]!);
  const opsKey = secrets.key('ops', testKey());
  const pasted = secrets.key('pasted plaintext', testKey());
  const count = (s: string) => handle.output().stdout.split(s).length - 1;
  const reload = async (lines: string[], expect: 'policy reloaded' | 'policy reload refused') => {
    writeFileSync(file, [...base, ...lines, ''].join('\n'));
    const before = count(expect);
    handle.child.kill('SIGHUP');
    await waitFor(expect, () => count(expect) > before);
  };
  // A plaintext key where a hash belongs; a YAML error on the line of a hash; a wrong hash format.
  await reload([`    keys: [{ id: ops, hash: "${pasted}" }]`], 'policy reload refused');
  await reload([`    keys: [{ id: ops, hash: "${hashKey(opsKey)}" }`, '  new-pet: {'], 'policy reload refused');
  const upper = secrets.plain('upper-case hash', hashKey(opsKey).toUpperCase().replace('SHA256', 'sha256'));
  await reload([`    keys: [{ id: ops, hash: "${upper}" }]`], 'policy reload refused');
  t.equal((await request(`${url}/v1/pets`, { headers: { authorization: `Bearer ${opsKey}` } })).status, 401, 'the ops key is not accepted yet');
  await reload([`    keys: [{ id: ops, hash: "${hashKey(opsKey)}" }]`], 'policy reloaded');
  t.equal((await request(`${url}/v1/pets`, { headers: { authorization: secrets.header('ops', `Bearer ${opsKey}`) } })).status, 200, 'the ops key is accepted after the reload');
  t.equal((await request(`${url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })).status, 200, 'so is the ephemeral key');
  await drive(secrets, url, opsKey);
  await stop(handle);
  const lines = logLinesOf(handle);
  t.ok(lines.filter((l) => l.includes('policy reload refused')).length >= 3, 'the refused reloads were logged');
  assertNoSecrets(t, lines, secrets, 'CLI output');
});
