/**
 * The admin port's trust at the edge: which admin tokens are strong enough
 * (src/ops/admin-tokens.ts), where they come from (environment, tokens file), the lock on wrong
 * tokens per address with its log lines and metric (src/ops/admin-guard.ts), and the Host check
 * of the admin listener (src/ops/admin.ts), on a real listener on 127.0.0.1.
 */
import { randomBytes, randomInt } from 'node:crypto';
import type { Logger } from 'pino';
import t from 'tap';
import { adminKeyRoutes } from '../../src/cli/keys.js';
import { parsePolicy } from '../../src/config/load.js';
import { hostChecker, READY, startAdmin } from '../../src/ops/admin.js';
import { ADMIN_AUTH_FAILURES_METRIC, AdminAuthGuard } from '../../src/ops/admin-guard.js';
import { keyAdminRoutes } from '../../src/ops/admin-keys.js';
import { AdminTokens, readAdminTokens, tokensOfFile, tokenWeakness } from '../../src/ops/admin-tokens.js';
import { newKey } from '../../src/policies/auth/keys.js';
import { assertError, type TapTest } from '../helpers/assert.js';
import { manualWallClock } from '../helpers/clock.js';
import { parseExposition, value } from '../helpers/prom.js';
import { parseRawResponse, rawExchange, request } from '../helpers/servers.js';

const strongToken = (): string => randomBytes(32).toString('base64url');
const digits = (n: number): string => Array.from({ length: n }, () => randomInt(10)).join('');

t.test('tokenWeakness: short, repeated, runs and few characters are refused; random text passes', async (t) => {
  const weak: Array<[string, RegExp]> = [
    ['a', /^is 1 character long; an admin token needs at least 32/],
    ['changeme', /^is 8 characters long/],
    [randomBytes(23).toString('base64url').slice(0, 31), /^is 31 characters long/],
    ['a'.repeat(64), /too few distinct characters/],
    ['ab'.repeat(20), /too few distinct characters/],
    ['changeme-'.repeat(4), /repeats itself/],
    ['0123456789'.repeat(4), /repeats itself/],
    ['abcdefghijklmnopqrstuvwxyz012345', /run of neighbouring characters/],
    // Four letters shuffled: at most 2 bits a character, 70 in 35 characters, under the 72 asked.
    [Array.from({ length: 35 }, () => 'wxyz'[randomInt(4)]).join(''), /too few distinct characters/],
    [`${strongToken()} x`, /cannot carry/],
  ];
  for (const [token, why] of weak) {
    const said = tokenWeakness(token);
    t.match(said, why, `refused: ${token.length} characters`);
    if (token.length >= 8) t.notOk(said?.includes(token), 'the reason never quotes the token');
  }
  // Random tokens of every usual alphabet, many of each: never refused.
  const makers: Array<[string, () => string]> = [
    ['openssl rand -hex 16', () => randomBytes(16).toString('hex')],
    ['openssl rand -base64 32', () => randomBytes(32).toString('base64')],
    ['32 random digits', () => digits(32)],
    ['petstore-gateway new-key', newKey],
  ];
  for (const [name, make] of makers) {
    const refused = Array.from({ length: 2000 }, make).filter((tok) => tokenWeakness(tok) !== undefined);
    t.strictSame(refused, [], `${name}: 2000 random tokens, none refused`);
  }
});

t.test('readAdminTokens: environment and file, named by source and number, problems without the token', async (t) => {
  const [a, b, c] = [strongToken(), strongToken(), strongToken()];
  const file = `# admin tokens\n${b}\n\n  # rotated 2026-11\n${c}\r\n`;
  t.strictSame(tokensOfFile(file), [
    { token: b, line: 2 },
    { token: c, line: 5 },
  ]);
  const read = readAdminTokens({ tokensFromEnv: 'ADMIN', tokensFile: '/run/secrets/admin' }, { ADMIN: ` ${a} , ` }, (f) => (f === '/run/secrets/admin' ? file : ''));
  t.strictSame(read, {
    ok: true,
    tokens: [
      { name: 'ADMIN#1', token: a },
      { name: '/run/secrets/admin#1', token: b },
      { name: '/run/secrets/admin#2', token: c },
    ],
  });
  const weak = readAdminTokens({ tokensFromEnv: 'ADMIN', tokensFile: 'tokens.txt' }, { ADMIN: `${a},hunter2` }, () => `${b}\n# x\naaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n`);
  t.equal(weak.ok, false);
  if (!weak.ok) {
    t.strictSame(
      weak.problems.map((p) => p.path),
      ['$.server.admin.tokensFromEnv', '$.server.admin.tokensFile'],
    );
    t.match(weak.problems[0]?.message, /^token 2 of the environment variable ADMIN is 7 characters long/);
    t.match(weak.problems[1]?.message, /^token 2 of tokens.txt \(line 3\) has too few distinct characters/);
    t.notMatch(JSON.stringify(weak), /hunter2|aaaaaaaa/, 'no token in the problems');
  }
  const missing = readAdminTokens({ tokensFromEnv: null, tokensFile: '/nonexistent/tokens' }, {});
  t.match(missing, { ok: false, problems: [{ path: '$.server.admin.tokensFile', message: 'cannot read /nonexistent/tokens (ENOENT)' }] });
  t.strictSame(readAdminTokens({ tokensFromEnv: 'ADMIN' }, {}), { ok: true, tokens: [] }, 'no source set: no token');
});

t.test('AdminTokens: matches by digest, names the token, replaced whole', async (t) => {
  const [a, b] = [strongToken(), strongToken()];
  const set = new AdminTokens([{ name: 'E#1', token: a }]);
  t.equal(set.match(a), 'E#1');
  t.equal(set.match(b), undefined);
  t.equal(set.match(a + 'x'), undefined);
  t.equal(set.replace([{ name: 'E#1', token: a }]), false, 'the same set: no change');
  t.equal(set.replace([{ name: 'F#1', token: b }]), true);
  t.equal(set.match(a), undefined, 'the old token is gone');
  t.equal(set.match(b), 'F#1');
  t.equal(set.replace([]), true);
  t.equal(set.size, 0);
});

t.test('hostChecker: own addresses, loopback, IP literals on a wildcard bind, configured names', async (t) => {
  const loop = hostChecker({ address: '127.0.0.1', family: 'IPv4', port: 9464 });
  const wild = hostChecker({ address: '0.0.0.0', family: 'IPv4', port: 9464 }, ['prom-target.internal', '.svc.cluster.local']);
  const wild6 = hostChecker({ address: '::', family: 'IPv6', port: 9464 });
  const pod = hostChecker({ address: '10.1.2.3', family: 'IPv4', port: 9464 }, ['203.0.113.9']);
  const any = hostChecker({ address: '127.0.0.1', family: 'IPv4', port: 9464 }, ['*']);
  const cases: Array<[string, (h: string | undefined) => boolean, string | undefined, boolean]> = [
    ['loopback bind', loop, '127.0.0.1:9464', true],
    ['loopback bind', loop, 'localhost:9464', true],
    ['loopback bind', loop, 'LOCALHOST.', true],
    ['loopback bind', loop, '127.0.0.2', true],
    ['loopback bind', loop, '[::1]:9464', true],
    ['loopback bind', loop, undefined, true],
    ['loopback bind', loop, 'attacker.example:9464', false],
    ['loopback bind', loop, 'localhost.attacker.example', false],
    ['loopback bind', loop, '10.1.2.3:9464', false],
    ['loopback bind', loop, '', false],
    ['loopback bind', loop, 'a b', false],
    ['loopback bind', loop, '[::1', false],
    ['wildcard bind', wild, '10.1.2.3:9464', true],
    ['wildcard bind', wild, '[fd00::1]:9464', true],
    ['wildcard bind', wild, 'prom-target.internal:9464', true],
    ['wildcard bind', wild, 'PROM-TARGET.internal', true],
    ['wildcard bind', wild, 'petstore-gateway.prod.svc.cluster.local:9464', true],
    ['wildcard bind', wild, 'svc.cluster.local', true],
    ['wildcard bind', wild, 'evilsvc.cluster.local', false],
    ['wildcard bind', wild, 'other.internal', false],
    ['wildcard bind', wild, 'rebind.attacker.example', false],
    ['IPv6 wildcard bind', wild6, '192.0.2.7', true],
    ['IPv6 wildcard bind', wild6, '[2001:db8::1]', true],
    ['IPv6 wildcard bind', wild6, 'attacker.example', false],
    ['pod IP bind', pod, '10.1.2.3:9464', true],
    ['pod IP bind', pod, '10.1.2.4:9464', false],
    ['pod IP bind', pod, '127.0.0.1', true],
    ['pod IP bind', pod, '203.0.113.9:9464', true],
    ['*', any, 'anything.example', true],
  ];
  for (const [bind, ok, host, expected] of cases) t.equal(ok(host), expected, `${bind}: Host ${JSON.stringify(host)}`);
});

async function listener(t: TapTest, options: { tokens?: AdminTokens; guard?: AdminAuthGuard; allowedHosts?: string[] } = {}) {
  const guard = options.guard ?? new AdminAuthGuard({ maxFailures: 10, windowSeconds: 60 });
  const routes = keyAdminRoutes({ tokens: options.tokens ?? new AdminTokens(), guard, registry: () => undefined, fileIds: () => new Set(), log: undefined });
  const admin = await startAdmin({
    host: '127.0.0.1',
    port: 0,
    readiness: () => READY,
    metrics: async () => ({ body: 'petstore_gateway_up 1\n', contentType: 'text/plain; version=0.0.4; charset=utf-8' }),
    deprecations: async () => ({ generatedAt: '', operations: [] }),
    routes,
    allowedHosts: options.allowedHosts,
  });
  t.teardown(() => admin.close());
  return { url: `http://127.0.0.1:${admin.address().port}`, port: admin.address().port };
}

t.test('wrong admin tokens: locked per address after maxFailures, 429 even for the right token, logged once a window, counted', async (t) => {
  const clock = manualWallClock();
  const lines: Array<{ fields: Record<string, unknown>; message: string }> = [];
  const guard = new AdminAuthGuard({ maxFailures: 3, windowSeconds: 60, now: clock.now, log: { warn: (fields, message) => void lines.push({ fields, message }) } });
  const token = strongToken();
  const { url } = await listener(t, { tokens: new AdminTokens([{ name: 'ADMIN#1', token }]), guard });
  const keys = (auth?: string) => request(`${url}/keys`, { headers: auth === undefined ? {} : { authorization: auth } });
  const guess = (i: number) => keys(`Bearer ${strongToken()}${i}`);

  // A missing header guesses nothing: counted, never charged.
  for (let i = 0; i < 5; i++) assertError(t, await keys(), 401, 'missing_api_key', { message: 'any' });
  for (let i = 0; i < 2; i++) assertError(t, await guess(i), 401, 'invalid_api_key', { message: 'The admin token is not valid.' });
  // The right token still works below the limit; the registry is absent, so it gets past auth to a 404.
  assertError(t, await keys(`Bearer ${token}`), 404, 'not_found', { message: /No key registry/ });
  assertError(t, await guess(2), 401, 'invalid_api_key', { message: 'any' });
  // Three failures: locked, the right token included, until one failure is earned back (60 s / 3).
  assertError(t, await keys(`Bearer ${token}`), 429, 'too_many_auth_failures', { headers: { 'retry-after': '20' } });
  assertError(t, await keys(), 429, 'too_many_auth_failures', { message: 'any' });
  assertError(t, await guess(3), 429, 'too_many_auth_failures', { message: 'any' });
  // Probes and scrapes from the locked address are still answered.
  t.equal((await request(`${url}/healthz`)).status, 200);
  const scrape = parseExposition((await request(`${url}/metrics`)).body);
  t.equal(value(scrape, 'petstore_gateway_up'), 1, 'the process metrics are there');
  t.equal(value(scrape, ADMIN_AUTH_FAILURES_METRIC, { reason: 'missing' }), 5);
  t.equal(value(scrape, ADMIN_AUTH_FAILURES_METRIC, { reason: 'invalid' }), 3);
  t.equal(value(scrape, ADMIN_AUTH_FAILURES_METRIC, { reason: 'locked' }), 3);
  t.strictSame(
    lines.map((l) => [l.message, l.fields.client, l.fields.failures ?? l.fields.retryAfterSeconds]),
    [
      ['failed admin authentication', '127.0.0.1', 1],
      ['admin API locked for an address: too many failed admin authentications', '127.0.0.1', 20],
    ],
    'one failure line for the window and one lock line',
  );
  t.notOk(JSON.stringify(lines).includes(token), 'the token never');

  // The lock drains as GCRA earns failures back: one every 20 s here.
  clock.advance(19_999);
  assertError(t, await keys(`Bearer ${token}`), 429, 'too_many_auth_failures', { headers: { 'retry-after': '1' } });
  clock.advance(1);
  assertError(t, await keys(`Bearer ${token}`), 404, 'not_found', { message: /No key registry/ });
  // One more guess locks again (a refused request was never charged); within the window, no new failure line.
  assertError(t, await guess(5), 401, 'invalid_api_key', { message: 'any' });
  assertError(t, await keys(`Bearer ${token}`), 429, 'too_many_auth_failures', { message: 'any' });
  t.equal(lines.filter((l) => l.message === 'failed admin authentication').length, 1, 'still one failure line in this window');
  t.equal(lines.filter((l) => l.message.startsWith('admin API locked')).length, 2, 'a new lock, a new lock line');
  // A window later, the next failure is logged with the count since the last line.
  clock.advance(120_000);
  assertError(t, await guess(6), 401, 'invalid_api_key', { message: 'any' });
  t.match(lines.at(-1), { message: 'failed admin authentication', fields: { client: '127.0.0.1', failures: 4 } }, 'the failures since the last line');
});

t.test('an IPv6 /64 is one client; other addresses are not locked', async (t) => {
  const clock = manualWallClock();
  const guard = new AdminAuthGuard({ maxFailures: 2, windowSeconds: 60, now: clock.now });
  guard.failed(AdminAuthGuard.keyOf('2001:db8:1:2::a'), 'invalid');
  guard.failed(AdminAuthGuard.keyOf('2001:db8:1:2:ffff::b'), 'invalid');
  t.ok(guard.lockedFor(AdminAuthGuard.keyOf('2001:db8:1:2::c')) > 0, 'the whole /64 is locked');
  t.equal(guard.lockedFor(AdminAuthGuard.keyOf('2001:db8:1:3::a')), 0, 'another /64 is not');
  t.equal(guard.lockedFor(AdminAuthGuard.keyOf('::ffff:192.0.2.1')), 0);
  guard.failed(AdminAuthGuard.keyOf('::ffff:192.0.2.1'), 'invalid');
  guard.failed(AdminAuthGuard.keyOf('192.0.2.1'), 'invalid');
  t.ok(guard.lockedFor('192.0.2.1') > 0, 'an IPv4-mapped address is its IPv4 address');
});

t.test('the admin listener refuses a Host that names none of its addresses, in the Error shape', async (t) => {
  const token = strongToken();
  const { url, port } = await listener(t, { tokens: new AdminTokens([{ name: 'A#1', token }]), allowedHosts: ['gateway-1.internal'] });
  for (const path of ['/healthz', '/readyz', '/metrics', '/deprecations', '/keys', '/nope']) {
    const r = await request(`${url}${path}`, { headers: { host: `rebind.attacker.example:${port}`, authorization: `Bearer ${token}` } });
    assertError(t, r, 400, 'invalid_request', { message: /Host header names no address of this admin listener/ });
    t.equal(r.headers['cache-control'], 'no-store');
  }
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'gateway-1.internal:9464', '127.0.0.1']) {
    t.equal((await request(`${url}/healthz`, { headers: { host } })).status, 200, `Host ${host}`);
  }
  // HTTP/1.0 without Host: no browser sends that, so it cannot be rebinding.
  const raw = parseRawResponse(await rawExchange(port, 'GET /healthz HTTP/1.0\r\n\r\n'));
  t.equal(raw.status, 200, 'HTTP/1.0 without Host');
  const bad = parseRawResponse(await rawExchange(port, 'GET /metrics HTTP/1.0\r\nHost: evil.example\r\n\r\n'));
  t.equal(bad.status, 400, 'HTTP/1.0 with a foreign Host');
  // Two Host fields (RFC 9112 section 3.2): node keeps the first only, so a good first one must not
  // let a second pass, in either order, whatever the case of the names.
  for (const hosts of ['Host: 127.0.0.1\r\nhost: evil.example', 'HOST: evil.example\r\nHost: 127.0.0.1', 'Host: 127.0.0.1\r\nHost: 127.0.0.1']) {
    const two = parseRawResponse(await rawExchange(port, `GET /healthz HTTP/1.1\r\n${hosts}\r\nConnection: close\r\n\r\n`));
    t.equal(two.status, 400, `two Host fields: ${hosts.replace('\r\n', ', ')}`);
    t.match(JSON.parse(two.body), { code: 'invalid_request', status: 400, message: /more than one Host header/ });
  }
});

t.test('serve warns once when admin tokens put /keys on a listener other machines may reach', async (t) => {
  const warned = (host: string, tokens: string | undefined, tls?: object) => {
    const loaded = parsePolicy(JSON.stringify({ upstream: { url: 'builtin' }, server: { admin: { host, port: 0, ...(tls === undefined ? {} : { tls }) } } }), { env: {} });
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    const lines: string[] = [];
    const log = { info: () => undefined, warn: (_f: unknown, m: string) => void lines.push(m), error: () => undefined } as unknown as Logger;
    adminKeyRoutes(loaded.config, tokens === undefined ? {} : { PETSTORE_ADMIN_TOKENS: tokens }, log);
    return lines.filter((m) => m.startsWith('the key admin API (/keys) is on an admin listener other machines may reach')).length;
  };
  t.equal(warned('0.0.0.0', strongToken()), 1);
  t.equal(warned('10.0.0.5', strongToken()), 1);
  t.equal(warned('127.0.0.1', strongToken()), 0, 'loopback: no warning');
  t.equal(warned('localhost', strongToken()), 0);
  t.equal(warned('0.0.0.0', undefined), 0, 'no token: no key API, no warning');
  t.equal(warned('0.0.0.0', strongToken(), { certFile: 'c.pem', keyFile: 'k.pem' }), 0, 'with TLS: no warning');
});
