/**
 * The document clients see, checked against the running gateway by a third-party contract tool:
 * Stoplight Prism's validating proxy (`prism proxy`), started from the document the gateway serves
 * on its admin port (GET /openapi.json), in front of the built CLI's gateway (builtin backend, keys
 * from the environment, a rate limit and CORS on). Every operation and error path goes through it,
 * and Prism must find no violation in any answer: status, headers (Deprecation, RateLimit,
 * WWW-Authenticate...) and body.
 *
 * Prism answers itself, without asking the gateway, a request the document calls invalid when
 * `--errors` is set (a 422, a 401). So the requests the document allows go through a Prism with
 * `--errors` (a violating answer becomes Prism's own 500 `VIOLATIONS`), and the requests it refuses
 * (no key, a bad limit, an invalid body, a wrong media type, unknown paths and methods) through a
 * Prism without it, which forwards them and reports what it found in `sl-violations`: only the
 * request's own violations may be there, never one of the answer. A deliberately wrong document
 * makes Prism report violations (the control: this test can fail).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TapTest } from '../helpers/assert.js';
import {
  adminUrl,
  bearer,
  childEnv,
  ensureBuilt,
  forEachEngine,
  killOnTeardown,
  plainCommand,
  PROJECT_ROOT,
  request,
  spawnCliUntil,
  tempDir,
  testKey,
  type Engine,
  type Response,
} from '../helpers/servers.js';

ensureBuilt();

const PRISM = join(PROJECT_ROOT, 'node_modules', '.bin', 'prism');
const dir = tempDir(t, 'openapi-prism');
const JSON_CT = { 'content-type': 'application/json' };

const POLICY = `version: 1
upstream: { url: builtin }
policies:
  auth: { keys: [], keysFromEnv: PETSTORE_API_KEYS }
  rate-limit: { limit: 1000, perKey: { "PETSTORE_API_KEYS#2": { limit: 1 } } }
  cors: { origins: ["https://app.example"] }
`;

const BANNER = /petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) /;
const ADMIN = /"msg":"admin listening/;

interface Gateway {
  readonly url: string;
  readonly admin: string;
  /** Two keys: the first limited to 1000 requests a minute, the second to 1. */
  readonly keys: readonly [string, string];
}

async function startGateway(t: TapTest, engine: Engine): Promise<Gateway> {
  const keys = [testKey(), testKey()] as const;
  const file = join(dir, `policy-${engine}.yaml`);
  writeFileSync(file, POLICY);
  const { handle, match } = await spawnCliUntil(t, ['serve', '--engine', engine, '--policy', file, '--port', '0'], new RegExp(`^(?=[\\s\\S]*${ADMIN.source})(?=[\\s\\S]*${BANNER.source})`), {
    env: { LOG_LEVEL: 'info', PETSTORE_API_KEYS: keys.join(',') },
    timeoutMs: 20_000,
  });
  const url = BANNER.exec(match.input ?? '')?.[1];
  if (url === undefined) throw new Error(`no banner: ${match.input}`);
  return { url, admin: adminUrl(handle), keys };
}

/** `prism proxy DOCUMENT UPSTREAM` on a free port; its base URL once it listens (at most 30 s). */
async function startPrism(t: TapTest, document: string, upstream: string, errors: boolean): Promise<string> {
  const args = ['proxy', document, upstream, ...(errors ? ['--errors'] : []), '-p', '0', '-h', '127.0.0.1'];
  const child = spawn(...plainCommand(PRISM, args), { cwd: dir, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  killOnTeardown(t, child);
  let output = '';
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`prism did not listen within 30 s:\n${output}`)), 30_000);
    const check = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const m = /Prism is listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (m === null) return;
      clearTimeout(timer);
      resolve(m[1]!);
    };
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`prism exited (${code}) before listening:\n${output}`));
    });
  });
}

interface Violation {
  readonly location: readonly string[];
  readonly severity: string;
  readonly message: string;
}

/** What Prism found in the exchange (`sl-violations`), of the request and of the answer. */
function violations(res: Response): { request: Violation[]; response: Violation[] } {
  const header = res.headers['sl-violations'];
  const all = typeof header === 'string' ? (JSON.parse(header) as Violation[]) : [];
  return { request: all.filter((v) => v.location[0] === 'request'), response: all.filter((v) => v.location[0] !== 'request') };
}

/** The served document, from the admin port, written where Prism reads it. */
async function servedDocumentFile(t: TapTest, gw: Gateway, name: string): Promise<{ file: string; document: Record<string, unknown> }> {
  const res = await request(`${gw.admin}/openapi.json`);
  t.equal(res.status, 200, 'GET /openapi.json on the admin port');
  t.equal(res.headers['content-type'], 'application/json; charset=utf-8', 'as JSON');
  const document = res.json as Record<string, unknown>;
  t.equal(document.openapi, '3.1.0', 'an OpenAPI 3.1 document');
  t.same((document.servers as Array<{ url: string }>)[0]?.url, `${gw.url}/v1`, 'its first server is the listener, with the port it got');
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(document));
  return { file, document };
}

/** Sets the value at `path` of a JSON document, which must lead to an object. */
function setAt(doc: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let at: Record<string, unknown> = doc;
  for (const key of path.slice(0, -1)) at = at[key] as Record<string, unknown>;
  at[path[path.length - 1]!] = value;
}

const code = (res: Response): unknown => (res.json as { code?: unknown } | undefined)?.code;

forEachEngine(t, async (t, engine) => {
  t.test(`through Prism's validating proxy (${engine}): no answer of the gateway violates the served document`, async (t) => {
    const gw = await startGateway(t, engine);
    const { file } = await servedDocumentFile(t, gw, `served-${engine}.json`);
    // Prism matches the document's paths (/pets) and forwards below its upstream URL: the base path goes there.
    const [strict, lenient] = await Promise.all([startPrism(t, file, `${gw.url}/v1`, true), startPrism(t, file, `${gw.url}/v1`, false)]);
    const [k1, k2] = gw.keys;

    // What the document allows: Prism (--errors) would answer a violating answer itself, with a 500.
    const allowed: Array<[string, string, Parameters<typeof request>[1], number, string | undefined]> = [
      ['createPet 201', '/pets', { method: 'POST', headers: bearer(k1, JSON_CT), body: JSON.stringify({ name: 'Rex', categoryId: 1, status: 'available' }) }, 201, undefined],
      ['createPet 201', '/pets', { method: 'POST', headers: bearer(k1, JSON_CT), body: JSON.stringify({ name: 'Tom', categoryId: 2, status: 'sold' }) }, 201, undefined],
      ['listPets 200, limit and status', '/pets?limit=1&status=available', { headers: bearer(k1) }, 200, undefined],
      ['listPets 200', '/pets', { headers: bearer(k1) }, 200, undefined],
      ['listPets 200 to an allowed origin (CORS fields)', '/pets?limit=5', { headers: bearer(k1, { origin: 'https://app.example' }) }, 200, undefined],
      ['getPet 200, deprecated', '/pets/1', { headers: bearer(k1) }, 200, undefined],
      ['getPet 404, unknown pet', '/pets/987654', { headers: bearer(k1) }, 404, 'pet_not_found'],
      ['createPet 413, a body over new-pet.maxBytes', '/pets', { method: 'POST', headers: bearer(k1, JSON_CT), body: JSON.stringify({ name: 'x'.repeat(20_000), categoryId: 1 }) }, 413, 'payload_too_large'],
      ['listPets 200, the last request of a key limited to 1', '/pets', { headers: bearer(k2) }, 200, undefined],
      ['listPets 429, rate limited', '/pets', { headers: bearer(k2) }, 429, 'rate_limited'],
    ];
    for (const [name, path, options, status, errorCode] of allowed) {
      const res = await request(`${strict}${path}`, options);
      t.equal(res.status, status, `${name}: the gateway's status through Prism (${res.body.slice(0, 300)})`);
      if (errorCode !== undefined) t.equal(code(res), errorCode, `${name}: the gateway's code`);
      t.same(violations(res), { request: [], response: [] }, `${name}: no violation`);
      if (name.startsWith('getPet')) {
        t.equal(res.headers.deprecation, '@1767225600', `${name}: Deprecation`);
        t.equal(res.headers.sunset, 'Thu, 05 Dec 2030 00:00:00 GMT', `${name}: Sunset`);
      }
      if (status === 429) t.match(res.headers['retry-after'], /^[0-9]+$/, `${name}: Retry-After`);
      if (name.includes('CORS')) t.equal(res.headers['access-control-allow-origin'], 'https://app.example', `${name}: the gateway's CORS field`);
    }

    // What the document refuses: Prism (without --errors) forwards it and reports the request's violations.
    const refused: Array<[string, string, Parameters<typeof request>[1], number, string]> = [
      ['401, no key', '/pets', {}, 401, 'missing_api_key'],
      ['401, not a bearer key', '/pets/1', { headers: { authorization: 'Basic YTpi' } }, 401, 'malformed_authorization'],
      ['401, an unknown key', '/pets', { headers: bearer(testKey()) }, 401, 'invalid_api_key'],
      ['400, limit out of range', '/pets?limit=0', { headers: bearer(k1) }, 400, 'invalid_query'],
      ['400, limit not an integer', '/pets?limit=ten', { headers: bearer(k1) }, 400, 'invalid_query'],
      ['400, status not a PetStatus', '/pets?status=lost', { headers: bearer(k1) }, 400, 'invalid_query'],
      ['400, a body that is not a NewPet', '/pets', { method: 'POST', headers: bearer(k1, JSON_CT), body: JSON.stringify({ name: 'Rex' }) }, 400, 'invalid_body'],
      ['400, an id in a NewPet', '/pets', { method: 'POST', headers: bearer(k1, JSON_CT), body: JSON.stringify({ id: 5, name: 'Rex', categoryId: 1 }) }, 400, 'invalid_body'],
      ['415, not JSON', '/pets', { method: 'POST', headers: bearer(k1, { 'content-type': 'text/plain' }), body: 'Rex' }, 415, 'unsupported_media_type'],
      ['404, a petId that is not an int64', '/pets/abc', { headers: bearer(k1) }, 404, 'pet_not_found'],
      ['405, a method the path does not have', '/pets', { method: 'DELETE', headers: bearer(k1) }, 405, 'method_not_allowed'],
      ['404, a path of no operation', '/stores', { headers: bearer(k1) }, 404, 'not_found'],
    ];
    for (const [name, path, options, status, errorCode] of refused) {
      const res = await request(`${lenient}${path}`, options);
      t.equal(res.status, status, `${name}: the gateway's status through Prism (${res.body.slice(0, 300)})`);
      t.equal(code(res), errorCode, `${name}: the gateway's code`);
      t.same(violations(res).response, [], `${name}: no violation in the answer`);
      if (status === 401) t.match(res.headers['www-authenticate'], /^Bearer realm="petstore"/, `${name}: the challenge`);
      if (status === 405) t.equal(res.headers.allow, 'GET, POST', `${name}: Allow`);
    }
    // The lenient Prism did validate: it saw what was wrong with the requests.
    const probe = violations(await request(`${lenient}/pets?limit=0`, { headers: bearer(k1) }));
    t.ok(probe.request.some((v) => v.location.join('.') === 'request.query.limit'), 'Prism reported the bad limit of the request');
  });
});

// parity: the control is about Prism and a wrong document, not about the gateway's engines (which the scenario above covers).
t.test('the control: a wrong document makes Prism report the violations, so the test above can fail', async (t) => {
  const gw = await startGateway(t, 'undici');
  const { document } = await servedDocumentFile(t, gw, 'served-control.json');
  const wrong = structuredClone(document);
  setAt(wrong, ['paths', '/pets/{petId}', 'get', 'responses', '200', 'headers', 'Deprecation', 'schema', 'const'], '@0');
  setAt(wrong, ['components', 'schemas', 'Error', 'properties', 'status', 'type'], 'string');
  setAt(wrong, ['paths', '/pets', 'get', 'responses', '401', 'headers', 'WWW-Authenticate', 'schema', 'pattern'], '^Basic');
  const file = join(dir, 'wrong.json');
  writeFileSync(file, JSON.stringify(wrong));
  const strict = await startPrism(t, file, `${gw.url}/v1`, true);
  const [k1] = gw.keys;
  const created = await request(`${gw.url}/v1/pets`, { method: 'POST', headers: bearer(k1, JSON_CT), body: JSON.stringify({ name: 'Rex', categoryId: 1 }) });
  t.equal(created.status, 201, 'a pet to get');

  // Prism sets sl-violations whether or not --errors is given; with it, it answers 500 itself.
  const cases: Array<[string, string, Record<string, string | number>, string[]]> = [
    ['a header the document describes otherwise', '/pets/1', bearer(k1), ['response.header.deprecation']],
    ['a body the document describes otherwise', '/pets/987654', bearer(k1), ['response.body.status']],
    ['both', '/pets', bearer(testKey()), ['response.body.status', 'response.header.www-authenticate']],
  ];
  for (const [name, path, headers, found] of cases) {
    const res = await request(`${strict}${path}`, { headers });
    t.equal(res.status, 500, `${name}: Prism's 500, not the gateway's answer`);
    t.match(res.json, { type: 'https://stoplight.io/prism/errors#VIOLATIONS' }, `${name}: a VIOLATIONS problem`);
    t.same(violations(res).response.map((v) => v.location.join('.')).sort(), found, `${name}: sl-violations names it`);
  }
});
