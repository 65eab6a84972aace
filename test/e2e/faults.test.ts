/**
 * Upstream faults, each answered in the Error shape within a bounded time: refused connections,
 * resets, hangs (504 past `upstream.timeouts.headersMs`), broken responses, and no retries:
 * createPet is not idempotent, and a 503 must not start a retry storm.
 */
import t from 'tap';
import { assertError, assertJson, type TapTest } from '../helpers/assert.js';
import { bearer, closedPort, request, sendJson, startGateway, startStubUpstream, type StubHandler, forEachEngine } from '../helpers/servers.js';

forEachEngine(t, async (t, engine) => {

  const JSON_BODY = { 'content-type': 'application/json' };
  const NEW_PET = '{"name":"Rex","categoryId":9223372036854775807}';
  /** headersMs: 300; undici checks its timers about every 0.5 s, so the 504 comes within ~1 s. */
  const TIMEOUTS = { connectMs: 500, headersMs: 300, bodyMs: 300 };
  const BOUND_MS = 2000;

  async function gatewayTo(t: TapTest, handler: StubHandler, policies: Record<string, unknown> = {}) {
    const stub = await startStubUpstream(t, handler);
    const gw = await startGateway(t, { upstream: { url: `${stub.origin}/v1`, timeouts: TIMEOUTS }, policies }, { engine });
    const call = (method: 'GET' | 'POST', path = '/v1/pets') =>
      request(gw.url + path, method === 'POST' ? { method, headers: bearer(gw.key, JSON_BODY), body: NEW_PET } : { headers: bearer(gw.key) });
    return { stub, gw, call };
  }

  async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> {
    const start = performance.now();
    const value = await fn();
    return { value, ms: performance.now() - start };
  }

  t.test('502 when the upstream is down (connection refused)', async (t) => {
    const port = await closedPort();
    const gw = await startGateway(t, { upstream: { url: `http://127.0.0.1:${port}/v1`, timeouts: TIMEOUTS } }, { engine });
    for (const [method, path] of [['GET', '/v1/pets'], ['POST', '/v1/pets'], ['GET', '/v1/pets/1']] as const) {
      const { value: res, ms } = await timed(() =>
        request(gw.url + path, method === 'POST' ? { method, headers: bearer(gw.key, JSON_BODY), body: NEW_PET } : { headers: bearer(gw.key) }),
      );
      t.test(`${method} ${path}`, async (t) => {
        assertError(t, res, 502, 'upstream_unavailable');
        t.ok(ms < BOUND_MS, `answered in ${Math.round(ms)} ms`);
      });
    }
    t.test('authentication still comes first', async (t) => {
      assertError(t, await request(`${gw.url}/v1/pets`), 401, 'missing_api_key');
    });
  });

  t.test('502 when the upstream resets the connection; createPet is not retried', async (t) => {
    const { stub, call } = await gatewayTo(t, (_req, _res, raw) => raw.socket.destroy());
    const post = await call('POST');
    assertError(t, post, 502, 'upstream_unavailable');
    t.equal(stub.requests.length, 1, 'createPet reached the upstream exactly once');
    const get = await call('GET');
    assertError(t, get, 502, 'upstream_unavailable');
    t.equal(stub.requests.length, 2, 'listPets was not retried either');
  });

  t.test('502 when the upstream closes without answering', async (t) => {
    const { stub, call } = await gatewayTo(t, (_req, _res, raw) => raw.socket.end());
    assertError(t, await call('POST'), 502, 'upstream_unavailable');
    t.equal(stub.requests.length, 1, 'exactly one upstream request');
  });

  t.test('504 when the upstream hangs (headersMs: 300)', async (t) => {
    // The handler never answers; the stub destroys the sockets at teardown.
    const { stub, call } = await gatewayTo(t, () => undefined);
    t.test('createPet: 504 within a bounded time, not retried', async (t) => {
      const { value: res, ms } = await timed(() => call('POST'));
      assertError(t, res, 504, 'upstream_timeout');
      t.ok(ms >= 250, `not before the timeout (${Math.round(ms)} ms)`);
      t.ok(ms < BOUND_MS, `within ${BOUND_MS} ms (${Math.round(ms)} ms)`);
      t.equal(stub.requests.length, 1, 'createPet reached the upstream exactly once');
    });
    t.test('getPet: 504 with the Error shape and the deprecation headers', async (t) => {
      const before = stub.requests.length;
      const { value: res, ms } = await timed(() => call('GET', '/v1/pets/1'));
      assertError(t, res, 504, 'upstream_timeout');
      t.ok('deprecation' in res.headers, 'getPet errors still say it is deprecated');
      t.ok(ms < BOUND_MS, `within ${BOUND_MS} ms (${Math.round(ms)} ms)`);
      t.equal(stub.requests.length, before + 1, 'one upstream request');
    });
  });

  t.test('slow headers within the timeout are fine', async (t) => {
    const { stub, call } = await gatewayTo(t, (_req, res) => {
      setTimeout(() => sendJson(res, 201, '{"id":1,"name":"Rex","categoryId":9223372036854775807}'), 100);
    });
    const res = await call('POST');
    t.equal(assertJson(t, res, 201), '{"id":1,"name":"Rex","categoryId":9223372036854775807}');
    t.equal(stub.requests.length, 1);
  });

  t.test('a 503 from the upstream is not retried and reaches the client', async (t) => {
    t.test('an Error-shaped 503 passes as it is, with Retry-After', async (t) => {
      const body = { code: 'maintenance', message: 'The store is closed for maintenance.', status: 503 };
      const { stub, call } = await gatewayTo(t, (_req, res) => sendJson(res, 503, body, { 'retry-after': '5' }));
      const { value: res, ms } = await timed(() => call('GET'));
      assertError(t, res, 503, 'maintenance', { message: body.message, headers: { 'retry-after': '5' } });
      t.equal(stub.requests.length, 1, 'GET was sent exactly once');
      t.ok(ms < BOUND_MS, `no retry delay (${Math.round(ms)} ms; a retry would wait Retry-After: 5 s)`);
      const post = await call('POST');
      assertError(t, post, 503, 'maintenance', { message: body.message });
      t.equal(stub.requests.length, 2, 'createPet was sent exactly once');
    });
    t.test('any other 503 body becomes the Error shape', async (t) => {
      const { stub, call } = await gatewayTo(t, (_req, res) => {
        res.writeHead(503, { 'content-type': 'text/html' });
        res.end('<html><body><h1>503 Service Unavailable</h1></body></html>');
      });
      const res = await call('GET');
      assertError(t, res, 503, 'service_unavailable');
      t.equal(stub.requests.length, 1, 'GET was sent exactly once');
    });
  });

  t.test('a response that is not HTTP: 502', async (t) => {
    const { stub, call } = await gatewayTo(t, (_req, _res, raw) => raw.socket.end('HELLO WORLD\r\n\r\n'));
    const res = await call('GET');
    t.equal(res.status, 502);
    t.equal(res.headers['content-type'], 'application/json; charset=utf-8');
    const body = res.json as { code?: string; message?: string; status?: number };
    t.strictSame(Object.keys(body).sort(), ['code', 'message', 'status'], 'the Error shape');
    t.equal(body.status, 502);
    t.equal(stub.requests.length, 1);
    // The upstream was reached and answered garbage: the catalogue's code for that is bad_gateway
    // ("sent an invalid response"), not upstream_unavailable ("could not be reached").
    t.equal(body.code, 'bad_gateway', 'the code names an invalid response');
  });

  t.test('an upstream body cut short', async (t) => {
    const cut: StubHandler = (_req, res, raw) => {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': '200' });
      res.write('[{"id":1,"name":"Rex"');
      setTimeout(() => raw.socket.destroy(), 50);
    };
    t.test('a buffered answer (listPets): 502 in the Error shape', async (t) => {
      const { call } = await gatewayTo(t, cut);
      assertError(t, await call('GET'), 502, 'upstream_unavailable');
    });
    t.test('a streamed answer (getPet): the client never gets a complete response', async (t) => {
      // getPet streams only with the response contract off (on by default, it buffers the body).
      const { call } = await gatewayTo(t, cut, { 'response-contract': { mode: 'off' } });
      const outcome = await call('GET', '/v1/pets/1').then(
        (res) => `complete ${res.status} with ${res.raw.length} bytes`,
        (err: NodeJS.ErrnoException) => `failed: ${err.code ?? err.message}`,
      );
      t.match(outcome, /^failed: /, `the connection is cut (${outcome})`);
    });
    t.test('a stalled list body: 504 past bodyMs', async (t) => {
      const { call } = await gatewayTo(t, (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': '200' });
        res.write('[{"id":1');
      });
      const { value: res, ms } = await timed(() => call('GET'));
      assertError(t, res, 504, 'upstream_timeout');
      t.ok(ms < BOUND_MS, `within ${BOUND_MS} ms (${Math.round(ms)} ms)`);
    });
  });
});
