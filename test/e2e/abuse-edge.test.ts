/**
 * Abuse resistance at the edge, end to end on every engine,
 * through real listening servers on 127.0.0.1.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { KNOWN_STATUSES, GatewayMetrics } from '../../src/ops/metrics.js';
import { assertError } from '../helpers/assert.js';
import { find, parseExposition } from '../helpers/prom.js';
import { bearer, forEachEngine, PROJECT_ROOT, sleep, spawnCliUntil, tempDir, waitFor, rawExchange, parseRawResponse, request, sendJson, startGateway, startStubUpstream, testKey, type TeardownHost, nodeCommand } from '../helpers/servers.js';

/** test/fixtures/hostile-upstream.mjs as its own process, killed at teardown; its base URL. */
async function startHostile(t: TeardownHost): Promise<string> {
  const child = spawn(...nodeCommand([join(PROJECT_ROOT, 'test', 'fixtures', 'hostile-upstream.mjs')]), { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('hostile upstream did not start within 10 s')), 10_000);
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+\/v1)/.exec(out);
      if (m?.[1] !== undefined) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once('exit', (code) => reject(new Error(`hostile upstream exited (${String(code)})`)));
  });
}



// ---------------------------------------------------------------------------------------------
// The brute-force lock keys on the real client

forEachEngine(t, async (t, engine) => {
  t.test('behind a trusted proxy, one guesser is locked and the proxy\'s other clients are not', async (t) => {
    const stub = await startStubUpstream(t, (_req, res) => sendJson(res, 200, '[]'));
    const gw = await startGateway(
      t,
      { upstream: { url: `${stub.origin}/v1` }, server: { trustedProxies: ['127.0.0.1'] }, policies: { auth: { bruteForce: { maxFailures: 3, windowSeconds: 600 } } } },
      { engine },
    );
    const get = (key: string, client: string) => request(`${gw.url}/v1/pets`, { headers: bearer(key, { 'x-forwarded-for': client }) });
    for (let i = 0; i < 3; i++) t.equal((await get(testKey(), '203.0.113.5')).status, 401);
    assertError(t, await get(gw.key, '203.0.113.5'), 429, 'too_many_auth_failures');
    t.equal((await get(gw.key, '203.0.113.6')).status, 200, 'another client behind the same proxy');
    t.equal((await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key) })).status, 200, 'the proxy itself');
    // An IPv6 guesser rotating inside its /64.
    for (let i = 1; i <= 3; i++) t.equal((await get(testKey(), `2001:db8:7:7::${i}`)).status, 401);
    assertError(t, await get(gw.key, '2001:db8:7:7:ffff::1'), 429, 'too_many_auth_failures');
    t.equal((await get(gw.key, '2001:db8:7:8::1')).status, 200, 'the next /64');
  });
});

// ---------------------------------------------------------------------------------------------
// The response contract is on by default

forEachEngine(t, async (t, engine) => {
  t.test('default policy: HTML, truncated JSON and internal fields never reach a client', async (t) => {
    const stub = await startStubUpstream(t, (req, res) => {
      if (req.url === '/v1/pets/1') return sendJson(res, 200, '{"id":1,"name":"Rex","categoryId":9223372036854775807,"status":"available","internalNote":"owes rent"}');
      if (req.url === '/v1/pets/2') {
        res.writeHead(200, { 'content-type': 'text/html' });
        return void res.end('<html>maintenance</html>');
      }
      if (req.url === '/v1/pets/3') return sendJson(res, 200, '{"id":3,"name":"Re');
      if (req.method === 'POST') return sendJson(res, 201, '{"id":4,"name":"Kit","categoryId":1,"_rev":"7-a"}');
      return sendJson(res, 200, '[{"id":5,"name":"Tom","categoryId":2,"owner":"x"},{"id":6,"name":"Ann","categoryId":3}]');
    });
    const gw = await startGateway(t, { upstream: { url: `${stub.origin}/v1` } }, { engine });
    const get = (path: string) => request(gw.url + path, { headers: bearer(gw.key) });
    const one = await get('/v1/pets/1');
    t.equal(one.status, 200);
    t.equal(one.body, '{"id":1,"name":"Rex","categoryId":9223372036854775807,"status":"available"}', 'unknown field dropped, int64 exact');
    t.equal(one.headers['content-length'], String(one.raw.length), 'framed for the new body');
    assertError(t, await get('/v1/pets/2'), 502, 'upstream_contract_violation');
    assertError(t, await get('/v1/pets/3'), 502, 'upstream_contract_violation');
    const list = await get('/v1/pets');
    t.equal(list.body, '[{"id":5,"name":"Tom","categoryId":2},{"id":6,"name":"Ann","categoryId":3}]');
    const created = await request(`${gw.url}/v1/pets`, { method: 'POST', headers: bearer(gw.key, { 'content-type': 'application/json' }), body: '{"name":"Kit","categoryId":1}' });
    t.equal(created.status, 201);
    t.equal(created.body, '{"id":4,"name":"Kit","categoryId":1}');
  });

  t.test('unknownFields: refuse makes an internal field a 502', async (t) => {
    const stub = await startStubUpstream(t, (_req, res) => sendJson(res, 200, '{"id":1,"name":"Rex","categoryId":1,"internalNote":"x"}'));
    const gw = await startGateway(t, { upstream: { url: `${stub.origin}/v1` }, policies: { 'response-contract': { unknownFields: 'refuse' } } }, { engine });
    assertError(t, await request(`${gw.url}/v1/pets/1`, { headers: bearer(gw.key) }), 502, 'upstream_contract_violation');
  });
});

// ---------------------------------------------------------------------------------------------
// An upstream cannot grow /metrics by varying its statuses

forEachEngine(t, async (t, engine) => {
  t.test('1,000 distinct upstream statuses leave /metrics bounded', async (t) => {
    const upstream = await startHostile(t);
    const metrics = new GatewayMetrics({ defaultMetrics: false });
    const gw = await startGateway(t, { upstream: { url: upstream } }, { engine, observer: metrics });
    const ids = Array.from({ length: 1000 }, (_, i) => 200 + i);
    const seen = new Set<number>();
    // Eight at a time: bounded in count (1,000) and each request in time (5 s).
    for (let i = 0; i < ids.length; i += 8) {
      const batch = await Promise.all(ids.slice(i, i + 8).map((id) => request(`${gw.url}/v1/pets/${id}`, { headers: bearer(gw.key) })));
      for (const r of batch) seen.add(r.status);
    }
    t.ok(seen.size > 5, `the client saw ${seen.size} statuses`);
    const text = await metrics.registry.metrics();
    const s = parseExposition(text);
    const client = new Set(find(s, 'http_client_request_duration_seconds_count').map((x) => String(x.labels.http_response_status_code ?? x.labels.error_type)));
    const server = new Set(find(s, 'http_server_request_duration_seconds_count').map((x) => String(x.labels.http_response_status_code ?? x.labels.error_type)));
    t.ok(client.has('4xx') && client.has('5xx') && client.has('2xx'), `statuses folded into classes: ${[...client].sort().join(' ')}`);
    for (const v of [...client, ...server]) t.ok(/^[1-5]xx$/.test(v) || KNOWN_STATUSES.has(Number(v)) || v === '_OTHER' || v === 'aborted' || !/^\d+$/.test(v), `label ${v} is a known value or a class`);
    const lines = text.split('\n').length;
    // Before the fold: about 400 upstream statuses x 17 lines of histogram each (~7,000 lines).
    t.ok(lines < 2000, `/metrics has ${lines} lines`);
  });
});

// ---------------------------------------------------------------------------------------------
// Headers

forEachEngine(t, async (t, engine) => {
  t.test('hostile upstream headers: authenticated answers never invite a shared cache; no uninvited coding', async (t) => {
    const upstream = await startHostile(t);
    const gw = await startGateway(t, { upstream: { url: upstream } }, { engine });
    const get = (id: number, extra: Record<string, string> = {}) => request(`${gw.url}/v1/pets/${id}`, { headers: bearer(gw.key, extra) });
    const pub = await get(5000001);
    t.equal(pub.status, 200);
    t.equal(pub.headers['cache-control'], 'private, max-age=31536000');
    const smax = await get(5000002);
    t.equal(smax.status, 200, 'Connection naming content-type did not strip it before the contract check');
    t.equal(smax.headers['content-type'], 'application/json');
    t.equal(smax.headers['cache-control'], 'private, max-age=60, must-revalidate');
    assertError(t, await get(5000003), 502, 'upstream_contract_violation');
    assertError(t, await get(5000003, { 'accept-encoding': 'gzip' }), 502, 'upstream_contract_violation', { message: 'any' });
  });

  t.test('a gzip answer streams to a client that accepted gzip only with the contract off', async (t) => {
    const upstream = await startHostile(t);
    const gw = await startGateway(t, { upstream: { url: upstream }, policies: { 'response-contract': { mode: 'off' } } }, { engine });
    const accepted = await request(`${gw.url}/v1/pets/5000003`, { headers: bearer(gw.key, { 'accept-encoding': 'br, gzip' }) });
    t.equal(accepted.status, 200);
    t.equal(accepted.headers['content-encoding'], 'gzip');
    assertError(t, await request(`${gw.url}/v1/pets/5000003`, { headers: bearer(gw.key) }), 502, 'upstream_contract_violation');
  });

  t.test('request side: Host syntax, Connection cannot strip Content-Type, sampling only from a trusted proxy', async (t) => {
    const stub = await startStubUpstream(t, (req, res) => sendJson(res, req.method === 'POST' ? 201 : 200, req.method === 'POST' ? '{"id":1,"name":"a","categoryId":1}' : '[]'));
    const gw = await startGateway(t, { upstream: { url: `${stub.origin}/v1` } }, { engine });
    const port = Number(new URL(gw.url).port);
    const bad = parseRawResponse(await rawExchange(port, `GET /v1/pets HTTP/1.1\r\nHost: evil.example/x<y>\r\nAuthorization: Bearer ${gw.key}\r\nConnection: close\r\n\r\n`));
    t.equal(bad.status, 400, 'an invalid Host is a 400');
    t.match(bad.body, /"status":400/);
    t.equal(stub.requests.length, 0, 'nothing forwarded');
    const body = '{"name":"a","categoryId":1}';
    const created = await request(`${gw.url}/v1/pets`, {
      method: 'POST',
      headers: bearer(gw.key, { 'content-type': 'application/json', connection: 'content-type' }),
      body,
    });
    t.equal(created.status, 201);
    t.equal(stub.requests.at(-1)?.headers['content-type'], 'application/json', 'the checked Content-Type reached the upstream');
    const sampled = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key, { traceparent: sampled }) });
    t.equal(stub.requests.at(-1)?.headers.traceparent, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00', 'an untrusted client cannot force sampling');
  });
});

// ---------------------------------------------------------------------------------------------
// A connection on which the upstream misbehaved is never reused

forEachEngine(t, async (t, engine) => {
  t.test('an extra answer or an unsolicited 100 Continue: the connection is discarded, engines agree', async (t) => {
    const upstream = await startHostile(t);
    // One upstream connection: any reuse of a poisoned connection would be the next request's.
    const gw = await startGateway(t, { upstream: { url: upstream, connections: 1 } }, { engine });
    const get = (id: number) => request(`${gw.url}/v1/pets/${id}`, { headers: bearer(gw.key) });
    const connections = async () => (JSON.parse((await get(9000000)).body) as { id: number }).id;
    const first = await connections();
    t.equal((await get(7000003)).status, 200, 'the first answer is the one asked for');
    // The extra answer lands 50 ms later on a connection the client holds idle.
    await sleep(150);
    const after = await get(1);
    t.equal(after.body, '{"id":1,"name":"Rex","categoryId":1,"status":"available"}', 'the next consumer gets its own answer, not the extra one');
    const second = await connections();
    t.ok(second > first, `the poisoned connection was not reused (${first} then ${second} connections)`);
    assertError(t, await get(7000002), 502, 'bad_gateway');
    const third = await connections();
    t.ok(third > second, `the connection with the unsolicited 100 was not reused (${second} then ${third})`);
    t.equal((await get(3)).status, 200, 'the next request is served');
    const hinted = await get(7000004);
    t.equal(hinted.status, 200, 'a 103 Early Hints is skipped, the final answer relayed');
    t.equal(hinted.body, '{"id":7000004,"name":"Rex","categoryId":1,"status":"available"}');
  });
});

// ---------------------------------------------------------------------------------------------
// The reload warning of `serve` and throttled warnings, in the built CLI

// parity: the reload path and the logger's options are the CLI's, the same for every engine.
t.test('serve: a reload that removes the rate limit and turns the contract off is one warning naming both', async (t) => {
  const file = join(tempDir(t, 'abuse-edge'), 'policy.json');
  const policy = (extra: Record<string, unknown>) =>
    JSON.stringify({ version: 1, upstream: { url: 'builtin' }, policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' }, ...extra } });
  writeFileSync(file, policy({ 'rate-limit': { limit: 100 } }));
  const { handle } = await spawnCliUntil(t, ['serve', '--policy', file, '--host', '127.0.0.1', '--port', '0'], /petstore-gateway listening on /, {
    env: { PETSTORE_API_KEYS: testKey(), LOG_LEVEL: 'info' },
    timeoutMs: 30_000,
  });
  writeFileSync(file, policy({ 'response-contract': { mode: 'off' } }));
  handle.child.kill('SIGHUP');
  const line = await waitFor('the reload warning', () => handle.output().stdout.split('\n').find((l) => l.includes('policy reload weakens security')), 10_000);
  const entry = JSON.parse(line) as { level: number; weakened: string[] };
  t.equal(entry.level, 40);
  t.strictSame(entry.weakened, ['rate-limit: limit removed', 'response-contract.mode enforce -> off']);
});

// parity: the per-address share is counted by the listening server that createNodeServer makes for every engine, at accept, before any engine sees a byte
t.test('the per-address share scales with maxConnections: with 20, one address holds 5', async (t) => {
  const { connect } = await import('node:net');
  const held = async (port: number, n: number): Promise<number> => {
    const sockets = Array.from({ length: n }, () => connect({ host: '127.0.0.1', port }).on('error', () => undefined));
    t.teardown(() => sockets.forEach((s) => s.destroy()));
    await Promise.all(sockets.map((s) => new Promise((r) => (s.readyState === 'open' ? r(undefined) : s.once('connect', r).once('close', r)))));
    // A refused connection is closed at accept, at once; a held one waits for its head (10 s).
    await sleep(300);
    return sockets.filter((s) => !s.destroyed && !s.readableEnded).length;
  };
  const small = await startGateway(t, { server: { maxConnections: 20 } });
  const portOf = (gw: { url: string }) => Number(new URL(gw.url).port);
  t.equal(await held(portOf(small), 8), 5, 'maxConnections 20, maxConnectionsPerAddress unset: 5 of 8 held, 3 refused');
  const explicit = await startGateway(t, { server: { maxConnections: 20, maxConnectionsPerAddress: 20 } });
  t.equal(await held(portOf(explicit), 8), 8, 'an explicit maxConnectionsPerAddress is honoured');
  const { addressShare } = await import('../../src/fronts/config.js');
  t.equal(addressShare({ maxConnections: 10_000, maxConnectionsPerAddress: null }), 1000, 'the default maxConnections: 1000 a client, as before');
  t.equal(addressShare({ maxConnections: 3, maxConnectionsPerAddress: null }), 1, 'at least 1');
});
