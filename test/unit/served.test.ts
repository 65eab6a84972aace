/**
 * The document clients see (src/api/served.ts, src/cli/openapi.ts): a valid OpenAPI 3.1 document
 * (the validator of @seriousme/openapi-schema-validator, which refuses a broken one), the
 * gateway's answers on every operation as the policy switches them on, no internal extension, and
 * the admin listener's GET /openapi.json. test/e2e/openapi-prism.test.ts checks it against the
 * running gateway with a third-party contract tool.
 */
import t from 'tap';
import { Validator } from '@seriousme/openapi-schema-validator';
import { GATEWAY_EXTENSIONS, servedDocument, shippedDocument } from '../../src/api/served.js';
import { servedFor, servedOptionsOf } from '../../src/cli/openapi.js';
import { parsePolicy } from '../../src/config/load.js';
import type { PolicyConfig } from '../../src/config/types.js';
import { CATALOGUE } from '../../src/core/errors.js';
import { READY, startAdmin } from '../../src/ops/admin.js';
import { assertError, assertJson } from '../helpers/assert.js';
import { request } from '../helpers/servers.js';

type Json = Record<string, unknown>;

function config(yaml = ''): PolicyConfig {
  const r = parsePolicy(`version: 1\n${yaml}`, { env: {} }, {}, { keys: 'not-checked' });
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.config;
}

const obj = (v: unknown): Json => v as Json;
/** The served answers of an operation. */
const answers = (doc: Json, path: string, method: string): Json => obj(obj(obj(obj(doc.paths)[path])[method]).responses);
const headersOf = (answer: unknown): Json => obj(obj(answer).headers);

async function validate(doc: unknown): Promise<{ valid: boolean; errors?: unknown }> {
  return new Validator().validate(doc as Json);
}

/** Every key of a JSON value, at any depth. */
function keysOf(value: unknown, out: Set<string> = new Set()): Set<string> {
  if (Array.isArray(value)) for (const v of value) keysOf(v, out);
  else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      out.add(k);
      keysOf(v, out);
    }
  }
  return out;
}

const OPERATIONS: ReadonlyArray<[string, string]> = [
  ['/pets', 'get'],
  ['/pets', 'post'],
  ['/pets/{petId}', 'get'],
];

t.test('the served document passes an OpenAPI 3.1 validator, in every configuration tried; a broken one does not', async (t) => {
  const configs = [
    '',
    'policies:\n  rate-limit: { limit: 10, onStoreError: closed }\n  cors: { origins: ["https://app.example"], credentials: true }\n  cache: { ttlSeconds: { listPets: 5 } }\n',
    'server:\n  host: 0.0.0.0\n  maxInFlightPerConsumer: 4\npolicies:\n  auth: { bruteForce: null, keys: [{ id: a, hash: "sha256:' + '0'.repeat(64) + '", operations: [listPets] }] }\n  deprecation: { removeAfterSunset: false }\n',
  ];
  for (const yaml of configs) {
    const doc = obj(servedFor(config(yaml)));
    const v = new Validator();
    const result = await v.validate(doc);
    t.same(result, { valid: true }, `valid: ${JSON.stringify(yaml)}`);
    t.equal(v.version, '3.1', 'as OpenAPI 3.1');
  }
  // The validator refuses what is not OpenAPI: the test can fail.
  const broken = obj(servedFor(config()));
  obj(obj(broken.paths)['/pets']).get = { responses: { '200': { content: {} } } };
  t.equal((await validate(broken)).valid, false, 'a response without a description is refused');
  t.equal((await validate({ ...broken, openapi: '3.1.0', info: undefined })).valid, false, 'a document without info is refused');
});

t.test('every operation lists the answers the gateway adds, each in the Error shape', async (t) => {
  const doc = obj(servedFor(config()));
  for (const [path, method] of OPERATIONS) {
    const r = answers(doc, path, method);
    for (const status of ['400', '401', '408', '417', '429', '431', '500', '502', '503', '504', 'default']) {
      t.ok(r[status] !== undefined, `${method} ${path} lists ${status}`);
      t.same(obj(obj(r[status]).content)['application/json'], { schema: { $ref: '#/components/schemas/Error' } }, `${method} ${path} ${status}: the Error shape`);
    }
    t.same(obj(headersOf(r['401'])['WWW-Authenticate']).required, true, `${method} ${path} 401: WWW-Authenticate`);
    t.same(obj(headersOf(r['429'])['Retry-After']).required, false, `${method} ${path} 429: Retry-After (an upstream 429 may lack it)`);
    t.notOk(r['403'], 'no 403 while no key is limited to some operations');
  }
  const create = answers(doc, '/pets', 'post');
  t.ok(create['413'] && create['415'], 'createPet (a request body): 413 and 415');
  t.match(obj(create['413']).description, /16384 bytes/, "413 names new-pet's maxBytes");
  t.match(obj(create['400']).description, /^Body missing required fields.*`malformed_json`.*`invalid_body`.*`invalid_request`/s, "400 keeps the document's text and names the gateway's codes");
  t.match(obj(answers(doc, '/pets', 'get')['400']).description, /`invalid_query`/, 'listPets (a query): invalid_query');
  t.notOk(answers(doc, '/pets', 'get')['413'], 'no 413 without a request body');
  t.same(Object.keys(obj(answers(doc, '/pets', 'get')['200'])).sort(), ['content', 'description', 'headers'], "the document's success answer");
  t.same(obj(doc.components).schemas && obj(obj(doc.components).schemas).Error, obj(obj(shippedDocument().components).schemas).Error, "the interface's Error schema");
  t.same(doc.security, [{ bearer: [] }], 'the bearer scheme on every operation');
  t.same(obj(obj(doc.components).securitySchemes).bearer, { type: 'http', scheme: 'bearer', description: 'The API key as a bearer token: `Authorization: Bearer <API_KEY>`.' });
});

t.test('every code of the catalogue is served somewhere, or its absence is explained', async (t) => {
  const doc = obj(servedFor(config('policies:\n  rate-limit: { limit: 5 }\n  auth: { keys: [{ id: a, hash: "sha256:' + '0'.repeat(64) + '", operations: [getPet] }] }\n')));
  const text = JSON.stringify(doc.paths);
  // Not an operation's answer: said in info.description, or the reference backend's own code,
  // relayed under `default` with every other upstream status.
  const elsewhere: Record<string, string> = { not_implemented: 'CONNECT, no operation', store_full: "the reference backend's 507, relayed as an upstream error" };
  for (const code of Object.keys(CATALOGUE)) {
    if (code in elsewhere) t.notOk(text.includes(`\`${code}\``), `${code}: ${elsewhere[code]}`);
    else t.ok(text.includes(`\`${code}\``), `${code} is named in an answer`);
  }
  t.match(obj(doc.info).description, /404 `not_found`.*405 `method_not_allowed`/s, 'unknown paths and methods are said in info.description');
});

t.test('no extension of the gateway is served, and the interface document is not changed', async (t) => {
  const source = shippedDocument();
  const before = JSON.stringify(source);
  const doc = servedDocument(source, servedOptionsOf(config()));
  t.equal(JSON.stringify(source), before, 'the document given is left as it was');
  const keys = keysOf(doc);
  for (const x of GATEWAY_EXTENSIONS) t.notOk(keys.has(x), `${x} is not served`);
  t.ok(keysOf(source).has('x-list-limit') && keysOf(source).has('x-error-code'), 'while the interface has them');
  // An operator's own extensions are not served either: one may carry internals.
  const own = structuredClone(source);
  obj(obj(obj(own.paths)['/pets']).get)['x-codeSamples'] = [];
  t.notOk(keysOf(servedDocument(own, servedOptionsOf(config()))).has('x-codeSamples'), 'other x- extensions are not served');
});

t.test('deprecated operations: Deprecation, Sunset and Link as the deprecation policy sends them, and 410', async (t) => {
  const doc = obj(servedFor(config()));
  const get = answers(doc, '/pets/{petId}', 'get');
  for (const status of ['200', '401', '404', '410', '429', '502']) {
    const h = headersOf(get[status]);
    t.same(h.Deprecation, { description: obj(h.Deprecation).description, required: true, schema: { type: 'string', const: '@1767225600' } }, `${status}: Deprecation`);
    t.same(obj(h.Sunset).schema, { type: 'string', const: 'Thu, 05 Dec 2030 00:00:00 GMT' }, `${status}: Sunset`);
    t.same(obj(h.Link).schema, { type: 'string', const: '</v1/pets>; rel="successor-version"' }, `${status}: Link`);
  }
  t.equal(obj(headersOf(get['400']).Deprecation).required, false, "400: node's parser may answer before the request is known");
  t.notOk(headersOf(answers(doc, '/pets', 'get')['200']).Deprecation, 'not on listPets');
  t.equal(obj(obj(obj(doc.paths)['/pets/{petId}']).get).deprecated, true, 'deprecated: true stays');

  const configured = obj(servedFor(config('policies:\n  deprecation: { deprecatedAt: "2027-01-01T00:00:00Z", successor: /v2/pets, removeAfterSunset: false, links: [{ href: "https://docs.example/m", rel: deprecation }] }\n')));
  const h = headersOf(answers(configured, '/pets/{petId}', 'get')['200']);
  t.same(obj(h.Deprecation).schema, { type: 'string', const: '@1798761600' }, "the policy's deprecatedAt");
  t.same(obj(h.Link).schema, { type: 'string', const: '</v2/pets>; rel="successor-version", <https://docs.example/m>; rel="deprecation"' }, "the policy's successor and links");
  t.notOk(answers(configured, '/pets/{petId}', 'get')['410'], 'no 410 without removal or brownouts');
});

t.test('what the policy switches on: rate limit, scoped keys, the consumer bound, CORS, the cache', async (t) => {
  const plain = obj(servedFor(config('server:\n  maxInFlightPerConsumer: null\npolicies:\n  auth: { bruteForce: null }\n')));
  const plainList = answers(plain, '/pets', 'get');
  t.notOk(headersOf(plainList['200']).RateLimit, 'no RateLimit without a limit');
  t.notMatch(obj(plainList['429']).description, /rate_limited|too_many_auth_failures|too_many_in_flight/, "429: only the upstream's without them");
  t.notOk(headersOf(plainList['200'])['Access-Control-Allow-Origin'], 'no CORS field without origins');
  t.notOk(headersOf(plainList['200'])['Cache-Status'], 'no Cache-Status without the cache');

  const all = obj(
    servedFor(
      config(
        'policies:\n  rate-limit: { limit: 5 }\n  cors: { origins: ["*"] }\n  cache: { ttlSeconds: { getPet: 5 } }\n  auth: { registry: { redis: { url: "redis://127.0.0.1:1" } } }\n',
      ),
    ),
  );
  const list = answers(all, '/pets', 'get');
  t.match(obj(list['429']).description, /`rate_limited`.*`too_many_auth_failures`.*`too_many_in_flight`/s, "429: the gateway's own codes");
  t.same(Object.keys(headersOf(list['200'])).filter((n) => n.startsWith('RateLimit')), ['RateLimit-Policy', 'RateLimit'], 'RateLimit headers on a 200');
  t.equal(obj(obj(headersOf(list['429']).RateLimit).schema).pattern, '^"default";r=[0-9]+;t=[0-9]+$', 'the RateLimit syntax the policy writes');
  t.equal(obj(headersOf(list['401']).RateLimit).required, false, "a 401: only an upstream's, to a counted consumer");
  t.notOk(headersOf(list['431']).RateLimit, 'not on what is answered before the request is known');
  t.ok(list['403'], 'a registry key may be limited to some operations: 403');
  t.ok(headersOf(list['200'])['Access-Control-Allow-Origin'], 'CORS fields');
  t.match(obj(all.info).description, /preflight/, 'the preflight is said');
  t.ok(headersOf(list['200'])['Cache-Status'] && headersOf(list['200']).Age, 'Cache-Status and Age');
});

t.test('servers: the listener as the policy has it, and the base path', async (t) => {
  t.same(obj(servedFor(config())).servers, [
    { url: 'http://127.0.0.1:8080/v1', description: 'The API listener.' },
    { url: '/v1', description: 'The base path on the address that reaches the gateway (a load balancer, an ingress).' },
  ]);
  t.same(obj(obj(servedFor(config(), 41234)).servers as unknown[])[0], { url: 'http://127.0.0.1:41234/v1', description: 'The API listener.' }, 'the port the listener got');
  t.same((obj(servedFor(config('server:\n  port: 0\n'))).servers as unknown[]).length, 1, 'port 0 and not listening: the base path only');
  const any = obj((obj(servedFor(config('server:\n  host: "::"\n'))).servers as unknown[])[0]);
  t.equal(any.url, 'http://{host}:8080/v1', 'every interface: a {host} variable');
  t.same(obj(any.variables).host, { default: 'localhost', description: 'A name or address of the machine.' });
  t.equal(obj((obj(servedFor(config('server:\n  host: "::1"\n'))).servers as unknown[])[0]).url, 'http://[::1]:8080/v1', 'IPv6 in brackets');
});

t.test('the admin listener serves it as GET /openapi.json', async (t) => {
  let calls = 0;
  const doc = servedFor(config());
  const base = { host: '127.0.0.1', port: 0, readiness: () => READY, metrics: async () => ({ body: '', contentType: 'text/plain' }), deprecations: async () => ({ generatedAt: '', operations: [] }) };
  const admin = await startAdmin({ ...base, openapi: () => (calls++, doc) });
  t.teardown(() => admin.close());
  const url = `http://127.0.0.1:${admin.address().port}/openapi.json`;
  const r = await request(url);
  assertJson(t, r, 200);
  t.same(r.json, doc, 'the document');
  t.equal(r.headers['cache-control'], 'no-store');
  const head = await request(url, { method: 'HEAD' });
  t.equal(head.status, 200, 'HEAD');
  t.equal(head.body, '', 'HEAD: no body');
  t.equal(calls, 2, 'made per request: the policy in force');
  const post = await request(url, { method: 'POST' });
  assertError(t, post, 405, 'method_not_allowed');
  t.equal(post.headers.allow, 'GET, HEAD');
  assertError(t, await request(url, { headers: { host: 'evil.example' } }), 400, 'invalid_request', { message: /Host header/ });

  const without = await startAdmin(base);
  t.teardown(() => without.close());
  const none = await request(`http://127.0.0.1:${without.address().port}/openapi.json`);
  assertError(t, none, 404, 'not_found', { message: /^No admin endpoint at this path: / });
  t.notMatch(none.body, /openapi/, 'a listener without the document does not name it');
});

t.test('no x- extension is served, the operator\'s included; names and data that look like one are kept', async (t) => {
  const doc = shippedDocument();
  const paths = doc.paths as Record<string, Record<string, Record<string, unknown>>>;
  paths['/pets']!.get!['x-upstream-token'] = 'SECRET-TOKEN';
  (doc.components as Record<string, Record<string, Record<string, unknown>>>).securitySchemes!.bearer!['x-key'] = 'SECRET-KEY';
  const schemas = (doc.components as Record<string, Record<string, Record<string, unknown>>>).schemas!;
  (schemas.Pet!.properties as Record<string, unknown>)['x-tag'] = { type: 'string', 'x-internal': 'SECRET-NOTE' };
  const text = JSON.stringify(servedDocument(doc, servedOptionsOf(config())));
  for (const secret of ['SECRET-TOKEN', 'SECRET-KEY', 'SECRET-NOTE', 'x-successor-description', 'x-list-limit']) t.notOk(text.includes(secret), `${secret} is not served`);
  t.ok(text.includes('"x-tag"'), 'a property named x-tag is a name, kept');
});
