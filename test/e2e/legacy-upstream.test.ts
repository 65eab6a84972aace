// The gateway in front of a legacy upstream that breaks the interface in every way it can
// (test/fixtures/legacy-upstream.mjs, a separate process on 127.0.0.1): what the client sees is
// exact to the interface, and what the upstream receives is what the policies decided.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import t from 'tap';
import { assertError } from '../helpers/assert.js';
import { bearer, PROJECT_ROOT, request, startGateway, type TeardownHost, forEachEngine, nodeCommand } from '../helpers/servers.js';

forEachEngine(t, async (t, engine) => {

  interface Received {
    method: string;
    url: string;
    headers: Record<string, string>;
    body: string;
  }

  async function startLegacy(t: TeardownHost): Promise<string> {
    const child = spawn(...nodeCommand([join(PROJECT_ROOT, 'test', 'fixtures', 'legacy-upstream.mjs')]), {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    t.teardown(() => {
      child.kill('SIGKILL');
    });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('legacy upstream did not start within 10 s')), 10_000);
      let out = '';
      child.stdout!.setEncoding('utf8').on('data', (s: string) => {
        out += s;
        const m = /listening on (http:\/\/127\.0\.0\.1:\d+\/v1)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
      child.once('exit', (code) => reject(new Error(`legacy upstream exited (${code})`)));
    });
  }

  async function received(upstream: string): Promise<Received[]> {
    const res = await request(upstream.replace(/\/v1$/, '/__received'));
    return (res.json as Array<Received & { body: string }>).map((r) => ({ ...r, body: Buffer.from(r.body, 'base64').toString('utf8') }));
  }

  t.test('against a legacy upstream', async (t) => {
    const upstream = await startLegacy(t);
    const gw = await startGateway(t, { upstream: { url: upstream } }, { engine });
    const auth = bearer(gw.key);

    await t.test('listPets: at most `limit` animals, only of the filtered status, bytes exact', async (t) => {
      const all = await request(`${gw.url}/v1/pets`, { headers: auth });
      t.equal(all.status, 200);
      const pets = all.json as Array<{ status: string }>;
      t.equal(pets.length, 20, 'the default limit, although the upstream sent 150');
      t.match(all.body, '"id":9007199254740993', 'an id above 2^53 arrives byte-exact');
      t.match(all.body, '"categoryId":9223372036854775807');
      t.notOk(all.headers.server, 'no upstream server header');
      t.notOk(all.headers['x-powered-by']);

      const sold = await request(`${gw.url}/v1/pets?status=sold&limit=7`, { headers: auth });
      const soldPets = sold.json as Array<{ status: string }>;
      t.equal(soldPets.length, 7);
      t.ok(soldPets.every((p) => p.status === 'sold'), 'only sold animals');
      t.equal(Number(sold.headers['content-length']), sold.raw.length, 'content-length matches the rewritten body');

      const max = await request(`${gw.url}/v1/pets?limit=100`, { headers: auth });
      t.equal((max.json as unknown[]).length, 100);

      const log = (await received(upstream)).filter((r) => r.method === 'GET' && r.url.startsWith('/v1/pets?'));
      t.strictSame(
        log.map((r) => r.url),
        ['/v1/pets?limit=20', '/v1/pets?limit=7&status=sold', '/v1/pets?limit=100'],
        'the upstream always gets an explicit limit, and only the defined parameters',
      );
    });

    await t.test('listPets: bad limit or status never reaches the upstream', async (t) => {
      const before = (await received(upstream)).length;
      for (const q of ['limit=0', 'limit=101', 'limit=-1', 'limit=1.5', 'limit=abc', 'limit=', 'limit=5&limit=6', 'status=lost']) {
        const res = await request(`${gw.url}/v1/pets?${q}`, { headers: auth });
        assertError(t, res, 400, 'invalid_query', { message: 'any' });
      }
      t.equal((await received(upstream)).length, before, 'nothing was forwarded');
    });

    await t.test('createPet: the upstream receives the client bytes exactly', async (t) => {
      const body = '{ "name": "Rex",  "categoryId": 9223372036854775807, "status": "pending" }';
      const res = await request(`${gw.url}/v1/pets`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json; charset=utf-8' }, body });
      t.equal(res.status, 201);
      t.match(res.body, '"categoryId": 9223372036854775807');
      const last = (await received(upstream)).at(-1)!;
      t.equal(last.body, body, 'byte for byte, whitespace included');
      t.notOk(last.headers.authorization, "the client's key is not forwarded");
      t.notOk(last.headers['accept-encoding'], 'identity encoding is asked for');
    });

    await t.test('upstream errors reach the client in the Error shape, with nothing internal', async (t) => {
      const html = await request(`${gw.url}/v1/pets/500`, { headers: auth });
      assertError(t, html, 500, 'upstream_error');
      t.notMatch(html.body, /hunter2|NullPointer|html|PetDao/i, 'no page, stack trace or password');
      t.equal(html.headers.sunset, 'Thu, 05 Dec 2030 00:00:00 GMT', 'getPet errors carry the deprecation headers');

      const text404 = await request(`${gw.url}/v1/pets/404`, { headers: auth });
      assertError(t, text404, 404, 'pet_not_found');

      const locked = await request(`${gw.url}/v1/pets/409`, { headers: auth });
      assertError(t, locked, 409, 'conflict', { message: 'Pet is locked by another order' });

      const teapot = await request(`${gw.url}/v1/pets/418`, { headers: auth });
      assertError(t, teapot, 418, 'upstream_error', { message: 'I am a teapot' });

      const down = await request(`${gw.url}/v1/pets/503`, { headers: auth });
      assertError(t, down, 503, 'service_unavailable', { message: 'Down for maintenance', headers: { 'retry-after': '7' } });

      const moved = await request(`${gw.url}/v1/pets/302`, { headers: auth });
      assertError(t, moved, 502, 'upstream_contract_violation', { absent: ['location'] });
      t.notMatch(moved.body, '10.0.0.7');
    });

    await t.test('createPet: a legacy 422 becomes the 400 the interface lists', async (t) => {
      // The gateway refuses a body without a name itself; this one has a name the legacy upstream's
      // naive check misses, so it answers 422, which the gateway maps to the interface's 400.
      const res = await request(`${gw.url}/v1/pets`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        // "name" is present for the gateway's schema, but spelled with an escape the legacy regex misses.
        body: '{"n\\u0061me":"Rex","categoryId":1}',
      });
      assertError(t, res, 400, 'invalid_body', { message: 'name is missing' });
    });

    await t.test('getPet: ids beyond 2^53 are forwarded and answered exactly', async (t) => {
      const res = await request(`${gw.url}/v1/pets/9007199254740993`, { headers: auth });
      t.equal(res.status, 200);
      t.match(res.body, '"id":9007199254740993');
      t.equal((await received(upstream)).at(-1)!.url, '/v1/pets/9007199254740993');
    });

    await t.test('response-contract enforce: a broken Pet becomes 502', async (t) => {
      const gw3 = await startGateway(t, { upstream: { url: upstream }, policies: { 'response-contract': { mode: 'enforce' } } }, { engine });
      const broken = await request(`${gw3.url}/v1/pets/77`, { headers: bearer(gw3.key) });
      assertError(t, broken, 502, 'upstream_contract_violation');
      const good = await request(`${gw3.url}/v1/pets/1`, { headers: bearer(gw3.key) });
      t.equal(good.status, 200);
      const list = await request(`${gw3.url}/v1/pets?limit=5`, { headers: bearer(gw3.key) });
      t.equal(list.status, 200, 'an enforced list of valid Pets passes');
    });
  });
});
