/**
 * The admin port at the edge, through the real CLI: `check` and `serve` refuse weak admin tokens
 * (naming the variable or file and the token's number, never the token); tokens of
 * `server.admin.tokensFile` are re-read on SIGHUP (one process) and with `--watch` (the
 * `--workers 2` primary, which owns the admin listener), a weak file refused with the old tokens
 * kept; wrong tokens are locked per address, logged once and counted in /metrics; a foreign Host
 * is refused.
 */
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import t from 'tap';
import { ADMIN_AUTH_FAILURES_METRIC } from '../../src/ops/admin-guard.js';
import { assertError, type TapTest } from '../helpers/assert.js';
import { httpsRequest, makeTestPki } from '../helpers/certs.js';
import { parseExposition, value } from '../helpers/prom.js';
import { bearer, ensureBuilt, rawExchange, request, runCli, spawnCliUntil, tempDir, testKey, type ProcessHandle, adminUrl } from '../helpers/servers.js';

ensureBuilt();

const dir = tempDir(t, 'admin-edge');
const API_KEY = testKey();
const strong = (): string => randomBytes(32).toString('base64url');
const ENV_TOKEN = strong();
/** Weak, and distinctive enough to prove it is never printed. */
const WEAK = 'hunter2hunter2hunter2hunter2hunter2';
const READY = /^(?=[\s\S]*petstore-gateway listening on http:\/\/127\.0\.0\.1:\d+)(?=[\s\S]*"msg":"admin listening)/;

function policy(name: string, tokensFile: string, extra: Record<string, unknown> = {}): string {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ version: 1, upstream: { url: 'builtin' }, server: { admin: { host: '127.0.0.1', port: 0, tokensFile, ...extra } } }));
  return file;
}

/** Writes a tokens file as a secret manager or kubelet does: a new file renamed into place. */
function writeTokens(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

/** Polls an async condition at most 100 times within `ms`. */
async function until(what: string, ms: number, pred: () => Promise<boolean>): Promise<void> {
  const start = Date.now();
  for (let i = 0; i < 100 && Date.now() - start < ms; i++) {
    if (await pred()) return;
    await new Promise((r) => setTimeout(r, ms / 100));
  }
  throw new Error(`${what}: not within ${ms} ms`);
}

// parity: token checks happen before any engine starts; the admin listener is the CLI's own, the same for every engine.
t.test('check and serve refuse a weak admin token, naming where it is, never printing it', async (t) => {
  const tokens = join(dir, 'weak-tokens');
  writeFileSync(tokens, `# ops team\n${strong()}\n${WEAK}\n`);
  const withFile = policy('weak-file', tokens);
  const noFile = join(dir, 'plain.json');
  writeFileSync(noFile, JSON.stringify({ version: 1, upstream: { url: 'builtin' } }));
  const env = { PETSTORE_API_KEYS: API_KEY };
  // The review's reproduction (`a`) beside a strong token; serve with a guessable one; a weak file.
  const [checkEnv, serveEnv, checkFile] = await Promise.all([
    runCli(t, ['check', noFile], { env: { ...env, PETSTORE_ADMIN_TOKENS: `${ENV_TOKEN},a` } }),
    runCli(t, ['serve', '--policy', noFile, '--port', '0'], { env: { ...env, PETSTORE_ADMIN_TOKENS: WEAK } }),
    runCli(t, ['check', withFile], { env: { ...env, PETSTORE_ADMIN_TOKENS: ENV_TOKEN } }),
  ]);
  t.equal(checkEnv.code, 78);
  t.match(checkEnv.stdout, /\$\.server\.admin\.tokensFromEnv: token 2 of the environment variable PETSTORE_ADMIN_TOKENS is 1 character long; an admin token needs at least 32/);
  t.notMatch(checkEnv.stdout, /token 1 /, 'the strong token passes');
  t.equal(serveEnv.code, 78, 'serve refuses to start');
  t.match(serveEnv.stderr, /token 1 of the environment variable PETSTORE_ADMIN_TOKENS repeats itself/);
  t.equal(checkFile.code, 78);
  t.match(checkFile.stdout, new RegExp(`\\$\\.server\\.admin\\.tokensFile: token 2 of ${tokens} \\(line 3\\) repeats itself`));
  t.notMatch(checkFile.stdout, /tokensFromEnv|token 1 /, 'the strong ones pass');
  for (const r of [checkEnv, serveEnv, checkFile]) t.notOk((r.stdout + r.stderr).includes(WEAK) || (r.stdout + r.stderr).includes(ENV_TOKEN), 'no token is ever printed');
});

async function scenario(t: TapTest, name: string, args: string[], reload: (h: ProcessHandle) => void): Promise<void> {
  const sub = join(dir, name);
  mkdirSync(sub);
  const tokensFile = join(sub, 'tokens');
  const [b, c] = [strong(), strong()];
  writeTokens(tokensFile, `# admin tokens\n${b}\n`);
  const file = policy(name, tokensFile, { bruteForce: { maxFailures: 5, windowSeconds: 60 } });
  const { handle } = await spawnCliUntil(t, ['serve', '--policy', file, '--port', '0', ...args], READY, {
    env: { LOG_LEVEL: 'info', PETSTORE_API_KEYS: API_KEY, PETSTORE_ADMIN_TOKENS: ENV_TOKEN },
    timeoutMs: 30_000,
  });
  const admin = adminUrl(handle);
  // No registry is configured: a request past authentication gets 404 "No key registry".
  const status = async (token: string) => (await request(`${admin}/keys`, { headers: bearer(token) })).status;
  t.equal(await status(ENV_TOKEN), 404, 'the environment token works');
  t.equal(await status(b), 404, 'the file token works');
  t.equal(await status(c), 401, 'a token not yet in the file does not');

  // The file changes: the new token works, the removed one does not; the environment's stays.
  // Waiting on the log, not on the token: each failed try would count towards the lock.
  const reloaded = () => handle.output().stdout.split('\n').filter((l) => l.includes('"msg":"admin tokens reloaded"')).length;
  writeTokens(tokensFile, `# rotated\n${c}\n`);
  reload(handle);
  await until('the reload', 5000, async () => reloaded() === 1);
  t.equal(await status(c), 404, 'the new token works');
  t.equal(await status(b), 401, 'the removed token is refused');
  t.equal(await status(ENV_TOKEN), 404, 'the environment token stays');

  // A weak file: refused with an error line, the tokens in force stay.
  writeTokens(tokensFile, `${c}\n${WEAK}\n`);
  reload(handle);
  await until('the refusal is logged', 5000, async () => handle.output().stdout.includes('admin tokens reload refused; the tokens in force stay'));
  t.equal(await status(c), 404, 'the token in force still works');
  t.equal(await status(WEAK), 401, 'the weak token was not taken');
  t.equal(await status(b), 401);

  // A foreign Host (DNS rebinding) is refused on every path; the listener's own address is not.
  const port = new URL(admin).port;
  assertError(t, await request(`${admin}/metrics`, { headers: { host: `rebind.attacker.example:${port}` } }), 400, 'invalid_request', { message: /Host header/ });
  t.equal((await request(`${admin}/healthz`, { headers: { host: `localhost:${port}` } })).status, 200);

  // Wrong tokens: four so far (c before it was added, b twice, the weak one); the fifth locks the
  // address, the right token included.
  t.equal(await status(strong()), 401, 'the fifth failure');
  const locked = await request(`${admin}/keys`, { headers: bearer(c) });
  assertError(t, locked, 429, 'too_many_auth_failures');
  t.match(locked.headers['retry-after'], /^[1-9][0-9]*$/);
  t.equal((await request(`${admin}/healthz`)).status, 200, 'probes from that address still pass');
  const scrape = parseExposition((await request(`${admin}/metrics`)).body);
  t.equal(value(scrape, ADMIN_AUTH_FAILURES_METRIC, { reason: 'invalid' }), 5);
  t.equal(value(scrape, ADMIN_AUTH_FAILURES_METRIC, { reason: 'locked' }), 1);
  const out = handle.output().stdout;
  t.equal(out.split('\n').filter((l) => l.includes('"msg":"failed admin authentication"')).length, 1, 'one failure line for the window');
  t.equal(out.split('\n').filter((l) => l.includes('"msg":"admin API locked for an address')).length, 1, 'one lock line');
  for (const secret of [ENV_TOKEN, b, c, WEAK]) t.notOk(out.includes(secret), 'no token in the log');
}

// parity: the admin listener and its tokens are the CLI's, the same for every engine.
t.test('one process: tokens file reloaded on SIGHUP; lock, log, metric, Host', async (t) => {
  await scenario(t, 'single', [], (h) => h.child.kill('SIGHUP'));
});

// parity: the admin listener is the --workers primary's, whatever the engine.
t.test('--workers 2: the primary re-reads the tokens file with --watch', async (t) => {
  await scenario(t, 'workers', ['--workers', '2', '--watch'], () => undefined);
});

// parity: the admin listener's TLS is the CLI's own, the same for every engine.
t.test('server.admin.tls: HTTPS on the admin port, no clear text, the certificate reloaded on SIGHUP', async (t) => {
  const pki = makeTestPki(t);
  const sub = join(dir, 'tls');
  mkdirSync(sub);
  const cert = join(sub, 'cert.pem');
  const key = join(sub, 'key.pem');
  copyFileSync(pki.server.cert, cert);
  copyFileSync(pki.server.key, key);
  const good = policy('tls', join(sub, 'tokens'), { tls: { certFile: cert, keyFile: key } });
  writeTokens(join(sub, 'tokens'), `${strong()}\n`);
  const expired = policy('tls-expired', join(sub, 'tokens'), { tls: { certFile: pki.expired.cert, keyFile: pki.expired.key } });
  const [refused, started] = await Promise.all([
    runCli(t, ['check', expired], { env: { PETSTORE_API_KEYS: API_KEY } }),
    spawnCliUntil(t, ['serve', '--policy', good, '--port', '0'], READY, { env: { LOG_LEVEL: 'info', PETSTORE_API_KEYS: API_KEY, PETSTORE_ADMIN_TOKENS: ENV_TOKEN }, timeoutMs: 30_000 }),
  ]);
  t.equal(refused.code, 78);
  t.match(refused.stdout, /\$\.server\.admin\.tls: certFile .* expired/);
  const { handle } = started;
  const admin = adminUrl(handle);
  t.match(admin, /^https:\/\/127\.0\.0\.1:\d+$/, 'the log says https');
  const ca = pki.read(pki.ca);
  const fingerprint = (): Promise<string> =>
    new Promise((resolve, reject) => {
      const socket = tlsConnect({ host: '127.0.0.1', port: Number(new URL(admin).port), ca, servername: 'localhost' }, () => {
        resolve(socket.getPeerCertificate().fingerprint256);
        socket.end();
      });
      socket.on('error', reject);
    });
  t.equal((await httpsRequest(`${admin}/healthz`, { ca })).status, 200);
  const keys = await httpsRequest(`${admin}/keys`, { ca, headers: { authorization: `Bearer ${ENV_TOKEN}` } });
  t.equal(keys.status, 404, 'the token crossed TLS and was accepted (no registry: 404)');
  // Clear text to the TLS port gets no HTTP answer at all.
  const plain = await rawExchange(Number(new URL(admin).port), 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  t.notMatch(plain, /^HTTP\//, 'no clear-text HTTP answer');
  const before = await fingerprint();
  copyFileSync(pki.server2.cert, cert);
  copyFileSync(pki.server2.key, key);
  handle.child.kill('SIGHUP');
  await until('the new certificate is served', 5000, async () => (await fingerprint()) !== before);
  t.equal((await httpsRequest(`${admin}/healthz`, { ca })).status, 200, 'still serving after the reload');
  // A pair that does not match is refused; the certificate in force stays.
  copyFileSync(pki.server.key, key);
  const after = await fingerprint();
  handle.child.kill('SIGHUP');
  await until('the refusal is logged', 5000, async () => handle.output().stdout.includes('TLS certificate reload refused'));
  t.equal(await fingerprint(), after, 'the certificate in force stays');
});
