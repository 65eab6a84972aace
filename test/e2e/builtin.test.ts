/**
 * The standalone gateway with `upstream: builtin` on a real socket: authentication first on every
 * request, the listPets/createPet/getPet flow (int64 byte for byte), and every error the gateway
 * answers itself (404, 405 + Allow, 415, 400, 413, framing errors) in the Error shape.
 */
import t from 'tap';
import type { ExchangeRecord } from '../../src/core/record.js';
import { hashKey } from '../../src/policies/auth/index.js';
import { assertError, assertJson } from '../helpers/assert.js';
import { bearer, JSON_TYPE, parseRawResponse, rawExchange, request, startGateway, testKey, forEachEngine } from '../helpers/servers.js';

forEachEngine(t, async (t, engine) => {

  const MAX_INT64 = '9223372036854775807';
  const MIN_INT64 = '-9223372036854775808';
  const REALM = 'Bearer realm="petstore"';
  /** getPet is deprecated, removed on 5 December 2030 (the deprecation policy's defaults). */
  const GET_PET_DEPRECATION = {
    deprecation: `@${Date.parse('2026-01-01T00:00:00Z') / 1000}`,
    sunset: 'Thu, 05 Dec 2030 00:00:00 GMT',
    link: '</v1/pets>; rel="successor-version"',
  };

  /** One gateway for the whole file (maxBytes 1024 for the 413 tests); the flow test has its own. */
  const gw = await startGateway(t, { policies: { 'new-pet': { maxBytes: 1024 } } }, { engine });
  const PETS = `${gw.url}/v1/pets`;
  const JSON_BODY = { 'content-type': 'application/json' };

  function createPet(url: string, key: string, body: string | Buffer, headers: Record<string, string> = JSON_BODY) {
    return request(url, { method: 'POST', headers: bearer(key, headers), body });
  }

  t.test('authentication: 401 in the Error shape, with the RFC 6750 challenge', async (t) => {
    t.test('no Authorization header', async (t) => {
      const res = await request(PETS);
      assertError(t, res, 401, 'missing_api_key', { headers: { 'www-authenticate': REALM } });
    });

    t.test('an empty Authorization header', async (t) => {
      const res = await request(PETS, { headers: { authorization: '' } });
      assertError(t, res, 401, 'missing_api_key', { headers: { 'www-authenticate': REALM } });
    });

    for (const value of ['Basic abc', 'Bearer ', 'Bearer', `Bearer  x y`, `Token ${gw.key}`, `Bearer ${gw.key}!`]) {
      t.test(`Authorization: ${JSON.stringify(value)} is malformed`, async (t) => {
        const res = await request(PETS, { headers: { authorization: value } });
        assertError(t, res, 401, 'malformed_authorization', { headers: { 'www-authenticate': `${REALM}, error="invalid_request"` } });
      });
    }

    t.test('an unknown key', async (t) => {
      const res = await request(PETS, { headers: bearer(testKey()) });
      assertError(t, res, 401, 'invalid_api_key', { headers: { 'www-authenticate': `${REALM}, error="invalid_token"` } });
    });

    t.test('a key that is a prefix of the real one', async (t) => {
      const res = await request(PETS, { headers: bearer(gw.key.slice(0, -1)) });
      assertError(t, res, 401, 'invalid_api_key', { headers: { 'www-authenticate': `${REALM}, error="invalid_token"` } });
    });

    for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
      t.test(`the scheme is case-insensitive: ${scheme} <key> succeeds`, async (t) => {
        const res = await request(PETS, { headers: { authorization: `${scheme} ${gw.key}` } });
        assertJson(t, res, 200);
        t.notOk('www-authenticate' in res.headers, 'no challenge on success');
      });
    }

    t.test('a key from the policy file (a sha256 hash), with its own realm', async (t) => {
      const key = testKey();
      const other = await startGateway(t, {
        policies: { auth: { keys: [{ id: 'ops', hash: hashKey(key) }], keysFromEnv: null, realm: 'shop' } },
      }, { engine });
      const ok = await request(`${other.url}/v1/pets`, { headers: bearer(key) });
      t.equal(assertJson(t, ok, 200), '[]');
      // keysFromEnv: null, so the env key of the helper is not accepted.
      const envKey = await request(`${other.url}/v1/pets`, { headers: bearer(other.key) });
      assertError(t, envKey, 401, 'invalid_api_key', { headers: { 'www-authenticate': 'Bearer realm="shop", error="invalid_token"' } });
      const none = await request(`${other.url}/v1/pets`);
      assertError(t, none, 401, 'missing_api_key', { headers: { 'www-authenticate': 'Bearer realm="shop"' } });
    });
  });

  t.test('authentication runs before routing: unknown paths and wrong methods are 401 too', async (t) => {
    const cases: Array<[string, string]> = [
      ['GET', '/nope'],
      ['GET', '/'],
      ['GET', '/v1'],
      ['GET', '/v1/stores/orders'],
      ['GET', '/v1/pets/'],
      ['GET', '/v1/pets/1/extra'],
      ['GET', '/v1/pets/%ZZ'],
      ['DELETE', '/v1/pets'],
      ['PUT', '/v1/pets'],
      ['PATCH', '/v1/pets/1'],
      ['DELETE', '/v1/pets/1'],
      ['POST', '/v1/pets/1'],
      ['OPTIONS', '/v1/pets'],
    ];
    for (const [method, path] of cases) {
      t.test(`${method} ${path} without a key`, async (t) => {
        const res = await request(gw.url + path, { method });
        assertError(t, res, 401, 'missing_api_key', { headers: { 'www-authenticate': REALM }, absent: ['allow'] });
      });
      t.test(`${method} ${path} with a wrong key`, async (t) => {
        const res = await request(gw.url + path, { method, headers: bearer(testKey()) });
        assertError(t, res, 401, 'invalid_api_key', { absent: ['allow'] });
      });
    }

    t.test('createPet problems are not revealed before authentication', async (t) => {
      const text = await request(PETS, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hi' });
      assertError(t, text, 401, 'missing_api_key');
      const big = await request(PETS, { method: 'POST', headers: JSON_BODY, body: 'x'.repeat(2000) });
      assertError(t, big, 401, 'missing_api_key');
      const bad = await request(PETS, { method: 'POST', headers: { ...JSON_BODY, authorization: 'Basic abc' }, body: '{"name":' });
      assertError(t, bad, 401, 'malformed_authorization');
    });

    // Paths outside /v1 are answered by the server's not-found handler, after Fastify's own body
    // parsers ran: a body they reject must still get the 401 (and, with a key, the 404).
    t.test('a body on a path outside /v1 still gets 401 first', async (t) => {
      const res = await request(`${gw.url}/other`, { method: 'POST', headers: JSON_BODY, body: '{bad' });
      assertError(t, res, 401, 'missing_api_key', { headers: { 'www-authenticate': REALM } });
    });
    t.test('a body on a path outside /v1, with a key, gets 404', async (t) => {
      const res = await request(`${gw.url}/other`, { method: 'POST', headers: bearer(gw.key, JSON_BODY), body: '{bad' });
      assertError(t, res, 404, 'not_found', {});
    });
  });

  t.test('list, create and get: the NewPet/Pet flow, int64 byte for byte', async (t) => {
    const own = await startGateway(t, {}, { engine });
    const pets = `${own.url}/v1/pets`;

    const empty = await request(pets, { headers: bearer(own.key) });
    t.equal(assertJson(t, empty, 200), '[]', 'a new store lists no animals');

    const rexText = `{"name":"Rex","categoryId":${MAX_INT64},"status":"available"}`;
    const rex = await createPet(pets, own.key, rexText);
    const rexBody = assertJson(t, rex, 201);
    const rexPet = rex.json as { id: unknown };
    t.ok(Number.isSafeInteger(rexPet.id) && (rexPet.id as number) >= 1, 'a Pet with an integer id');
    t.equal(rexBody, `{"id":${String(rexPet.id)},"name":"Rex","categoryId":${MAX_INT64},"status":"available"}`, 'the exact Pet');
    t.ok(rex.body.includes(`"categoryId":${MAX_INT64}`), 'categoryId 9223372036854775807 comes back byte-exact');

    const tom = await createPet(pets, own.key, `{"name":"Tom","categoryId":${MIN_INT64}}`, { 'content-type': 'application/json; charset=utf-8' });
    const tomBody = assertJson(t, tom, 201);
    const tomId = (tom.json as { id: number }).id;
    t.equal(tomBody, `{"id":${tomId},"name":"Tom","categoryId":${MIN_INT64}}`, 'no status: none is invented');
    t.not(tomId, rexPet.id, 'ids are unique');

    const kit = await createPet(pets, own.key, '{"status":"sold","categoryId":3,"name":"Kit"}', { 'content-type': 'APPLICATION/JSON' });
    const kitBody = assertJson(t, kit, 201);

    const all = await request(pets, { headers: bearer(own.key) });
    t.equal(assertJson(t, all, 200), `[${rexBody},${tomBody},${kitBody}]`, 'a bare array of every Pet, in creation order, byte-exact');

    const sold = await request(`${pets}?status=sold`, { headers: bearer(own.key) });
    t.equal(assertJson(t, sold, 200), `[${kitBody}]`, 'status filter');
    const pending = await request(`${pets}?status=pending`, { headers: bearer(own.key) });
    t.equal(assertJson(t, pending, 200), '[]', 'no pending animals');
    const limited = await request(`${pets}?limit=2`, { headers: bearer(own.key) });
    t.equal(assertJson(t, limited, 200), `[${rexBody},${tomBody}]`, 'limit');
    const both = await request(`${pets}?limit=1&status=sold`, { headers: bearer(own.key) });
    t.equal(assertJson(t, both, 200), `[${kitBody}]`, 'limit and status');

    const one = await request(`${pets}/${String(rexPet.id)}`, { headers: bearer(own.key) });
    t.equal(assertJson(t, one, 200), rexBody, 'getPet returns the same Pet, byte-exact');
    t.ok(one.body.includes(MAX_INT64));
    t.match(one.headers, GET_PET_DEPRECATION, 'getPet says it is deprecated');
    t.notOk('deprecation' in all.headers, 'listPets is not deprecated');
    t.notOk('sunset' in rex.headers, 'createPet is not deprecated');

    // Outside 1..100 the interface shows nothing; the gateway's default (list-pets outOfRange: reject) is a 400.
    const badQueries: Array<[string, string]> = [
      ['limit=0', 'limit must be at least 1'],
      ['limit=101', 'limit must be at most 100'],
      ['limit=abc', 'limit must be an integer from 1 to 100'],
      ['limit=1.5', 'limit must be an integer from 1 to 100'],
      ['status=lost', 'status must be one of available, pending, sold'],
      ['status=available&status=sold', 'status may be given once'],
    ];
    for (const [q, message] of badQueries) {
      const res = await request(`${pets}?${q}`, { headers: bearer(own.key) });
      t.test(`?${q}`, async (t) => assertError(t, res, 400, 'invalid_query', { message }));
    }
    const max = await request(`${pets}?limit=100`, { headers: bearer(own.key) });
    t.equal(assertJson(t, max, 200), `[${rexBody},${tomBody},${kitBody}]`, 'limit=100 is allowed');
    const min = await request(`${pets}?limit=1`, { headers: bearer(own.key) });
    t.equal(assertJson(t, min, 200), `[${rexBody}]`, 'limit=1 is allowed');
  });

  t.test('404: unknown paths and unknown animals', async (t) => {
    for (const path of ['/nope', '/', '/v1', '/v2/pets', '/V1/pets', '/v1/Pets', '/v1/pets/', '/v1/pets/1/extra', '/v1/store/orders', '//v1/pets', '/v1/pets;x=1']) {
      const res = await request(gw.url + path, { headers: bearer(gw.key) });
      t.test(`GET ${path}`, async (t) => assertError(t, res, 404, 'not_found'));
    }
    for (const id of ['999999', 'abc', '1.0', '01', '9223372036854775808', '-1']) {
      const res = await request(`${PETS}/${id}`, { headers: bearer(gw.key) });
      t.test(`GET /v1/pets/${id}`, async (t) => {
        assertError(t, res, 404, 'pet_not_found');
        t.match(res.headers, GET_PET_DEPRECATION, 'a getPet 404 carries the deprecation headers too');
      });
    }
    t.test('a getPet 401 carries the deprecation headers too', async (t) => {
      const res = await request(`${PETS}/1`);
      assertError(t, res, 401, 'missing_api_key', { headers: { 'www-authenticate': REALM } });
      t.match(res.headers, GET_PET_DEPRECATION);
    });
  });

  t.test('405 with Allow for a known path and another method', async (t) => {
    for (const method of ['PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      const res = await request(PETS, { method, headers: bearer(gw.key) });
      t.test(`${method} /v1/pets`, async (t) => assertError(t, res, 405, 'method_not_allowed', { headers: { allow: 'GET, POST' } }));
    }
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      const res = await request(`${PETS}/1`, { method, headers: bearer(gw.key, JSON_BODY), body: method === 'DELETE' ? undefined : '{}' });
      t.test(`${method} /v1/pets/1`, async (t) => assertError(t, res, 405, 'method_not_allowed', { headers: { allow: 'GET' } }));
    }
    t.test('HEAD is not an operation: 405 with Allow and no body', async (t) => {
      const res = await request(PETS, { method: 'HEAD', headers: bearer(gw.key) });
      t.equal(res.status, 405);
      t.equal(res.headers.allow, 'GET, POST');
      t.equal(res.headers['content-type'], JSON_TYPE);
      t.equal(res.raw.length, 0, 'no body on HEAD');
      const item = await request(`${PETS}/1`, { method: 'HEAD', headers: bearer(gw.key) });
      t.equal(item.status, 405);
      t.equal(item.headers.allow, 'GET');
    });
  });

  t.test('415: createPet needs application/json', async (t) => {
    const cases: Array<[string, Record<string, string>]> = [
      ['text/plain', { 'content-type': 'text/plain' }],
      ['no content-type', {}],
      ['application/json-patch+json', { 'content-type': 'application/json-patch+json' }],
      ['application/x-www-form-urlencoded', { 'content-type': 'application/x-www-form-urlencoded' }],
    ];
    for (const [name, headers] of cases) {
      const res = await createPet(PETS, gw.key, '{"name":"Rex","categoryId":1}', headers);
      t.test(name, async (t) => assertError(t, res, 415, 'unsupported_media_type'));
    }
  });

  t.test('400: malformed JSON', async (t) => {
    for (const body of ['{"name":', '{"name":"a","categoryId":1} x', "{'name':'a'}", '{"name":"a","categoryId":01}', '{"name":"a","name":"b","categoryId":1}']) {
      const res = await createPet(PETS, gw.key, body);
      t.test(JSON.stringify(body), async (t) => assertError(t, res, 400, 'malformed_json', { message: /^The request body is not valid JSON\./ }));
    }
    t.test('bytes that are not UTF-8 are refused, not replaced', async (t) => {
      const body = Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff, 0xfe]), Buffer.from('","categoryId":1}')]);
      const res = await createPet(PETS, gw.key, body);
      assertError(t, res, 400, 'malformed_json', { message: /^The request body is not valid JSON\./ });
    });
    t.test('an empty body', async (t) => {
      const res = await createPet(PETS, gw.key, '');
      assertError(t, res, 400, 'malformed_json', { message: 'The request body is empty: a NewPet JSON object is required.' });
    });
    t.test('nesting past the parser limit', async (t) => {
      const res = await createPet(PETS, gw.key, '['.repeat(500) + ']'.repeat(500));
      t.equal(res.status, 400);
      t.match(res.json, { status: 400 });
      t.ok(['malformed_json', 'invalid_body'].includes((res.json as { code: string }).code), 'a 400 code');
    });
  });

  t.test('400: NewPet violations, each named', async (t) => {
    const before = await request(PETS, { headers: bearer(gw.key) });
    const cases: Array<[string, string]> = [
      ['{}', 'name is required; categoryId is required'],
      ['{"name":"a"}', 'categoryId is required'],
      ['{"categoryId":1}', 'name is required'],
      ['{"name":1,"categoryId":1}', 'name must be a string'],
      ['{"name":null,"categoryId":1}', 'name must be a string'],
      ['{"name":"a","categoryId":"1"}', 'categoryId must be an integer within int64'],
      ['{"name":"a","categoryId":1.5}', 'categoryId must be an integer within int64'],
      ['{"name":"a","categoryId":1.0}', 'categoryId must be an integer within int64'],
      ['{"name":"a","categoryId":1e3}', 'categoryId must be an integer within int64'],
      ['{"name":"a","categoryId":9223372036854775808}', 'categoryId must be an integer within int64'],
      ['{"name":"a","categoryId":-9223372036854775809}', 'categoryId must be an integer within int64'],
      ['{"name":"a","categoryId":1,"status":"lost"}', 'status must be one of available, pending, sold'],
      ['{"name":"a","categoryId":1,"status":null}', 'status must be one of available, pending, sold'],
      ['{"id":5,"name":"a","categoryId":1}', 'id must not be sent: the service assigns it'],
      ['{"name":"a","categoryId":1,"color":"red"}', "unknown field 'color'"],
      ['{"name":"a","categoryId":1,"__proto__":{"x":1}}', "unknown field '__proto__'"],
      ['[]', 'the body must be a JSON object'],
      ['null', 'the body must be a JSON object'],
      ['"Rex"', 'the body must be a JSON object'],
    ];
    for (const [body, message] of cases) {
      const res = await createPet(PETS, gw.key, body);
      t.test(body, async (t) => assertError(t, res, 400, 'invalid_body', { message }));
    }
    t.test('every violation at once', async (t) => {
      const res = await createPet(PETS, gw.key, '{"id":1,"name":2,"categoryId":"x","status":"lost","extra":true}');
      assertError(t, res, 400, 'invalid_body', { message: 'any' });
      const message = (res.json as { message: string }).message;
      for (const part of ["unknown field 'extra'", 'name must be a string', 'categoryId must be an integer within int64', 'status must be one of', 'id must not be sent']) {
        t.ok(message.includes(part), `names: ${part}`);
      }
    });
    t.test('a bare number is not an object', async (t) => {
      const res = await createPet(PETS, gw.key, '42');
      assertError(t, res, 400, 'invalid_body', { message: 'the body must be a JSON object' });
    });
    const after = await request(PETS, { headers: bearer(gw.key) });
    t.equal(after.body, before.body, 'no rejected body was stored');
  });

  t.test('413 past new-pet maxBytes (1024)', async (t) => {
    const pad = (n: number) => {
      const base = '{"name":"","categoryId":1}';
      return `{"name":"${'x'.repeat(n - base.length)}","categoryId":1}`;
    };
    t.test('2000 bytes with Content-Length', async (t) => {
      const res = await createPet(PETS, gw.key, pad(2000));
      assertError(t, res, 413, 'payload_too_large');
    });
    t.test('2000 bytes chunked (no Content-Length)', async (t) => {
      const res = await createPet(PETS, gw.key, pad(2000), { ...JSON_BODY, 'transfer-encoding': 'chunked' });
      assertError(t, res, 413, 'payload_too_large');
    });
    t.test('1025 bytes is one too many', async (t) => {
      const res = await createPet(PETS, gw.key, pad(1025));
      assertError(t, res, 413, 'payload_too_large');
    });
    t.test('exactly 1024 bytes is accepted', async (t) => {
      const body = pad(1024);
      t.equal(Buffer.byteLength(body), 1024);
      const res = await createPet(PETS, gw.key, body);
      assertJson(t, res, 201);
    });
    t.test('the gateway still answers afterwards', async (t) => {
      const res = await request(PETS, { headers: bearer(gw.key) });
      assertJson(t, res, 200);
    });
  });

  t.test('requests node cannot parse get the Error shape and a closed connection', async (t) => {
    const port = Number(new URL(gw.url).port);
    t.test('a header line without a colon', async (t) => {
      const raw = await rawExchange(port, 'GET /v1/pets HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n');
      const res = parseRawResponse(raw);
      t.equal(res.status, 400);
      t.equal(res.headers['content-type'], JSON_TYPE);
      t.equal(res.headers.connection, 'close');
      t.strictSame(JSON.parse(res.body), { code: 'invalid_request', message: 'The request is malformed.', status: 400 });
    });
    t.test('headers past the limit', async (t) => {
      const raw = await rawExchange(port, `GET /v1/pets HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
      const res = parseRawResponse(raw);
      t.equal(res.status, 431);
      t.equal(res.headers['content-type'], JSON_TYPE);
      t.strictSame(JSON.parse(res.body), { code: 'headers_too_large', message: 'The request headers are too large.', status: 431 });
    });
    t.test('an Authorization header of "Bearer " on the wire', async (t) => {
      const raw = await rawExchange(port, 'GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \r\nConnection: close\r\n\r\n');
      const res = parseRawResponse(raw);
      t.equal(res.status, 401);
      t.equal(res.headers['www-authenticate'], `${REALM}, error="invalid_request"`);
      t.equal(JSON.parse(res.body).code, 'malformed_authorization');
    });
  });
  t.test('the record of a request names the code of every Error the client got, the backend\'s own included', async (t) => {
    const records: ExchangeRecord[] = [];
    const own = await startGateway(t, {}, { engine, observer: { onEnd: (r) => records.push(r) } });
    const cases = [
      { path: '/v1/pets/987654321', status: 404, code: 'pet_not_found' },
      { path: '/v1/pets?limit=0', status: 400, code: 'invalid_query' },
      { path: '/v1/pets', status: 200, code: undefined },
    ];
    for (const c of cases) {
      const res = await request(`${own.url}${c.path}`, { headers: bearer(own.key) });
      t.equal(res.status, c.status, c.path);
      if (c.code !== undefined) t.equal(JSON.parse(res.body).code, c.code, `${c.path}: the body's code`);
    }
    for (let i = 0; i < 50 && records.length < cases.length; i++) await new Promise((r) => setTimeout(r, 10));
    t.same(
      records.map((r) => [r.status, r.errorCode]),
      cases.map((c) => [c.status, c.code]),
      'the record carries the code the body has',
    );
  });
});
