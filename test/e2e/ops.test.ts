/**
 * Operations end to end, on the built CLI (`serve --policy FILE`), each gateway its own
 * process on 127.0.0.1 port 0 with its admin listener on a free port, in front of a stub upstream:
 *
 * - /metrics scraped and parsed with a Prometheus text-format parser (test/helpers/prom.ts) after
 *   known traffic: exact deltas per series; a flood of random paths, methods and bad keys adds no
 *   gateway series once every class of request has been seen (the label sets are bounded);
 * - access lines: one JSON line per request on stdout, with the fields of the issue, for every
 *   error path; no key, no Authorization value, no query value other than limit/status;
 * - request ids: a valid X-Request-Id echoed (errors included) and forwarded; an invalid or absent
 *   one replaced by a generated one, echoed and forwarded; W3C trace context forwarded when valid,
 *   made anew otherwise;
 * - readiness: /readyz 503 "draining" as soon as SIGTERM arrives while a request is in flight, and
 *   503 "upstream unreachable" once the upstream is gone and a call was refused (with
 *   server.admin.readiness.upstream: true; the default only shows it in the detail); /healthz 200;
 * - /deprecations names the consumer after getPet calls.
 *
 * Two processes per engine, started concurrently when the file loads: `main` (traffic, ids,
 * report, then the drain, which ends it) and `down` (its upstream is closed, then the flood).
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import { assertError, type TapTest } from '../helpers/assert.js';
import { find, parseExposition, value, type Scrape } from '../helpers/prom.js';
import {
  bearer,
  ENGINES,
  ensureBuilt,
  forEachEngine,
  request,
  sendJson,
  spawnCliUntil,
  startStubUpstream,
  tempDir,
  testKey,
  waitFor,
  type Engine,
  type ProcessHandle,
  type RecordedRequest,
  type Response,
  type StubUpstream,
  logEntries,
  type LogEntry,
} from '../helpers/servers.js';

ensureBuilt();

const dir = tempDir(t, 'ops');
const KEY = testKey();
/** The consumer id of the first key of PETSTORE_API_KEYS (src/policies/auth/index.ts). */
const CONSUMER = 'PETSTORE_API_KEYS#1';
/** A query value that must never reach a log line. */
const SECRET = 'hunter2';
/** The banner (stderr), the start probe's line and the admin line (stdout): the gateway is up and quiet. */
const READY =
  /^(?=[\s\S]*petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) )(?=[\s\S]*"msg":"upstream probe: )(?=[\s\S]*"msg":"admin listening)/;
const VALID_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;
const HEADERS_MS = 400;

// ---------------------------------------------------------------------------------------------
// Processes

function accessLines(handle: ProcessHandle): LogEntry[] {
  return logEntries(handle).filter((e) => e.log === 'access');
}

/** The access line of each request id, once every one of them has been written (bounded wait). */
async function linesFor(handle: ProcessHandle, ids: readonly string[]): Promise<Map<string, LogEntry[]>> {
  return waitFor(
    `access lines for ${ids.length} requests`,
    () => {
      const by = new Map<string, LogEntry[]>();
      for (const e of accessLines(handle)) {
        const id = e.reqId as string;
        if (ids.includes(id)) by.set(id, [...(by.get(id) ?? []), e]);
      }
      return ids.every((id) => by.has(id)) ? by : undefined;
    },
    10_000,
  );
}

interface Gw {
  readonly url: string;
  readonly admin: string;
  readonly handle: ProcessHandle;
  readonly stub: StubUpstream;
}

async function serve(name: string, engine: Engine, stub: StubUpstream, extra: Record<string, unknown> = {}, auth: Record<string, unknown> = {}): Promise<Gw> {
  const file = join(dir, `${name}-${engine}.yaml`);
  writeFileSync(
    file,
    JSON.stringify({
      version: 1,
      upstream: { url: `${stub.origin}/v1`, timeouts: { headersMs: HEADERS_MS } },
      ...extra,
      policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS', ...auth } },
    }),
  );
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--host', '127.0.0.1', '--port', '0', '--engine', engine], READY, {
    env: { LOG_LEVEL: 'info', PETSTORE_API_KEYS: KEY },
    timeoutMs: 30_000,
  });
  const adminLine = logEntries(handle).find((e) => typeof e.msg === 'string' && e.msg.startsWith('admin listening'));
  if (adminLine === undefined || typeof adminLine.url !== 'string') throw new Error(`no admin line on stdout:\n${handle.output().stdout}`);
  return { url: match[1]!, admin: adminLine.url, handle, stub };
}

function pet(id: number): string {
  return `{"id":${id},"name":"pet${id}","categoryId":1,"status":"available"}`;
}

/** Requests whose X-Request-Id starts with `hold-` wait until the test releases them. */
const held = new Map<string, ServerResponse>();

/**
 * The upstream of the `main` gateways. By the request id the gateway forwards: `reset-` has its
 * connection destroyed (502), `hang-` is never answered (504 after headersMs), `hold-` waits for
 * `release`, `missing-` gets a legacy HTML 404 page; everything else gets a conforming answer.
 */
function mainStub(req: RecordedRequest, res: ServerResponse): void {
  const id = String(req.headers['x-request-id'] ?? '');
  if (id.startsWith('reset-')) return void res.socket?.destroy();
  if (id.startsWith('hang-')) return;
  if (id.startsWith('hold-')) return void held.set(id, res);
  if (id.startsWith('missing-')) {
    // A legacy error page: the gateway answers pet_not_found in the Error shape.
    res.writeHead(404, { 'content-type': 'text/html' });
    return void res.end('<html><body><h1>404 Not Found</h1></body></html>');
  }
  answer(req, res);
}

function answer(req: RecordedRequest, res: ServerResponse, headers: Record<string, string> = {}): void {
  const path = req.url.split('?')[0]!;
  if (req.method === 'POST') return sendJson(res, 201, `{"id":1,${req.body.toString('utf8').slice(1)}`, headers);
  if (path === '/v1/pets') return sendJson(res, 200, `[${pet(1)},${pet(2)}]`, headers);
  return sendJson(res, 200, pet(Number(path.split('/').pop())), headers);
}

function release(id: string): void {
  const res = held.get(id);
  held.delete(id);
  if (res !== undefined && !res.destroyed) sendJson(res, 200, `[${pet(1)}]`);
}

// Every process starts now, concurrently; the tests await them.
const processes = Object.fromEntries(
  ENGINES.map((e) => {
    const mainUp = startStubUpstream(t, mainStub);
    // `Connection: close` on every answer: no kept-alive connection to the stub survives it, so the
    // call after it closes is refused at connect (not reset on a stale pooled socket).
    const downUp = startStubUpstream(t, (req, res) => answer(req, res, { connection: 'close' }));
    const main = mainUp.then((s) => serve('main', e, s));
    // A low brute-force limit so the flood's warm-up locks the address out early (see the flood test).
    // Readiness follows the upstream only on request (server.admin.readiness.upstream): `down` asks.
    const down = downUp.then((s) => serve('down', e, s, { server: { admin: { readiness: { upstream: true } } } }, { bruteForce: { maxFailures: 5, windowSeconds: 3600 } }));
    return [e, { main, down }];
  }),
) as Record<Engine, { main: Promise<Gw>; down: Promise<Gw> }>;
for (const p of Object.values(processes).flatMap((g) => [g.main, g.down])) p.catch(() => undefined);

// ---------------------------------------------------------------------------------------------
// Helpers

async function scrape(gw: Gw): Promise<Scrape> {
  const res = await request(`${gw.admin}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}: ${res.body.slice(0, 200)}`);
  if (!String(res.headers['content-type']).startsWith('text/plain')) throw new Error(`/metrics content-type ${res.headers['content-type']}`);
  return parseExposition(res.body);
}

/** A sample's value, 0 when the series does not exist (yet). */
function val(s: Scrape, name: string, labels: Record<string, string>): number {
  return value(s, name, labels) ?? 0;
}

const SERVER = 'http_server_request_duration_seconds';
const CLIENT = 'http_client_request_duration_seconds';
const server = (method: string, route: string, status: number) => ({ http_request_method: method, http_route: route, http_response_status_code: String(status), network_protocol_version: '1.1' });

/** The gateway's own series (name and labels); process/Node default metrics come and go with GC kinds. */
function gatewaySeries(s: Scrape): Set<string> {
  const out = new Set<string>();
  for (const x of s.samples) {
    if (!x.name.startsWith('http_') && !x.name.startsWith('petstore_gateway_')) continue;
    const labels = Object.entries(x.labels)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`);
    out.add(`${x.name}{${labels.join(',')}}`);
  }
  return out;
}

function rand(n = 9): string {
  return randomBytes(n).toString('base64url');
}

/** Asserts that no line of the process's stdout holds a secret, and that stdout is NDJSON only. */
function assertNoSecrets(t: TapTest, handle: ProcessHandle, secrets: readonly string[]): void {
  const stdout = handle.output().stdout;
  const lines = stdout.split('\n').filter((l) => l !== '');
  const notJson = lines.filter((l) => {
    try {
      return typeof JSON.parse(l) !== 'object';
    } catch {
      return true;
    }
  });
  t.strictSame(notJson.slice(0, 3), [], 'stdout is NDJSON: every line a JSON object');
  t.strictSame(
    secrets.filter((s) => stdout.includes(s)).map((s) => `${s.slice(0, 6)}...`),
    [],
    `stdout holds none of ${secrets.length} secrets (keys, credentials, a query value)`,
  );
  const access = accessLines(handle);
  t.strictSame(
    access.map((e) => JSON.stringify(e)).filter((l) => /bearer/i.test(l)).slice(0, 3),
    [],
    'no access line holds "Bearer"',
  );
  t.strictSame(
    access.flatMap((e) => Object.keys(e)).filter((k) => /authorization|header|query|url/i.test(k)).slice(0, 3),
    [],
    'no access line has an Authorization, headers, query or URL field',
  );
}

// ---------------------------------------------------------------------------------------------
// The scenarios

interface Case {
  readonly name: string;
  readonly method?: string;
  readonly path: string;
  readonly key?: string | null;
  readonly body?: string;
  readonly prefix?: string;
  readonly status: number;
  readonly code?: string;
  readonly route: string;
  readonly operation?: string;
  readonly upstreamStatus?: number;
  readonly upstreamFailure?: string;
  readonly limit?: string;
  readonly statusFilter?: string;
}

const BAD_KEY = testKey();
const LIST = `/v1/pets?limit=5&status=available&secret=${SECRET}`;
const CASES: readonly Case[] = [
  ...[1, 2, 3].map((i) => ({ name: `listPets ${i}`, path: LIST, status: 200, route: '/v1/pets', operation: 'listPets', upstreamStatus: 200, limit: '5', statusFilter: 'available' })),
  ...[1, 2].map((i) => ({ name: `getPet ${i}`, path: '/v1/pets/1', status: 200, route: '/v1/pets/{petId}', operation: 'getPet', upstreamStatus: 200 })),
  { name: 'listPets without a key', path: '/v1/pets', key: null, status: 401, code: 'missing_api_key', route: '/v1/pets' },
  { name: 'unknown path without a key', path: `/nope?secret=${SECRET}`, key: null, status: 401, code: 'missing_api_key', route: 'unknown' },
  { name: 'unknown path with a key', path: '/nope', status: 404, code: 'not_found', route: 'unknown' },
  { name: 'a bad key', path: '/v1/pets', key: BAD_KEY, status: 401, code: 'invalid_api_key', route: '/v1/pets' },
  { name: 'DELETE /v1/pets', method: 'DELETE', path: '/v1/pets', status: 405, code: 'method_not_allowed', route: '/v1/pets' },
  { name: 'limit out of range', path: `/v1/pets?limit=500&secret=${SECRET}`, status: 400, code: 'invalid_query', route: '/v1/pets' },
  { name: 'a body too large', method: 'POST', path: '/v1/pets', body: `{"name":"${'x'.repeat(17_000)}","categoryId":1}`, status: 413, code: 'payload_too_large', route: '/v1/pets' },
  // A listPets without `limit` is logged with the limit in force (the interface's default, 20).
  { name: 'the upstream resets', path: '/v1/pets', prefix: 'reset', status: 502, code: 'upstream_unavailable', route: '/v1/pets', operation: 'listPets', upstreamFailure: 'reset', limit: '20' },
  { name: 'the upstream hangs', path: '/v1/pets', prefix: 'hang', status: 504, code: 'upstream_timeout', route: '/v1/pets', operation: 'listPets', upstreamFailure: 'headers_timeout', limit: '20' },
  // The upstream's own error, rewritten by the gateway: its code is logged as well.
  { name: 'the upstream has no such pet', path: '/v1/pets/404', prefix: 'missing', status: 404, code: 'pet_not_found', route: '/v1/pets/{petId}', operation: 'getPet', upstreamStatus: 404 },
];

function send(gw: Gw, c: Case, id: string): Promise<Response> {
  const key = c.key === undefined ? KEY : c.key;
  const headers: Record<string, string> = { 'x-request-id': id };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (c.body !== undefined) headers['content-type'] = 'application/json';
  return request(`${gw.url}${c.path}`, { method: c.method ?? 'GET', headers, body: c.body, timeoutMs: 10_000 });
}

forEachEngine(t, async (t, engine) => {
  await t.test('main gateway: metrics, access lines, request ids, deprecations, drain', async (t) => {
    const gw = await processes[engine].main;
    const testStart = Date.now();

    t.equal((await request(`${gw.admin}/readyz`)).status, 200, '/readyz 200 while serving');
    const before = await scrape(gw);

    // Known traffic, one request at a time (the counts below are exact), each with its own id.
    const sent: Array<{ c: Case; id: string; res: Response }> = [];
    for (const [i, c] of CASES.entries()) {
      const id = `${c.prefix ?? 'ops'}-${engine}-${i}.${rand(6)}`;
      sent.push({ c, id, res: await send(gw, c, id) });
    }

    await t.test('every answer: its status, the Error shape, the request id echoed', async (t) => {
      for (const { c, id, res } of sent) {
        if (c.code !== undefined) assertError(t, res, c.status, c.code, { message: 'any' });
        else t.equal(res.status, c.status, `${c.name}: ${res.status} ${res.body.slice(0, 120)}`);
        t.equal(res.headers['x-request-id'], id, `${c.name}: X-Request-Id echoed`);
      }
    });

    await t.test('/metrics: exact counts after the known traffic', async (t) => {
      const after = await scrape(gw);
      t.equal(after.types.get(SERVER), 'histogram', `${SERVER} is a histogram`);
      t.equal(after.types.get(CLIENT), 'histogram', `${CLIENT} is a histogram`);
      const d = (name: string, labels: Record<string, string>) => val(after, name, labels) - val(before, name, labels);
      const count = `${SERVER}_count`;
      t.equal(d(count, server('GET', '/v1/pets', 200)), 3, 'server: GET /v1/pets 200 x3');
      t.equal(d(count, server('GET', '/v1/pets/{petId}', 200)), 2, 'server: GET /v1/pets/{petId} 200 x2');
      t.equal(d(count, server('GET', 'unknown', 401)), 1, 'server: GET unknown 401 x1');
      t.equal(d(count, server('GET', 'unknown', 404)), 1, 'server: GET unknown 404 x1');
      t.equal(d(count, server('GET', '/v1/pets', 401)), 2, 'server: GET /v1/pets 401 x2 (no key, bad key)');
      t.equal(d(count, server('DELETE', '/v1/pets', 405)), 1, 'server: DELETE /v1/pets 405');
      t.equal(d(count, server('GET', '/v1/pets', 400)), 1, 'server: GET /v1/pets 400');
      t.equal(d(count, server('POST', '/v1/pets', 413)), 1, 'server: POST /v1/pets 413');
      t.equal(d(count, server('GET', '/v1/pets', 502)), 1, 'server: GET /v1/pets 502');
      t.equal(d(count, server('GET', '/v1/pets', 504)), 1, 'server: GET /v1/pets 504');
      const total = find(after, count).reduce((n, s) => n + s.value, 0) - find(before, count).reduce((n, s) => n + s.value, 0);
      t.equal(total, CASES.length, 'server: one observation per request, no more');
      // The 504 waited headersMs (400 ms) at least: never in a bucket of 0.25 s or less.
      t.equal(val(after, `${SERVER}_bucket`, { ...server('GET', '/v1/pets', 504), le: '0.25' }), 0, 'the 504 is not in the le=0.25 bucket');
      t.equal(val(after, `${SERVER}_bucket`, { ...server('GET', '/v1/pets', 504), le: '+Inf' }), val(after, count, server('GET', '/v1/pets', 504)), '+Inf bucket = count');

      t.equal(d('petstore_gateway_rejections_total', { policy: 'auth', code: 'missing_api_key' }), 2, 'rejections: auth missing_api_key x2');
      t.equal(d('petstore_gateway_rejections_total', { policy: 'auth', code: 'invalid_api_key' }), 1, 'rejections: auth invalid_api_key x1');
      t.equal(d('petstore_gateway_deprecated_requests_total', { operation: 'getPet', consumer: CONSUMER }), 3, `deprecated: getPet by ${CONSUMER} x3 (a 404 is a call too)`);
      t.equal(find(after, 'petstore_gateway_deprecated_requests_total').length, 1, 'deprecated: one series (listPets is not counted)');

      const client = (route: string, extra: Record<string, string>) => ({ http_request_method: 'GET', http_route: route, ...extra });
      t.equal(d(`${CLIENT}_count`, client('/v1/pets', { http_response_status_code: '200' })), 3, 'client: GET /v1/pets 200 x3');
      t.equal(d(`${CLIENT}_count`, client('/v1/pets/{petId}', { http_response_status_code: '200' })), 2, 'client: GET /v1/pets/{petId} 200 x2');
      t.equal(d(`${CLIENT}_count`, client('/v1/pets/{petId}', { http_response_status_code: '404' })), 1, 'client: GET /v1/pets/{petId} 404 x1 (the upstream\'s status)');
      t.equal(d(count, server('GET', '/v1/pets/{petId}', 404)), 1, 'server: GET /v1/pets/{petId} 404 x1');
      t.equal(d(`${CLIENT}_count`, client('/v1/pets', { error_type: 'reset' })), 1, 'client: error_type reset x1');
      t.equal(d(`${CLIENT}_count`, client('/v1/pets', { error_type: 'headers_timeout' })), 1, 'client: error_type headers_timeout x1');
      t.ok(d(`${CLIENT}_sum`, client('/v1/pets', { error_type: 'headers_timeout' })) >= HEADERS_MS / 1000 - 0.01, 'client: the timed-out call lasted headersMs at least');
      const clientTotal = find(after, `${CLIENT}_count`).reduce((n, s) => n + s.value, 0) - find(before, `${CLIENT}_count`).reduce((n, s) => n + s.value, 0);
      t.equal(clientTotal, 8, 'client: one observation per upstream call (6 answered, 2 failed), none for requests refused before it');

      t.equal(d('petstore_gateway_upstream_failures_total', { kind: 'reset' }), 1, 'upstream failures: reset x1');
      t.equal(d('petstore_gateway_upstream_failures_total', { kind: 'headers_timeout' }), 1, 'upstream failures: headers_timeout x1');
      t.equal(val(after, 'petstore_gateway_upstream_failures_total', { kind: 'refused' }), 0, 'upstream failures: refused exported, 0');
      t.equal(val(after, 'petstore_gateway_circuit_breaker_open', {}), 0, 'circuit breaker gauge 0 (none configured)');
      t.ok(find(after, 'process_cpu_user_seconds_total').length === 1, 'process metrics exported');
    });

    await t.test('access lines: one per request, their fields, for every error path', async (t) => {
      const by = await linesFor(
        gw.handle,
        sent.map((s) => s.id),
      );
      for (const { c, id, res } of sent) {
        const lines = by.get(id)!;
        t.equal(lines.length, 1, `${c.name}: exactly one access line`);
        const l = lines[0]!;
        t.equal(l.msg, 'request', `${c.name}: msg`);
        t.equal(l.level, 30, `${c.name}: info level`);
        t.ok(typeof l.time === 'string' && Date.parse(l.time) >= testStart - 1000, `${c.name}: ISO time ${String(l.time)}`);
        t.equal(l.method, c.method ?? 'GET', `${c.name}: method`);
        t.equal(l.route, c.route, `${c.name}: route`);
        if (c.operation !== undefined) t.equal(l.operation, c.operation, `${c.name}: operation`);
        t.equal(l.status, c.status, `${c.name}: status`);
        t.equal(l.errorCode, c.code, `${c.name}: error code`);
        if (c.code === 'missing_api_key' || c.code === 'invalid_api_key') t.equal(l.rejectedBy, 'auth', `${c.name}: rejected by auth`);
        t.ok(typeof l.durationMs === 'number' && l.durationMs >= 0, `${c.name}: durationMs`);
        t.equal(l.upstreamStatus, c.upstreamStatus, `${c.name}: upstream status`);
        t.equal(l.upstreamFailure, c.upstreamFailure, `${c.name}: upstream failure`);
        const called = c.upstreamStatus !== undefined || c.upstreamFailure !== undefined;
        t.equal(typeof l.upstreamMs, called ? 'number' : 'undefined', `${c.name}: upstreamMs ${called ? 'present' : 'absent'}`);
        if (c.upstreamFailure === 'headers_timeout') t.ok((l.upstreamMs as number) >= HEADERS_MS - 10, `${c.name}: upstreamMs >= headersMs`);
        t.equal(l.bytesOut, res.raw.length, `${c.name}: bytesOut = the body bytes the client got`);
        t.equal(typeof l.bytesIn, 'number', `${c.name}: bytesIn`);
        t.equal(l.client, '127.0.0.1', `${c.name}: client address`);
        const authenticated = c.key === undefined && c.status !== 401;
        t.equal(l.consumer, authenticated ? CONSUMER : undefined, `${c.name}: consumer ${authenticated ? CONSUMER : 'absent'}`);
        t.equal(l.limit, c.limit, `${c.name}: limit`);
        t.equal(l.statusFilter, c.statusFilter, `${c.name}: status filter`);
      }
      assertNoSecrets(t, gw.handle, [KEY, BAD_KEY, SECRET]);
      const forwarded = gw.stub.requests.filter((r) => sent.some((s) => s.id === r.headers['x-request-id']));
      t.equal(forwarded.length, 8, 'the stub got the 8 calls that passed the policies');
      t.notOk(forwarded.some((r) => r.url.includes(SECRET)), 'the unknown query parameter was not forwarded either');
    });

    await t.test('request ids and trace context', async (t) => {
      const upstreamOf = (id: string) => gw.stub.requests.find((r) => r.headers['x-request-id'] === id);
      const list = (headers: Record<string, string>) => request(`${gw.url}/v1/pets`, { headers: { ...bearer(KEY), ...headers } });

      const valid = `Abc.123:xyz_-${rand(6)}`;
      const res = await list({ 'x-request-id': valid });
      t.equal(res.status, 200);
      t.equal(res.headers['x-request-id'], valid, 'a valid id is echoed');
      t.ok(upstreamOf(valid), 'and forwarded to the upstream');
      const longest = 'a'.repeat(127) + 'Z';
      t.equal((await list({ 'x-request-id': longest })).headers['x-request-id'], longest, '128 characters is still valid');

      for (const [name, bad] of [
        ['200 characters', 'b'.repeat(200)],
        ['spaces', 'not a valid id'],
        ['a slash', 'a/b'],
      ] as const) {
        const r = await list({ 'x-request-id': bad });
        const got = r.headers['x-request-id'];
        t.ok(typeof got === 'string' && VALID_ID.test(got) && got !== bad, `${name}: replaced by a generated id (${String(got)})`);
        t.ok(upstreamOf(got as string), `${name}: the generated id is the one forwarded`);
      }
      const absent1 = (await list({})).headers['x-request-id'] as string;
      const absent2 = (await list({})).headers['x-request-id'] as string;
      t.ok(VALID_ID.test(absent1) && absent1 !== absent2, `absent: a new id per request (${absent1}, ${absent2})`);
      t.ok(upstreamOf(absent1) && upstreamOf(absent2), 'absent: the generated ids are forwarded');

      for (const [name, path, headers, status] of [
        ['401', '/v1/pets', {}, 401],
        ['404', '/nowhere', bearer(KEY), 404],
        ['405', '/v1/pets/1', bearer(KEY), 405],
      ] as const) {
        const id = `err-${name}-${rand(4)}`;
        const r = await request(`${gw.url}${path}`, { method: name === '405' ? 'PUT' : 'GET', headers: { ...headers, 'x-request-id': id } });
        t.equal(r.status, status, `${name}: status`);
        t.equal(r.headers['x-request-id'], id, `${name}: a valid id is echoed on an error`);
        const r2 = await request(`${gw.url}${path}`, { method: name === '405' ? 'PUT' : 'GET', headers: { ...headers, 'x-request-id': 'x y' } });
        t.ok(VALID_ID.test(String(r2.headers['x-request-id'])) && r2.headers['x-request-id'] !== 'x y', `${name}: an invalid id is replaced on an error`);
      }

      const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      const ts = 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7';
      const tid = `trace-ok-${rand(4)}`;
      t.equal((await list({ 'x-request-id': tid, traceparent: tp, tracestate: ts })).status, 200);
      // The ids are kept; the sampled flag only from a trusted proxy (this client is not one), so
      // a client cannot make the upstream trace every request (it was forwarded as 01 before).
      t.equal(upstreamOf(tid)?.headers.traceparent, `${tp.slice(0, 53)}00`, 'a valid traceparent is forwarded with its ids, unsampled');
      t.equal(upstreamOf(tid)?.headers.tracestate, ts, 'with its tracestate');

      for (const [name, bad] of [
        ['upper-case hex', '00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01'],
        ['all-zero trace id', '00-00000000000000000000000000000000-00f067aa0ba902b7-01'],
        ['garbage', 'not-a-traceparent'],
      ] as const) {
        const id = `trace-bad-${rand(4)}`;
        t.equal((await list({ 'x-request-id': id, traceparent: bad, tracestate: ts })).status, 200);
        const up = upstreamOf(id);
        t.match(up?.headers.traceparent, TRACEPARENT, `${name}: replaced by a new valid traceparent`);
        t.not(up?.headers.traceparent, bad, `${name}: not the client's`);
        t.equal(up?.headers.tracestate, undefined, `${name}: its tracestate is not forwarded`);
      }
      const nid = `trace-none-${rand(4)}`;
      await list({ 'x-request-id': nid });
      t.match(upstreamOf(nid)?.headers.traceparent, TRACEPARENT, 'absent: a new traceparent is made');
    });

    await t.test('/deprecations lists the consumer after getPet calls', async (t) => {
      const res = await request(`${gw.admin}/deprecations`);
      t.equal(res.status, 200);
      const report = res.json as { operations: Array<{ operation: string; sunset: string; consumers: Array<Record<string, unknown>> }> };
      const op = report.operations.find((o) => o.operation === 'getPet');
      t.ok(op, 'getPet is in the report');
      t.equal(op?.sunset, '2030-12-05T00:00:00Z', 'with its sunset');
      t.equal(op?.consumers.length, 1, 'one consumer');
      const c = op?.consumers[0];
      t.equal(c?.consumer, CONSUMER, 'named by key id');
      t.equal(c?.count, 3, 'three calls (two answered, one 404)');
      t.ok(Date.parse(String(c?.firstSeen)) >= testStart - 1000 && Date.parse(String(c?.firstSeen)) <= Date.parse(String(c?.lastSeen)), 'first seen <= last seen, both during the test');
      t.notOk(res.body.includes(KEY), 'no key in the report');
    });

    await t.test('the API port serves none of the admin endpoints', async (t) => {
      for (const path of ['/metrics', '/healthz', '/readyz', '/deprecations']) {
        assertError(t, await request(`${gw.url}${path}`, { headers: bearer(KEY) }), 404, 'not_found', { message: 'any' });
      }
    });

    await t.test('SIGTERM with a request in flight: /readyz 503 draining at once, /healthz 200', async (t) => {
      t.equal((await request(`${gw.admin}/readyz`)).status, 200, '/readyz 200 before');
      const id = `hold-${engine}-${rand(4)}`;
      const inFlight = request(`${gw.url}/v1/pets`, { headers: bearer(KEY, { 'x-request-id': id }), timeoutMs: 15_000 });
      let settled = false;
      void inFlight.then(
        () => (settled = true),
        () => (settled = true),
      );
      await waitFor('the held request at the stub', () => held.has(id));
      gw.handle.child.kill('SIGTERM');
      // Bounded poll: at most 100 tries within 5 s.
      let ready: Response | undefined;
      for (let i = 0; i < 100; i++) {
        ready = await request(`${gw.admin}/readyz`, { timeoutMs: 2000 });
        if (ready.status === 503) break;
      }
      t.equal(ready?.status, 503, '/readyz 503 after SIGTERM');
      t.strictSame(ready?.json, { status: 'not ready', reason: 'draining' }, 'reason: draining');
      t.notOk(settled, 'while the request is still in flight');
      t.equal((await request(`${gw.admin}/healthz`)).status, 200, '/healthz 200 while draining');
      t.strictSame((await request(`${gw.admin}/healthz`)).json, { status: 'ok' });
      release(id);
      const res = await inFlight;
      t.equal(res.status, 200, 'the request in flight completes');
      t.equal(res.headers['x-request-id'], id);
      const exit = await Promise.race([gw.handle.exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 10_000).unref())]);
      t.strictSame(exit, { code: 0, signal: null }, 'the process exits 0');
      const lines = await linesFor(gw.handle, [id]);
      t.equal(lines.get(id)?.[0]?.status, 200, 'the drained request has its access line, flushed before exit');
      assertNoSecrets(t, gw.handle, [KEY, BAD_KEY, SECRET]);
    });
  });

  await t.test('down gateway: upstream closed, then a flood of junk', async (t) => {
    const gw = await processes[engine].down;
    t.match((await request(`${gw.admin}/readyz`)).json, { status: 'ready', detail: { upstream: { reachable: true, decidesReadiness: true } } }, '/readyz ready while the upstream answers');
    t.equal((await request(`${gw.url}/v1/pets`, { headers: bearer(KEY) })).status, 200, 'a call succeeds');
    await gw.stub.close();
    const before = await scrape(gw);

    const id = `refused-${engine}-${rand(4)}`;
    const res = await request(`${gw.url}/v1/pets?limit=2`, { headers: bearer(KEY, { 'x-request-id': id }) });
    assertError(t, res, 502, 'upstream_unavailable', { message: 'any' });
    t.equal(res.headers['x-request-id'], id, 'the id is echoed on the 502');

    const after = await scrape(gw);
    const d = (name: string, labels: Record<string, string>) => val(after, name, labels) - val(before, name, labels);
    t.equal(d('petstore_gateway_upstream_failures_total', { kind: 'refused' }), 1, 'upstream_failures_total{kind="refused"} +1');
    t.equal(d(`${CLIENT}_count`, { http_request_method: 'GET', http_route: '/v1/pets', error_type: 'refused' }), 1, 'client duration: error_type refused +1');
    t.equal(d(`${SERVER}_count`, server('GET', '/v1/pets', 502)), 1, 'server duration: GET /v1/pets 502 +1');

    const line = (await linesFor(gw.handle, [id])).get(id)![0]!;
    t.equal(line.upstreamFailure, 'refused', 'access line: upstream failure refused');
    t.equal(line.errorCode, 'upstream_unavailable', 'access line: error code');
    t.equal(line.status, 502);

    const ready = await request(`${gw.admin}/readyz`);
    t.equal(ready.status, 503, '/readyz 503 once a call was refused');
    t.match(ready.json, { status: 'not ready', reason: 'upstream unreachable', detail: { upstream: { reachable: false } } }, 'reason: upstream unreachable (server.admin.readiness.upstream)');
    t.strictSame((await request(`${gw.admin}/healthz`)).json, { status: 'ok' }, '/healthz still ok');
    t.equal((await request(`${gw.admin}/healthz`)).status, 200);

    await t.test('a flood of random paths, methods and bad keys adds no series', async (t) => {
      // The label values are bounded; which of them a request gets depends on its class (method,
      // route label, key class), not on its random parts. So: first every class once (after the
      // address is locked out by bad keys, so the 429 series exist too), then random requests of
      // the same classes must find every series already there.
      const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'PROPFIND', 'PURGE', 'MKCOL'];
      const PATHS = [() => `/${rand()}`, () => `/v1/pets?${rand(4)}=${rand()}`, () => `/v1/pets/${Math.floor(Math.random() * 1e6)}`, () => `/v1/pets/${rand()}/${rand(3)}`, () => `/v1/${rand()}`];
      const KEYS: Array<() => Record<string, string>> = [() => ({}), () => ({ authorization: `Basic ${rand()}` }), () => ({ authorization: `Bearer ${rand()}!` }), () => bearer(`bad_${rand(12)}`) as Record<string, string>];
      const badKeys: string[] = [];
      const fire = async (method: string, path: string, headers: Record<string, string>): Promise<number> => {
        // Every credential sent (its token part), to check that none reaches stdout.
        if (headers.authorization !== undefined) badKeys.push(headers.authorization.split(' ')[1]!);
        try {
          return (await request(`${gw.url}${path}`, { method, headers: { ...headers, 'x-request-id': rand(150) }, timeoutMs: 5000 })).status;
        } catch {
          return 0; // a method the HTTP parser refuses may close the connection: no series either way
        }
      };
      // Lock the address out (maxFailures 5).
      let lockStatus = 0;
      for (let i = 0; i < 6; i++) lockStatus = await fire('GET', '/v1/pets', bearer(`bad_${rand(12)}`) as Record<string, string>);
      t.equal(lockStatus, 429, 'the address is locked out by failed keys');

      const warm: Array<[string, string, Record<string, string>]> = [];
      for (const m of METHODS) for (const p of ['/x', '/v1/pets', '/v1/pets/1', '/v1/pets/abc', '/v1/pets/1/x']) for (const k of KEYS) warm.push([m, p, k()]);
      const runAll = async (jobs: Array<[string, string, Record<string, string>]>) => {
        const statuses = new Map<number, number>();
        let next = 0;
        await Promise.all(
          Array.from({ length: 6 }, async () => {
            while (next < jobs.length) {
              const [m, p, h] = jobs[next++]!;
              const s = await fire(m, p, h);
              statuses.set(s, (statuses.get(s) ?? 0) + 1);
            }
          }),
        );
        return statuses;
      };
      const warmStatuses = await runAll(warm);
      t.comment(`warm-up: ${warm.length} requests, statuses ${JSON.stringify([...warmStatuses])}`);
      const seriesBefore = gatewaySeries(await scrape(gw));

      const FLOOD = 200;
      const flood: Array<[string, string, Record<string, string>]> = [];
      for (let i = 0; i < FLOOD; i++) {
        flood.push([METHODS[i % METHODS.length]!, PATHS[Math.floor(Math.random() * PATHS.length)]!(), KEYS[i % KEYS.length]!()]);
      }
      const floodStatuses = await runAll(flood);
      t.comment(`flood: ${FLOOD} requests, statuses ${JSON.stringify([...floodStatuses])}`);
      const final = await scrape(gw);
      const seriesAfter = gatewaySeries(final);
      t.strictSame([...seriesAfter].filter((s) => !seriesBefore.has(s)), [], 'no new series');
      t.ok(seriesAfter.size > 0, `${seriesAfter.size} gateway series`);
      const unknownCount = find(final, `${SERVER}_count`, { http_route: 'unknown' }).reduce((n, s) => n + s.value, 0);
      t.ok(unknownCount >= FLOOD / 5, `the flood was counted (${unknownCount} requests with route "unknown")`);
      t.notOk(
        final.samples.some((s) => Object.values(s.labels).some((v) => v.startsWith('/') && v !== '/v1/pets' && v !== '/v1/pets/{petId}')),
        'no raw path in any label',
      );
      assertNoSecrets(t, gw.handle, [KEY, ...badKeys]);
    });
  });
});
