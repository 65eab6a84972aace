/**
 * Abuse resistance at the edge (issue 25, items 3, 6, 7, 10, 12), end to end on every engine,
 * through real listening servers on 127.0.0.1.
 */
import t from 'tap';
import { assertError } from '../helpers/assert.js';
import { bearer, forEachEngine, request, sendJson, startGateway, startStubUpstream, testKey } from '../helpers/servers.js';

const PET = '{"id":1,"name":"Rex","categoryId":1,"status":"available"}';

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
