/**
 * The gateway in front of a URL upstream: the core flow against the reference backend running as a
 * separate process (the built CLI), and what exactly crosses the gateway, recorded by an in-process
 * stub upstream: body bytes, query, Authorization, and which response headers reach the client.
 */
import t from 'tap';
import type { ServerResponse } from 'node:http';
import { assertError, assertJson, type TapTest } from '../helpers/assert.js';
import {
  bearer,
  JSON_TYPE,
  request,
  sendJson,
  startBackendProcess,
  startGateway,
  startStubUpstream,
  testKey,
  type RecordedRequest,
  type StubUpstream,
  forEachEngine,
} from '../helpers/servers.js';

forEachEngine(t, async (t, engine) => {

  const MAX_INT64 = '9223372036854775807';
  const JSON_BODY = { 'content-type': 'application/json' };
  const GET_PET_DEPRECATION = { deprecation: /^@\d+$/, sunset: 'Thu, 05 Dec 2030 00:00:00 GMT', link: '</v1/pets>; rel="successor-version"' };

  t.test('the core flow through the gateway to the reference backend process', async (t) => {
    const backend = await startBackendProcess(t);
    t.match(backend.url, /^http:\/\/127\.0\.0\.1:\d+\/v1$/, 'the backend printed its /v1 URL');
    const gw = await startGateway(t, { upstream: { url: backend.url } }, { engine });
    const pets = `${gw.url}/v1/pets`;

    const empty = await request(pets, { headers: bearer(gw.key) });
    t.equal(assertJson(t, empty, 200), '[]');

    const rex = await request(pets, { method: 'POST', headers: bearer(gw.key, JSON_BODY), body: `{"name":"Rex","categoryId":${MAX_INT64},"status":"available"}` });
    const rexBody = assertJson(t, rex, 201);
    const rexId = (rex.json as { id: unknown }).id;
    t.ok(Number.isSafeInteger(rexId), 'the Pet has an integer id');
    t.equal(rexBody, `{"id":${String(rexId)},"name":"Rex","categoryId":${MAX_INT64},"status":"available"}`, 'the exact Pet, int64 byte-exact');

    const kit = await request(pets, { method: 'POST', headers: bearer(gw.key, JSON_BODY), body: '{"name":"Kit","categoryId":2,"status":"sold"}' });
    const kitBody = assertJson(t, kit, 201);

    const all = await request(pets, { headers: bearer(gw.key) });
    t.equal(assertJson(t, all, 200), `[${rexBody},${kitBody}]`, 'listPets: every Pet, byte-exact');
    const sold = await request(`${pets}?status=sold`, { headers: bearer(gw.key) });
    t.equal(assertJson(t, sold, 200), `[${kitBody}]`, 'status filter');
    const first = await request(`${pets}?limit=1`, { headers: bearer(gw.key) });
    t.equal(assertJson(t, first, 200), `[${rexBody}]`, 'limit');

    const one = await request(`${pets}/${String(rexId)}`, { headers: bearer(gw.key) });
    t.equal(assertJson(t, one, 200), rexBody, 'getPet, byte-exact');
    t.match(one.headers, GET_PET_DEPRECATION, 'getPet is marked deprecated');

    const missing = await request(`${pets}/999999`, { headers: bearer(gw.key) });
    assertError(t, missing, 404, 'pet_not_found');
    t.match(missing.headers, GET_PET_DEPRECATION);

    const noKey = await request(pets);
    assertError(t, noKey, 401, 'missing_api_key', { headers: { 'www-authenticate': 'Bearer realm="petstore"' } });
    const invalid = await request(pets, { method: 'POST', headers: bearer(gw.key, JSON_BODY), body: '{"name":"x"}' });
    assertError(t, invalid, 400, 'invalid_body', { message: 'categoryId is required' });
    const wrongMethod = await request(`${pets}/1`, { method: 'DELETE', headers: bearer(gw.key) });
    assertError(t, wrongMethod, 405, 'method_not_allowed', { headers: { allow: 'GET' } });

    // The backend process really holds what the gateway created (it checks no keys itself).
    const direct = await request(`${backend.url}/pets`);
    t.equal(direct.body, `[${rexBody},${kitBody}]`, 'the separate backend stored both animals, and no rejected one');
  });

  /** A stub upstream that answers like the interface and records every request. */
  async function recordingUpstream(t: TapTest, extraHeaders: Record<string, string> = {}): Promise<StubUpstream> {
    return startStubUpstream(t, (req: RecordedRequest, res: ServerResponse) => {
      const path = req.url.split('?')[0]!;
      if (req.method === 'POST' && path.endsWith('/pets')) {
        return sendJson(res, 201, `{"id":7,"name":"Rex","categoryId":${MAX_INT64}}`, extraHeaders);
      }
      if (path.endsWith('/pets')) return sendJson(res, 200, `[{"id":7,"name":"Rex","categoryId":${MAX_INT64}}]`, extraHeaders);
      return sendJson(res, 200, `{"id":7,"name":"Rex","categoryId":${MAX_INT64}}`, extraHeaders);
    });
  }

  t.test('what the upstream receives', async (t) => {
    const stub = await recordingUpstream(t);
    // A base path other than /v1: the gateway rebuilds the upstream path from the operation.
    const gw = await startGateway(t, { upstream: { url: `${stub.origin}/base/v1` } }, { engine });
    const pets = `${gw.url}/v1/pets`;

    t.test('createPet: the exact body bytes, whitespace and int64 included', async (t) => {
      const body = `{ "name" : "Rex",\n  "categoryId": ${MAX_INT64} ,\t"status":"pending" }\n`;
      const before = stub.requests.length;
      const res = await request(pets, { method: 'POST', headers: bearer(gw.key, { 'content-type': 'application/json; charset=utf-8' }), body });
      t.equal(assertJson(t, res, 201), `{"id":7,"name":"Rex","categoryId":${MAX_INT64}}`, 'the upstream Pet, byte-exact');
      t.equal(stub.requests.length, before + 1, 'one upstream request');
      const rec = stub.requests.at(-1)!;
      t.equal(rec.method, 'POST');
      t.equal(rec.url, '/base/v1/pets', 'the path under the upstream base path, no query');
      t.ok(rec.body.equals(Buffer.from(body)), 'the body bytes are identical');
      t.equal(rec.body.toString('utf8'), body);
      t.equal(rec.headers['content-type'], 'application/json; charset=utf-8', 'the content type as sent');
      t.equal(rec.headers['content-length'], String(Buffer.byteLength(body)));
      t.equal(rec.headers.host, new URL(stub.origin).host, 'Host names the upstream');
    });

    t.test('a body with non-ASCII text crosses unchanged', async (t) => {
      const body = '{"name":"Zoë 🐈","categoryId":-9223372036854775808}';
      const res = await request(pets, { method: 'POST', headers: bearer(gw.key, JSON_BODY), body });
      assertJson(t, res, 201);
      t.ok(stub.requests.at(-1)!.body.equals(Buffer.from(body, 'utf8')));
    });

    t.test('listPets: limit and status reach the upstream, normalised', async (t) => {
      const cases: Array<[string, string]> = [
        ['?limit=5&status=sold', '/base/v1/pets?limit=5&status=sold'],
        ['?status=sold&limit=5', '/base/v1/pets?limit=5&status=sold'],
        ['', '/base/v1/pets?limit=20'],
        ['?status=pending', '/base/v1/pets?limit=20&status=pending'],
        ['?limit=3&debug=1&x=%2F..', '/base/v1/pets?limit=3'],
      ];
      for (const [query, upstream] of cases) {
        const res = await request(pets + query, { headers: bearer(gw.key) });
        assertJson(t, res, 200);
        t.equal(stub.requests.at(-1)!.url, upstream, `${query || '(no query)'} -> ${upstream}`);
        t.equal(stub.requests.at(-1)!.method, 'GET');
        t.equal(stub.requests.at(-1)!.body.length, 0, 'no body');
      }
    });

    t.test('getPet: the path segment, rebuilt under the base path', async (t) => {
      const res = await request(`${pets}/${MAX_INT64}`, { headers: bearer(gw.key) });
      assertJson(t, res, 200);
      t.equal(stub.requests.at(-1)!.url, `/base/v1/pets/${MAX_INT64}`);
    });

    t.test('requests the gateway refuses never reach the upstream', async (t) => {
      const before = stub.requests.length;
      const refused = [
        request(pets),
        request(pets, { headers: bearer(testKey()) }),
        request(`${gw.url}/v1/stores`, { headers: bearer(gw.key) }),
        request(pets, { method: 'PUT', headers: bearer(gw.key) }),
        request(pets, { method: 'POST', headers: bearer(gw.key, { 'content-type': 'text/plain' }), body: 'x' }),
        request(pets, { method: 'POST', headers: bearer(gw.key, JSON_BODY), body: '{"name":' }),
        request(pets, { method: 'POST', headers: bearer(gw.key, JSON_BODY), body: '{"name":"a","categoryId":1.5}' }),
        request(`${pets}?limit=0`, { headers: bearer(gw.key) }),
        request(`${pets}/abc`, { headers: bearer(gw.key) }),
      ];
      const statuses = (await Promise.all(refused)).map((r) => r.status);
      t.strictSame(statuses, [401, 401, 404, 405, 415, 400, 400, 400, 404]);
      t.equal(stub.requests.length, before, 'no upstream request');
    });

    // Hop-by-hop request fields describe the client's connection to the gateway (RFC 9110 section
    // 7.6.1); Expect is answered by the gateway's own server; Proxy-Authorization is for the gateway.
    // None is forwarded, and none may break the exchange.
    const hopCases: Array<[string, Record<string, string>, boolean]> = [
      ['Keep-Alive', { 'keep-alive': 'timeout=5' }, true],
      ['Expect: 100-continue', { expect: '100-continue' }, true],
      ['TE', { te: 'trailers' }, false],
      ['Proxy-Authorization', { 'proxy-authorization': 'Basic cHJveHk6c2VjcmV0' }, false],
      ['Upgrade (named in Connection)', { upgrade: 'websocket', connection: 'upgrade' }, false],
    ];
    for (const [name, headers] of hopCases) {
      t.test(`a client ${name} header`, async (t) => {
        const before = stub.requests.length;
        const res = await request(pets, { method: 'POST', headers: bearer(gw.key, { ...JSON_BODY, ...headers }), body: '{"name":"a","categoryId":1}' });
        t.equal(res.status, 201, 'createPet succeeds');
        t.equal(stub.requests.length, before + 1, 'the upstream got the request');
        const rec = stub.requests.length > before ? stub.requests.at(-1)! : undefined;
        for (const field of Object.keys(headers)) {
          if (field === 'connection') continue;
          t.notOk(rec !== undefined && field in rec.headers, `${field} is not forwarded`);
        }
      });
    }

    t.test('the client does not choose the upstream encoding', async (t) => {
      const res = await request(pets, { headers: bearer(gw.key, { 'accept-encoding': 'gzip, br' }) });
      assertJson(t, res, 200);
      t.notOk('accept-encoding' in stub.requests.at(-1)!.headers, 'accept-encoding is not forwarded');
    });
  });

  t.test('Authorization toward the upstream', async (t) => {
    const stub = await recordingUpstream(t);
    const url = `${stub.origin}/v1`;

    t.test('drop (default): the client key is not forwarded', async (t) => {
      const gw = await startGateway(t, { upstream: { url } }, { engine });
      const list = await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key) });
      assertJson(t, list, 200);
      t.notOk('authorization' in stub.requests.at(-1)!.headers, 'listPets: no Authorization');
      const create = await request(`${gw.url}/v1/pets`, { method: 'POST', headers: bearer(gw.key, JSON_BODY), body: '{"name":"a","categoryId":1}' });
      assertJson(t, create, 201);
      t.notOk('authorization' in stub.requests.at(-1)!.headers, 'createPet: no Authorization');
      t.notOk(stub.requests.some((r) => JSON.stringify(r.rawHeaders).includes(gw.key)), 'the key appears in no upstream header');
    });

    t.test('forward: the client header, as sent', async (t) => {
      const gw = await startGateway(t, { upstream: { url }, policies: { auth: { upstreamAuthorization: 'forward' } } }, { engine });
      const res = await request(`${gw.url}/v1/pets`, { headers: { authorization: `bearer ${gw.key}` } });
      assertJson(t, res, 200);
      t.equal(stub.requests.at(-1)!.headers.authorization, `bearer ${gw.key}`);
    });

    t.test('{fromEnv: UP}: the gateway credential from its environment map', async (t) => {
      const up = 'Basic dXBzdHJlYW06c2VjcmV0';
      const gw = await startGateway(t, { upstream: { url }, policies: { auth: { upstreamAuthorization: { fromEnv: 'UP' } } } }, { engine, env: { UP: up } });
      const res = await request(`${gw.url}/v1/pets/1`, { headers: bearer(gw.key) });
      assertJson(t, res, 200);
      t.equal(stub.requests.at(-1)!.headers.authorization, up, 'the upstream gets the env value');
      t.notOk(JSON.stringify(stub.requests.at(-1)!.rawHeaders).includes(gw.key), 'and never the client key');
    });
  });

  t.test('what the client receives: the upstream answer byte for byte, non-ASCII text included', async (t) => {
    // Answers up to ONE_WRITE_MAX leave as one latin1 string with the head (src/core/forward/layer.ts),
    // larger ones as a Buffer: both paths, with multi-byte UTF-8 (2, 3 and 4 bytes) and int64.
    const pet = `{"id":7,"name":"Zoë 🐈 ネコ","categoryId":${MAX_INT64}}`;
    const big = `{"id":8,"name":"${'é🐈'.repeat(4000)}","categoryId":-9223372036854775808}`;
    const stub = await startStubUpstream(t, (req: RecordedRequest, res: ServerResponse) => {
      const path = req.url.split('?')[0]!;
      if (path.endsWith('/pets')) return sendJson(res, 200, `[${pet}]`);
      return sendJson(res, 200, path.endsWith('/8') ? big : pet);
    });
    const gw = await startGateway(t, { upstream: { url: `${stub.origin}/v1` } }, { engine });
    const cases: Array<[string, string, string]> = [
      ['getPet, streamed, small', '/v1/pets/7', pet],
      ['getPet, streamed, over 16 KiB', '/v1/pets/8', big],
      ['listPets, buffered by the list policy', '/v1/pets', `[${pet}]`],
    ];
    for (const [name, path, body] of cases) {
      const res = await request(`${gw.url}${path}`, { headers: bearer(gw.key) });
      t.equal(res.status, 200, name);
      t.ok(res.raw.equals(Buffer.from(body, 'utf8')), `${name}: the bytes are identical`);
      t.equal(res.headers['content-length'], String(Buffer.byteLength(body)), `${name}: content-length counts bytes`);
    }
  });

  t.test('upstream response headers that do not reach the client', async (t) => {
    const hop = {
      connection: 'keep-alive, x-hop-named',
      'x-hop-named': 'only for this connection',
      'keep-alive': 'timeout=5',
      'proxy-connection': 'keep-alive',
      server: 'LegacyPets/0.9',
      'x-powered-by': 'PHP/5.6',
      'set-cookie': 'session=legacy',
      'x-backend-host': 'db-internal-7',
      'cache-control': 'max-age=5',
    };
    const stub = await recordingUpstream(t, hop);
    const gw = await startGateway(t, { upstream: { url: `${stub.origin}/v1` } }, { engine });
    const check = (t: TapTest, headers: Record<string, unknown>) => {
      for (const name of ['x-hop-named', 'keep-alive', 'proxy-connection', 'server', 'x-powered-by', 'set-cookie', 'x-backend-host']) t.notOk(name in headers, `no ${name}`);
      t.equal(headers.connection, 'close', "the gateway's own Connection (the client asked for close), not the upstream's");
      t.equal(headers['cache-control'], 'max-age=5', 'an allowlisted end-to-end header passes');
      t.equal(headers['content-type'], JSON_TYPE);
    };
    t.test('a streamed answer (createPet)', async (t) => {
      const res = await request(`${gw.url}/v1/pets`, { method: 'POST', headers: bearer(gw.key, JSON_BODY), body: '{"name":"a","categoryId":1}' });
      assertJson(t, res, 201);
      check(t, res.headers);
    });
    t.test('a streamed answer (getPet)', async (t) => {
      const res = await request(`${gw.url}/v1/pets/7`, { headers: bearer(gw.key) });
      assertJson(t, res, 200);
      check(t, res.headers);
    });
    t.test('a buffered answer (listPets)', async (t) => {
      const res = await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key) });
      assertJson(t, res, 200);
      check(t, res.headers);
      t.equal(res.headers['content-length'], String(res.raw.length), 'content-length matches what is sent');
    });
  });

  t.test('listPets: an upstream that ignores limit and status cannot break the contract', async (t) => {
    const items = [
      `{"id":1,"name":"a","categoryId":${MAX_INT64},"status":"sold"}`,
      '{"id":2,"name":"b","categoryId":2,"status":"available"}',
      '{"id":3,"name":"c","categoryId":3,"status":"sold"}',
      '{"id":4,"name":"d","categoryId":4}',
    ];
    const stub = await startStubUpstream(t, (_req, res) => sendJson(res, 200, `[${items.join(', ')}]`));
    const gw = await startGateway(t, { upstream: { url: `${stub.origin}/v1` } }, { engine });
    const two = await request(`${gw.url}/v1/pets?limit=2`, { headers: bearer(gw.key) });
    t.equal(assertJson(t, two, 200), `[${items[0]},${items[1]}]`, 'at most limit animals, as their original bytes');
    const sold = await request(`${gw.url}/v1/pets?status=sold`, { headers: bearer(gw.key) });
    t.equal(assertJson(t, sold, 200), `[${items[0]},${items[2]}]`, 'only the requested status');
    const all = await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key) });
    t.equal(assertJson(t, all, 200), `[${items.join(', ')}]`, 'within the contract: the upstream body unchanged');
  });
});
