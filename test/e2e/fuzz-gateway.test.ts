/**
 * fast-check against a real listening gateway (startGateway, 127.0.0.1 port 0) in front of a
 * recording stub upstream: generated requests over node:http, async properties, bounded runs.
 *
 * The stub answers as a well-behaved upstream unless the (generated) `x-stub` header asks for a
 * fault: an HTML 500, a 404, a 503, a 302, a 418, a list that is not JSON. The gateway forwards
 * that header like any other, so the fuzzer drives both sides.
 *
 * Invariants:
 * - the gateway answers every request and stays up;
 * - every response is the upstream's 2xx (lists enforced: at most `limit`, only the filtered
 *   status) or the Error shape, with `status` equal to the HTTP status and
 *   `application/json; charset=utf-8`; a 5xx only when the stub was told to fail;
 * - a request without the key is answered 401 (or 400 when node cannot parse it at all) and never
 *   reaches the upstream;
 * - nothing invalid is forwarded: every request the stub received is GET /v1/pets with a query of
 *   only `limit=N(&status=S)`, GET /v1/pets/<int64>, or POST /v1/pets with a valid NewPet body,
 *   without the client's Authorization.
 *
 * FC_SEED=<n> replays a run; FC_RUNS sets the number of requests per engine.
 */
import t from 'tap';
import fc from 'fast-check';
import { request as httpRequest, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { ENGINES, JSON_TYPE, request, sendJson, startGateway, startStubUpstream, type RecordedRequest } from '../helpers/servers.js';
import { INT64_MAX, INT64_MIN, isInt64, newPetProblems } from '../helpers/oracle.js';
import { tapText } from '../helpers/assert.js';
const NUM_RUNS = Number(process.env.FC_RUNS ?? 200);
const TIME_LIMIT_MS = 10_000;
const SEED = process.env.FC_SEED === undefined ? Date.now() ^ (Math.random() * 0x7fffffff) : Number(process.env.FC_SEED);
t.comment(`fast-check seed ${SEED} (FC_SEED=${SEED} replays it), ${NUM_RUNS} requests per engine`);

// ---------------------------------------------------------------------------------------------
// The stub upstream

const LIST = [
  { id: 1, name: 'a', categoryId: 1, status: 'available' },
  { id: 2, name: 'b', categoryId: 9223372036854775807n, status: 'pending' },
  { id: 3, name: 'c', categoryId: 3, status: 'sold' },
  { id: 4, name: 'd', categoryId: 4, status: 'available' },
  { id: 5, name: 'e', categoryId: 5, status: 'sold' },
];
const LIST_BODY = '[' + LIST.map((p) => `{"id":${p.id},"name":"${p.name}","categoryId":${p.categoryId},"status":"${p.status}"}`).join(',') + ']';
const STUB_MODES = ['ok', 'ok', 'ok', 'ok', 'e404', 'e500html', 'e503', 'r302', 'e418', 'junk', 'e409'] as const;

function stubAnswer(req: RecordedRequest, res: ServerResponse): void {
  const mode = String(req.headers['x-stub'] ?? 'ok');
  const path = req.url.split('?')[0]!;
  switch (mode) {
    case 'e404':
      return sendJson(res, 404, { message: 'no such pet' });
    case 'e500html':
      res.writeHead(500, { 'content-type': 'text/html' });
      return void res.end('<html><body>Error at /srv/app/index.js:10 password=hunter2 10.0.0.7</body></html>');
    case 'e503':
      return sendJson(res, 503, { error: 'overloaded' }, { 'retry-after': '3' });
    case 'r302':
      res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere', 'content-length': '0' });
      return void res.end();
    case 'e418':
      return sendJson(res, 418, { detail: 'I am a teapot' });
    case 'e409':
      return sendJson(res, 409, { message: 'conflict' });
    case 'junk':
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end('<<not json>>');
  }
  if (req.method === 'POST') return sendJson(res, 201, `{"id":77,${req.body.toString('utf8').trim().slice(1)}`);
  if (path === '/v1/pets') return sendJson(res, 200, LIST_BODY);
  return sendJson(res, 200, `{"id":${path.split('/').pop()},"name":"x","categoryId":1,"status":"available"}`);
}

// ---------------------------------------------------------------------------------------------
// Generators (only what node:http lets a client send)

const HEADER_SAFE = /^[\t\x20-\x7e]*$/;
const PATH_SAFE = /^[\x21-\x7e]*$/;

const int64Text = fc.oneof(fc.bigInt({ min: INT64_MIN, max: INT64_MAX }).map(String), fc.integer({ min: -2, max: 50 }).map(String));
const segment = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom('v1', 'pets') },
  { weight: 2, arbitrary: int64Text },
  {
    weight: 2,
    arbitrary: fc.constantFrom('', '.', '..', '%2e', '%2F', '%zz', 'V1', 'PETS', 'pets;x=1', '%70ets', '9223372036854775808', '1.0', '1e3', '+1', '01', 'abc', '%31', '~', '*'),
  },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom(...'abv1pets/.%;2F-_~!$&\'()*+,=:@09'.split('')), maxLength: 10 }) },
);
const path = fc
  .oneof(
    { weight: 5, arbitrary: fc.constant('/v1/pets') },
    { weight: 4, arbitrary: int64Text.map((s) => `/v1/pets/${s}`) },
    { weight: 2, arbitrary: segment.map((s) => `/v1/pets/${s}`) },
    { weight: 2, arbitrary: fc.array(segment, { maxLength: 4 }).map((segs) => '/' + segs.join('/')) },
    { weight: 1, arbitrary: fc.constantFrom('/', '*', '/v1/pets/', '//v1/pets', '/v1', '/v1/pets/1/', '/health') },
  )
  .filter((p) => PATH_SAFE.test(p) && p.length > 0);
const param = fc.oneof(
  { weight: 4, arbitrary: fc.oneof(fc.integer({ min: -3, max: 150 }).map(String), fc.constantFrom('', '1.5', 'abc', '%2B5', '0005', '99999999999999999999')).map((v) => `limit=${v}`) },
  { weight: 3, arbitrary: fc.constantFrom('available', 'pending', 'sold', 'AVAILABLE', 'avail%61ble', 'lost', '').map((v) => `status=${v}`) },
  { weight: 1, arbitrary: fc.constantFrom('page=2', 'offset=5', 'debug=true', 'id=5', 'limit=5&limit=6', '%zz=1', '=', 'a=b=c') },
);
const query = fc.option(fc.array(param, { maxLength: 3 }).map((ps) => '?' + ps.join('&')), { nil: '', freq: 3 });

interface GenRequest {
  readonly method: string;
  readonly target: string;
  readonly headers: Record<string, string>;
  readonly body: Buffer | undefined;
  readonly chunked: boolean;
}

function requestArb(key: string): fc.Arbitrary<GenRequest> {
  const authorization = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(`Bearer ${key}`, `bearer ${key}`, `BEARER  ${key}`) },
    {
      weight: 3,
      arbitrary: fc.constantFrom<string | undefined>(undefined, '', 'Bearer', `Bearer ${key}x`, `Basic ${key}`, 'Bearer psg_wrong', key, `Bearer\t${key}`, `Bearer "${key}"`),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 30 }).filter((s) => HEADER_SAFE.test(s)) },
  );
  const contentType = fc.constantFrom<string | undefined>(
    'application/json',
    'application/json',
    'application/json; charset=utf-8',
    'APPLICATION/JSON',
    undefined,
    'text/plain',
    'application/jsonx',
    'application/x-www-form-urlencoded',
  );
  const jsonString = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('Rex', 'é', '\ud83d\udc36', '"')).map((s) => JSON.stringify(s));
  const categoryId = fc.oneof({ weight: 5, arbitrary: int64Text }, { weight: 1, arbitrary: fc.constantFrom('9223372036854775808', '1.0', '1e2', '"1"', 'null', '-0') });
  const newPetish = fc
    .record(
      {
        name: jsonString,
        categoryId,
        status: fc.constantFrom('"available"', '"pending"', '"sold"', '"lost"', 'null'),
        id: int64Text,
        colour: jsonString,
      },
      { requiredKeys: [] },
    )
    .map((f) => '{' + Object.entries(f).map(([k, v]) => `"${k}":${v}`).join(',') + '}');
  const valid = fc
    .record({ name: jsonString, categoryId: int64Text, status: fc.option(fc.constantFrom('available', 'pending', 'sold'), { nil: undefined }) })
    .map(({ name, categoryId, status }) => `{"name":${name},"categoryId":${categoryId}${status === undefined ? '' : `,"status":"${status}"`}}`);
  const body = fc.oneof(
    { weight: 4, arbitrary: valid.map((s) => Buffer.from(s)) },
    { weight: 3, arbitrary: newPetish.map((s) => Buffer.from(s)) },
    { weight: 1, arbitrary: fc.json({ maxDepth: 2 }).map((s) => Buffer.from(s)) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)) },
    { weight: 1, arbitrary: fc.constantFrom(Buffer.alloc(0), Buffer.from('{"name":"a","categoryId":1,"name":"b"}'), Buffer.from('\ufeff{"name":"a","categoryId":1}')) },
  );
  return fc
    .record({
      method: fc.oneof(
        { weight: 8, arbitrary: fc.constantFrom('GET', 'POST') },
        { weight: 2, arbitrary: fc.constantFrom('PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH') },
        { weight: 1, arbitrary: fc.stringMatching(/^[A-Z]{1,7}$/).filter((m) => m !== 'CONNECT') },
      ),
      path,
      query,
      authorization,
      contentType,
      stub: fc.constantFrom(...STUB_MODES),
      body: fc.option(body, { nil: undefined, freq: 4 }),
      chunked: fc.boolean(),
    })
    .map(({ method, path, query, authorization, contentType, stub, body, chunked }) => {
      const headers: Record<string, string> = { 'x-stub': stub };
      if (authorization !== undefined) headers.authorization = authorization;
      if (contentType !== undefined) headers['content-type'] = contentType;
      return { method, target: path + query, headers, body: method === 'POST' ? (body ?? Buffer.alloc(0)) : body, chunked };
    });
}

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly raw: Buffer;
}

/** One request on a fresh connection; rejects on a transport error or after 5 s. */
function send(url: string, req: GenRequest, id: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...req.headers, 'x-fuzz-id': id };
    // node frames a body with chunked encoding only for POST, PUT and PATCH; for other methods it
    // would send the bytes unframed (a second, malformed request): give those a Content-Length.
    const chunkable = req.method === 'POST' || req.method === 'PUT' || req.method === 'PATCH';
    if (req.body !== undefined && !(req.chunked && chunkable)) headers['content-length'] = req.body.length;
    // host, port and path given apart: a target such as `*` or `*?x` is no URL to resolve.
    const { hostname, port } = new URL(url);
    const r = httpRequest({ host: hostname, port: Number(port), path: req.target, method: req.method, headers, agent: false });
    const timer = setTimeout(() => r.destroy(new Error('no answer within 5 s')), 5000);
    r.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    r.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, raw: Buffer.concat(chunks) });
      });
    });
    if (req.body !== undefined && req.body.length > 0) r.write(req.body);
    r.end();
  });
}

/** What is wrong with one exchange, or undefined. */
function problemWith(req: GenRequest, res: Answer, key: string, forwarded: RecordedRequest[]): string | undefined {
  const hasKey = Object.values(req.headers).some((v) => v.includes(key));
  if (!hasKey && forwarded.length > 0) return 'a request without the key reached the upstream';
  if (!hasKey && res.status !== 401 && res.status !== 400) return `a request without the key got ${res.status}`;
  if (forwarded.length > 1) return `forwarded ${forwarded.length} times`;
  if (res.status >= 200 && res.status < 300) {
    if (forwarded.length !== 1) return `a ${res.status} that the upstream did not give`;
    const up = forwarded[0]!;
    const mode = String(up.headers['x-stub']);
    const [upPath, upQuery = ''] = up.url.split('?');
    if (mode === 'junk') {
      // response-contract enforces by default: no 2xx that is not JSON passes.
      return 'an answer that is not the interface\'s JSON passed';
    }
    if (mode !== 'ok') return `a ${res.status} from a failing upstream`;
    if (res.headers['content-type'] !== JSON_TYPE) return `content-type ${res.headers['content-type']}`;
    if (up.method === 'POST') return res.status === 201 ? undefined : `createPet answered ${res.status}`;
    if (upPath === '/v1/pets') {
      const m = /^limit=(\d+)(?:&status=(\w+))?$/.exec(upQuery);
      const items = JSON.parse(res.raw.toString('utf8')) as Array<{ status: string }>;
      if (!Array.isArray(items)) return 'listPets 200 without an array';
      if (m !== null && items.length > Number(m[1])) return `${items.length} animals for limit ${m[1]}`;
      if (m?.[2] !== undefined && items.some((p) => p.status !== m[2])) return `an animal of another status than ${m[2]}`;
      if (!res.raw.toString('utf8').includes('9223372036854775807') && items.length >= 2 && m?.[2] === undefined) return 'the int64 categoryId lost its digits';
    }
    return res.status === 200 ? undefined : `a ${res.status} for a GET`;
  }
  if (res.headers['content-type'] !== JSON_TYPE) return `a ${res.status} with content-type ${res.headers['content-type']}`;
  if (req.method === 'HEAD') return res.raw.length === 0 ? undefined : 'a body on HEAD';
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(res.raw.toString('utf8')) as Record<string, unknown>;
  } catch {
    return `a ${res.status} whose body is not JSON: ${res.raw.toString('utf8').slice(0, 100)}`;
  }
  if (body === null || typeof body !== 'object' || JSON.stringify(Object.keys(body).sort()) !== '["code","message","status"]') return `not the Error shape: ${res.raw.toString('utf8').slice(0, 200)}`;
  if (body.status !== res.status) return `status field ${String(body.status)} on HTTP ${res.status}`;
  if (typeof body.code !== 'string' || typeof body.message !== 'string' || body.message === '') return 'code or message missing';
  if (res.headers['content-length'] !== undefined && Number(res.headers['content-length']) !== res.raw.length) return 'content-length differs from the body';
  if (/hunter2|10\.0\.0\.7|\/srv\/app|<html/i.test(res.raw.toString('utf8'))) return 'an upstream secret or page leaked';
  if (res.status >= 500) {
    const mode = forwarded[0] === undefined ? undefined : String(forwarded[0].headers['x-stub']);
    if (mode === undefined || mode === 'ok') return `a ${res.status} ${String(body.code)} while the upstream behaved`;
  }
  return undefined;
}

/** What is wrong with one request the upstream received (the forwarding invariants). */
function forwardedProblem(up: RecordedRequest): { problem: string | undefined; queryOnOtherOperation: boolean } {
  const [p, q] = [up.url.split('?')[0]!, up.url.includes('?') ? up.url.slice(up.url.indexOf('?') + 1) : undefined];
  let problem: string | undefined;
  let queryOnOtherOperation = false;
  if (up.headers.authorization !== undefined) problem = 'the client Authorization was forwarded';
  else if (up.method === 'GET' && p === '/v1/pets') {
    const m = /^limit=(\d{1,3})(&status=(available|pending|sold))?$/.exec(q ?? '');
    if (m === null || Number(m[1]) < 1 || Number(m[1]) > 100) problem = `listPets query ${JSON.stringify(q)}`;
  } else if (up.method === 'GET' && /^\/v1\/pets\/[^/]+$/.test(p)) {
    if (!isInt64(p.slice('/v1/pets/'.length))) problem = `getPet path ${p}`;
    queryOnOtherOperation = q !== undefined;
  } else if (up.method === 'POST' && p === '/v1/pets') {
    const problems = newPetProblems(up.body, 'reject');
    if (problems.length > 0) problem = `createPet body ${JSON.stringify(up.body.toString('utf8').slice(0, 100))}: ${problems.join('; ')}`;
    else if (!/^application\/json/i.test(String(up.headers['content-type']))) problem = `createPet content-type ${up.headers['content-type']}`;
    queryOnOtherOperation = q !== undefined;
  } else problem = `${up.method} ${up.url} is no operation of the interface`;
  return { problem, queryOnOtherOperation };
}

for (const engine of ENGINES) {
  t.test(`engine ${engine}: generated requests against a listening gateway`, async (t) => {
    const stub = await startStubUpstream(t, stubAnswer);
    // The stub's mode and the request's id header cross the request allowlist only because this policy adds them.
    const gw = await startGateway(t, { upstream: { url: `${stub.origin}/v1`, timeouts: { connectMs: 1000, headersMs: 3000, bodyMs: 3000 } }, headers: { request: { allow: ['x-stub', 'x-fuzz-id'] } } }, { engine });
    let n = 0;
    const statuses = new Map<number, number>();
    const queries: string[] = [];
    const started = Date.now();
    const details = await fc.check(
      fc.asyncProperty(requestArb(gw.key), async (req) => {
        const id = `${engine}-${n++}`;
        let res: Answer;
        try {
          res = await send(gw.url, req, id);
        } catch (err) {
          throw new Error(`no answer: ${(err as Error).message}`);
        }
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        const forwarded = stub.requests.filter((r) => r.headers['x-fuzz-id'] === id);
        for (const up of forwarded) {
          const f = forwardedProblem(up);
          if (f.problem !== undefined) throw new Error(`forwarded: ${f.problem}`);
          if (f.queryOnOtherOperation) queries.push(`${req.method} ${req.target} -> ${up.method} ${up.url}`);
        }
        const problem = problemWith(req, res, gw.key, forwarded);
        if (problem !== undefined) throw new Error(`${problem} (HTTP ${res.status}: ${res.raw.toString('utf8').slice(0, 200)})`);
      }),
      { numRuns: NUM_RUNS, seed: SEED, interruptAfterTimeLimit: TIME_LIMIT_MS, endOnFailure: true },
    );
    t.comment(`${details.numRuns} requests in ${Date.now() - started} ms; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}; ${stub.requests.length} forwarded`);
    t.notOk(details.failed, details.failed ? tapText(`counterexample ${JSON.stringify(details.counterexample)}: ${String(details.errorInstance)}`) : 'every invariant holds');
    t.ok(details.numRuns >= Math.min(50, NUM_RUNS), `enough requests within the time limit (${details.numRuns})`);
    t.ok(stub.requests.length > 0 && [...statuses.keys()].some((s) => s >= 400), 'the generators reach the upstream and several errors');
    t.strictSame(queries.slice(0, 3), [], 'getPet and createPet forward no query of the client (the interface defines none)');

    // Still up, and still right.
    const after = await request(`${gw.url}/v1/pets?limit=2&status=sold`, { headers: { authorization: `Bearer ${gw.key}` } });
    t.equal(after.status, 200, 'the gateway still answers');
    t.strictSame(after.json, [{ id: 3, name: 'c', categoryId: 3, status: 'sold' }, { id: 5, name: 'e', categoryId: 5, status: 'sold' }], 'and still enforces the list');
  });
}

for (const engine of ENGINES) t.test(`engine ${engine}: a query on getPet or createPet does not reach the upstream`, async (t) => {
  const stub = await startStubUpstream(t, stubAnswer);
  const gw = await startGateway(t, { upstream: { url: `${stub.origin}/v1` } }, { engine });
  const auth = { authorization: `Bearer ${gw.key}` };
  const get = await request(`${gw.url}/v1/pets/1?debug=true&id=2`, { headers: auth });
  t.equal(get.status, 200);
  const post = await request(`${gw.url}/v1/pets?overwrite=1`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"name":"a","categoryId":1}' });
  t.equal(post.status, 201);
  t.equal(stub.requests[0]?.url, '/v1/pets/1', 'getPet: no query upstream');
  t.equal(stub.requests[1]?.url, '/v1/pets', 'createPet: no query upstream');
});

for (const engine of ENGINES) {
  t.test(`engine ${engine}: after a response that says Connection: close, nothing more is sent`, async (t) => {
    const gw = await startGateway(t, {}, { engine });
    const port = Number(new URL(gw.url).port);
    // What node's http client sends for a DELETE with a body and no Content-Length: the body
    // bytes unframed, after a request that asked to close the connection.
    const cases: Array<[string, string]> = [
      ['unauthenticated DELETE', 'DELETE /v1/pets HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: abc\r\n\r\nx'],
      ['authenticated GET', `GET /v1/pets?limit=1 HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer ${gw.key}\r\n\r\n{"a":1}`],
    ];
    for (const [name, bytes] of cases) {
      const received = await new Promise<string>((resolve) => {
        const socket = connect(port, '127.0.0.1');
        let data = '';
        const timer = setTimeout(() => socket.destroy(), 2000);
        socket.on('data', (c: Buffer) => (data += c.toString('latin1')));
        socket.on('error', () => undefined);
        socket.on('close', () => {
          clearTimeout(timer);
          resolve(data);
        });
        socket.write(bytes);
      });
      const responses = received.match(/HTTP\/1\.1 \d{3} /g) ?? [];
      t.match(received, /^HTTP\/1\.1 (200|401) /, `${name}: the request is answered`);
      t.match(received, /\r\nconnection: close\r\n/i, `${name}: with Connection: close`);
      t.equal(responses.length, 1, `${name}: and nothing after it (RFC 9112 section 9.6): ${JSON.stringify(responses)}`);
    }
  });
}
