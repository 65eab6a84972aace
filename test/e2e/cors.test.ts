// CORS (policies.cors) through a real listening gateway on every engine: a preflight from an
// allowed origin is answered 204 before authentication and never reaches the upstream; every
// answer to an allowed origin, errors included, carries the CORS fields; another origin gets none;
// without the section OPTIONS behaves as before. (A real browser: cors-browser.test.ts.)
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import tap from 'tap';
import { assertError } from '../helpers/assert.js';
import { bearer, forEachEngine, PROJECT_ROOT, request, startGateway, testKey, nodeCommand } from '../helpers/servers.js';
import type { TapTest } from '../helpers/assert.js';

const APP = 'https://app.example.com';
const EXPOSED = 'X-Request-Id, RateLimit, RateLimit-Policy, Deprecation, Sunset, Link, Retry-After, Cache-Status, Age';

async function slowUpstream(t: TapTest): Promise<{ url: string; calls: () => Promise<Record<string, number>> }> {
  const child = spawn(...nodeCommand([join(PROJECT_ROOT, 'test', 'fixtures', 'slow-upstream.mjs')]), { env: { PATH: process.env.PATH, DELAY_MS: '1' }, stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  });
  const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
  const url = /listening on (\S+)/.exec(chunk.toString())![1]!;
  return { url, calls: async () => (await request(`${url.replace(/\/v1$/, '')}/__calls`)).json as Record<string, number> };
}

function preflight(origin: string, method = 'GET'): Record<string, string> {
  return { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization' };
}

forEachEngine(tap, async (t, engine) => {
  t.test('an allowed origin: preflight answered locally, every answer carries the CORS fields', async (t) => {
    const up = await slowUpstream(t);
    // Its own key id per engine: the rate limit's memory store is one per process.
    const keysFromEnv = `CORS_KEYS_${engine.replace(/\W/g, '_').toUpperCase()}`;
    const key = testKey();
    const policy = { upstream: { url: up.url }, policies: { auth: { keysFromEnv }, cors: { origins: [APP] }, 'rate-limit': { limit: 3, windowSeconds: 3600 } } };
    const gw = await startGateway(t, policy, { engine, key, env: { [keysFromEnv]: key } });
    const pre = await request(`${gw.url}/v1/pets`, { method: 'OPTIONS', headers: preflight(APP) });
    t.equal(pre.status, 204, 'the preflight is answered without a key');
    t.equal(pre.headers['access-control-allow-origin'], APP);
    t.equal(pre.headers['access-control-allow-methods'], 'GET, POST');
    t.match(pre.headers['access-control-allow-headers'], /\bAuthorization\b/);
    t.equal(pre.headers['access-control-max-age'], '600');
    t.match(pre.headers.vary, /^Origin\b/);
    t.equal(pre.headers['content-length'], undefined, 'no Content-Length in a 204');
    t.equal(pre.raw.length, 0);
    t.match(pre.headers['x-request-id'], /\S/);
    t.notOk(Object.keys(await up.calls()).some((k) => k.startsWith('OPTIONS')), 'the preflight never reached the upstream');

    const ok = await request(`${gw.url}/v1/pets/42`, { headers: bearer(gw.key, { origin: APP }) });
    t.equal(ok.status, 200);
    t.equal(ok.headers['access-control-allow-origin'], APP, "the gateway's field, not the upstream's *");
    t.equal(ok.headers['access-control-expose-headers'], EXPOSED);
    t.equal(ok.headers.vary, 'Origin');

    const denied = await request(`${gw.url}/v1/pets`, { headers: { origin: APP } });
    assertError(t, denied, 401, 'missing_api_key', { headers: { 'access-control-allow-origin': APP, 'access-control-expose-headers': EXPOSED } });
    const bad = await request(`${gw.url}/v1/pets?limit=0`, { headers: bearer(gw.key, { origin: APP }) });
    assertError(t, bad, 400, 'invalid_query', { message: 'any', headers: { 'access-control-allow-origin': APP } });
    let limited = await request(`${gw.url}/v1/pets/42`, { headers: bearer(gw.key, { origin: APP }) });
    for (let i = 0; i < 5 && limited.status !== 429; i++) limited = await request(`${gw.url}/v1/pets/42`, { headers: bearer(gw.key, { origin: APP }) });
    assertError(t, limited, 429, 'rate_limited', { message: 'any', headers: { 'access-control-allow-origin': APP } });
  });

  t.test('another origin gets no CORS field; a 502 to an allowed one does', async (t) => {
    // Nothing listens on port 9 of the loopback (discard, not served): the upstream is refused.
    const gw = await startGateway(t, { upstream: { url: 'http://127.0.0.1:9/v1' }, policies: { cors: { origins: [APP] } } }, { engine });
    const pre = await request(`${gw.url}/v1/pets`, { method: 'OPTIONS', headers: preflight('https://evil.example') });
    assertError(t, pre, 401, 'missing_api_key', { absent: ['access-control-allow-origin', 'access-control-allow-methods'] });
    t.equal(pre.headers.vary, 'Origin');
    const other = await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key, { origin: 'https://evil.example' }) });
    t.equal(other.headers['access-control-allow-origin'], undefined);
    t.equal(other.headers['access-control-expose-headers'], undefined);
    const down = await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key, { origin: APP }) });
    assertError(t, down, 502, 'upstream_unavailable', { message: 'any', headers: { 'access-control-allow-origin': APP } });
  });

  t.test("Origin joins the upstream's Vary, on a miss and on a hit; Vary: * stays *", async (t) => {
    const up = await slowUpstream(t);
    const gw = await startGateway(t, { upstream: { url: up.url }, policies: { cors: { origins: [APP] }, cache: { ttlSeconds: { getPet: 60 } } } }, { engine });
    const h = bearer(gw.key, { origin: APP });
    const miss = await request(`${gw.url}/v1/pets/11`, { headers: h });
    t.equal(miss.status, 200);
    t.match(miss.headers['cache-status'], /fwd=uri-miss; fwd-status=200; stored/, 'Vary: Accept-Encoding is stored (never forwarded, so never varies)');
    t.equal(miss.headers.vary, 'accept-encoding, Origin', "the upstream's list, then Origin");
    const hit = await request(`${gw.url}/v1/pets/11`, { headers: h });
    t.match(hit.headers['cache-status'], /; hit;/);
    t.equal(hit.headers.vary, 'accept-encoding, Origin', 'the same on a hit');
    const star = await request(`${gw.url}/v1/pets/12`, { headers: h });
    t.equal(star.status, 200);
    t.equal(star.headers.vary, '*', 'Vary: * absorbs Origin');
    t.notMatch(String(star.headers['cache-status']), /stored/, 'Vary: * is not stored');
    const plain = await request(`${gw.url}/v1/pets/42`, { headers: h });
    t.equal(plain.headers.vary, 'Origin', 'no upstream Vary: Origin alone');
    t.equal((await up.calls())['GET /v1/pets/11'], 1);
  });

  t.test('no cors section: OPTIONS as before (401, 405 with a key), no CORS field', async (t) => {
    const gw = await startGateway(t, {}, { engine });
    const pre = await request(`${gw.url}/v1/pets`, { method: 'OPTIONS', headers: preflight(APP) });
    assertError(t, pre, 401, 'missing_api_key', { absent: ['access-control-allow-origin', 'vary'] });
    const keyed = await request(`${gw.url}/v1/pets`, { method: 'OPTIONS', headers: bearer(gw.key, preflight(APP)) });
    assertError(t, keyed, 405, 'method_not_allowed', { headers: { allow: 'GET, POST' }, absent: ['access-control-allow-origin'] });
  });
});


