/**
 * Abuse resistance at the edge (issue 25, items 3, 6, 7, 10, 12), end to end on every engine,
 * through real listening servers on 127.0.0.1.
 */
import t from 'tap';
import { assertError } from '../helpers/assert.js';
import { bearer, forEachEngine, request, sendJson, startGateway, startStubUpstream, testKey } from '../helpers/servers.js';



// ---------------------------------------------------------------------------------------------
// Item 3: the brute-force lock keys on the real client

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
// Item 6: the response contract is on by default

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
