/**
 * The `upstream-errors` policy: every non-2xx upstream answer reaches the client in the Error shape
 * (docs/interface.md, "Errors") with `status` equal to the HTTP status; plain messages kept,
 * anything else (HTML, stack traces, secrets, large bodies) replaced by the catalogue's text and
 * logged redacted; per-operation status maps; only Retry-After survives, on 429 and 503.
 */
import t from 'tap';
import { parsePolicy } from '../../src/config/load.js';
import { CATALOGUE, ERROR_CONTENT_TYPE, type ErrorCode } from '../../src/core/errors.js';
import { Chain } from '../helpers/chain.js';
import type { HeaderValue, PolicyEnv, ResponseBody } from '../../src/core/policy.js';
import { gatewayPolicyEnv } from '../../src/policies/index.js';
import { extractMessage, upstreamErrors, type UpstreamErrorsConfig } from '../../src/policies/upstream-errors/index.js';
import { fakeLog } from '../helpers/log.js';

type TapTest = Parameters<Parameters<typeof t.test>[0]>[0];
type Op = 'listPets' | 'createPet' | 'getPet';

function load(text = ''): UpstreamErrorsConfig {
  const r = parsePolicy(text, { env: {} });
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.config.policies['upstream-errors'];
}
const DEFAULT = load();
/** The upstream sees the client's own key (`upstreamAuthorization: forward`). */
const FORWARD: PolicyEnv = { env: {}, upstreamAuth: { credential: 'client', realm: 'petstore' } };
const CHALLENGE = 'Bearer realm="petstore", error="invalid_token"';

const REQUEST: Record<Op, { method: string; target: string }> = {
  listPets: { method: 'GET', target: '/v1/pets?limit=5' },
  createPet: { method: 'POST', target: '/v1/pets' },
  getPet: { method: 'GET', target: '/v1/pets/7' },
};

interface Call {
  op?: Op;
  status: number;
  body?: string | Buffer;
  headers?: Record<string, HeaderValue | number>;
  truncated?: boolean;
  config?: UpstreamErrorsConfig;
  env?: PolicyEnv;
  /** The client's request headers. */
  requestHeaders?: Record<string, string>;
}

function run({ op = 'getPet', status, body = '', headers = { 'content-type': 'application/json' }, truncated = false, config = DEFAULT, env = { env: {} }, requestHeaders = {} }: Call): ResponseBody {
  const chain = new Chain([upstreamErrors.create(config, env)]);
  const { ex, error } = chain.begin({ ...REQUEST[op], headers: requestHeaders });
  if (error !== undefined) throw error;
  return chain.finishResponse(ex, { status, headers, body: typeof body === 'string' ? Buffer.from(body) : body, truncated });
}

/** Asserts the exact Error response: status, headers and body bytes. */
function assertError(t: TapTest, res: ResponseBody, status: number, code: string, message?: string, headers: Record<string, string> = {}): void {
  const msg = message ?? CATALOGUE[code as ErrorCode].message;
  t.equal(res.status, status, `${code}: HTTP status`);
  t.strictSame(res.headers, { ...headers, 'content-type': ERROR_CONTENT_TYPE }, `${code}: headers`);
  t.equal(res.body.toString(), JSON.stringify({ code, message: msg, status }), `${code}: body`);
  t.equal(res.truncated, false, `${code}: not truncated`);
}

t.test('defaults: statusMap and maxBodyBytes', async (t) => {
  t.strictSame(DEFAULT, {
    statusMap: { listPets: {}, createPet: { '409': 400, '422': 400 }, getPet: { '400': 404, '410': 404, '422': 404 } },
    maxBodyBytes: 4096,
  });
});

t.test('2xx passes untouched; wantsResponseBody only for non-2xx', async (t) => {
  const chain = new Chain([upstreamErrors.create(DEFAULT, { env: {} })]);
  for (const op of ['listPets', 'createPet', 'getPet'] as const) {
    const { ex } = chain.begin({ ...REQUEST[op], headers: {} });
    for (const status of [100, 101, 199, 300, 304, 400, 404, 418, 500, 503, 599]) t.equal(chain.wantsResponseBody(ex, { status, headers: {} }), true, `${op} ${status}`);
    for (const status of [200, 201, 204, 299]) t.equal(chain.wantsResponseBody(ex, { status, headers: {} }), false, `${op} ${status}`);
  }
  for (const status of [200, 201, 204]) {
    const chain = new Chain([upstreamErrors.create(DEFAULT, { env: {} })]);
    const { ex } = chain.begin({ method: 'GET', target: '/v1/pets', headers: {} });
    const res: ResponseBody = { status, headers: { 'x-a': 'b' }, body: Buffer.from('[]'), truncated: false };
    t.equal(chain.finishResponse(ex, res), res, `${status}`);
    t.equal(chain.wantsResponseBody(ex, { status, headers: {} }), false);
  }
});

t.test('every non-2xx becomes the Error shape with status equal to the HTTP status', async (t) => {
  const cases: [Op, number, string][] = [
    ['listPets', 400, 'invalid_request'],
    ['createPet', 400, 'invalid_body'],
    ['listPets', 401, 'invalid_api_key'],
    ['createPet', 401, 'invalid_api_key'],
    ['getPet', 404, 'pet_not_found'],
    ['listPets', 404, 'not_found'],
    ['createPet', 404, 'not_found'],
    ['listPets', 405, 'method_not_allowed'],
    ['listPets', 409, 'conflict'],
    ['listPets', 410, 'operation_removed'],
    ['createPet', 413, 'payload_too_large'],
    ['createPet', 415, 'unsupported_media_type'],
    ['listPets', 429, 'too_many_requests'],
    ['listPets', 500, 'upstream_error'],
    ['listPets', 502, 'bad_gateway'],
    ['getPet', 503, 'service_unavailable'],
    ['listPets', 504, 'upstream_timeout'],
  ];
  for (const [op, status, code] of cases) {
    for (const body of ['', 'oops', '{}', '[]', 'null']) {
      // A 401 is the client's only when the upstream saw the client's key (`forward`); see below.
      const res = run({ op, status, body, env: status === 401 ? FORWARD : undefined });
      t.equal(res.status, status, `${op} ${status} ${JSON.stringify(body)}`);
      t.equal(res.body.toString(), JSON.stringify({ code, message: CATALOGUE[code as ErrorCode].message, status }), `${op} ${status} ${JSON.stringify(body)}: body`);
      t.equal(res.headers['content-type'], ERROR_CONTENT_TYPE);
    }
  }
});

t.test('unknown statuses: upstream_error with that status', async (t) => {
  for (const status of [402, 418, 422, 451, 499, 501, 505, 511, 599]) {
    assertError(t, run({ op: 'listPets', status, body: '' }), status, 'upstream_error');
  }
  assertError(t, run({ op: 'listPets', status: 418, body: '{"message":"I am a teapot."}' }), 418, 'upstream_error', 'I am a teapot.');
});

t.test('1xx and 3xx final answers: 502 upstream_contract_violation', async (t) => {
  for (const status of [100, 199, 300, 301, 302, 304, 307, 308, 399]) {
    const res = run({ op: 'listPets', status, body: '<a href="http://internal">moved</a>', headers: { location: 'http://10.0.0.1/admin', 'content-type': 'text/html' } });
    assertError(t, res, 502, 'upstream_contract_violation');
  }
});

t.test('a valid Error with the same status passes through (code and message kept)', async (t) => {
  assertError(t, run({ status: 404, body: '{"code":"pet_gone","message":"Pet 7 is gone.","status":404}' }), 404, 'pet_gone', 'Pet 7 is gone.');
  assertError(t, run({ op: 'listPets', status: 401, body: ' {"status":401,"message":"Key revoked.","code":"key.revoked-2"} ', env: FORWARD }), 401, 'key.revoked-2', 'Key revoked.', {
    'www-authenticate': CHALLENGE,
  });
  assertError(t, run({ op: 'listPets', status: 418, body: '{"code":"teapot","message":"Short and stout.","status":418}' }), 418, 'teapot', 'Short and stout.');
  // Not the same status, extra fields, a bad code or an unplain message: rebuilt.
  assertError(t, run({ status: 404, body: '{"code":"pet_gone","message":"Pet 7 is gone.","status":410}' }), 404, 'pet_not_found', 'Pet 7 is gone.');
  assertError(t, run({ status: 404, body: '{"code":"pet_gone","message":"Pet 7 is gone.","status":"404"}' }), 404, 'pet_not_found', 'Pet 7 is gone.');
  assertError(t, run({ status: 404, body: '{"code":"pet_gone","message":"Pet 7 is gone.","status":404,"trace":"x"}' }), 404, 'pet_not_found', 'Pet 7 is gone.');
  assertError(t, run({ status: 404, body: '{"code":"has space","message":"Pet 7 is gone.","status":404}' }), 404, 'pet_not_found', 'Pet 7 is gone.');
  assertError(t, run({ status: 404, body: '{"code":"","message":"Pet 7 is gone.","status":404}' }), 404, 'pet_not_found', 'Pet 7 is gone.');
  assertError(t, run({ status: 404, body: `{"code":"${'a'.repeat(65)}","message":"Pet 7 is gone.","status":404}` }), 404, 'pet_not_found', 'Pet 7 is gone.');
  assertError(t, run({ status: 404, body: '{"code":"x","message":"at foo (/app/x.js:1:2)","status":404}' }), 404, 'pet_not_found');
  // A mapped status: createPet 422 -> 400, so a 422 Error is not the same status.
  assertError(t, run({ op: 'createPet', status: 422, body: '{"code":"unprocessable","message":"Name is too long.","status":422}' }), 400, 'invalid_body', 'Name is too long.');
});

t.test('the message is taken from common shapes when short and plain', async (t) => {
  const cases: [string, string][] = [
    ['{"message":"Pet 7 does not exist."}', 'Pet 7 does not exist.'],
    ['{"error":"Pet 7 does not exist."}', 'Pet 7 does not exist.'],
    ['{"detail":"Pet 7 does not exist."}', 'Pet 7 does not exist.'],
    ['{"error":{"message":"Pet 7 does not exist.","code":12}}', 'Pet 7 does not exist.'],
    ['{"errors":[{"message":"Pet 7 does not exist."},{"message":"second"}]}', 'Pet 7 does not exist.'],
    ['{"message":"first","error":"second","detail":"third"}', 'first'],
    ['{"message":"<b>html</b>","error":"second"}', 'second'],
    ['{"message":42,"detail":"third"}', 'third'],
    ['{"message":"","detail":"   ","error":{"message":"nested"}}', 'nested'],
    ['{"message":"Bearer abc","errors":[{"message":"last resort"}]}', 'last resort'],
    ['\n {"message":"Leading whitespace is fine."}', 'Leading whitespace is fine.'],
    [`{"message":"${'Pet no. '.repeat(25)}"}`, 'Pet no. '.repeat(25)],
  ];
  for (const [body, message] of cases) assertError(t, run({ status: 404, body }), 404, 'pet_not_found', message);
  // extractMessage directly.
  t.equal(extractMessage({ errors: [null, { message: 'no' }] }), undefined);
  t.equal(extractMessage({ errors: { message: 'not an array' } }), undefined);
  t.equal(extractMessage({ error: null, detail: 'ok' }), 'ok');
  t.equal(extractMessage('just a string'), undefined);
  t.equal(extractMessage(null), undefined);
  t.equal(extractMessage([{ message: 'in an array' }]), undefined);
});

t.test('what never reaches the client: generic catalogue text instead', async (t) => {
  const secrets = [
    '{"message":"login failed: password=hunter2"}',
    '{"message":"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc"}',
    '{"message":"cannot reach postgres://admin:s3cr3t@db.internal:5432/pets"}',
    `{"message":"key ${'QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkw'} rejected"}`,
    '{"message":"api_key invalid"}',
    '{"message":"upstream 10.0.3.17 refused"}',
    '{"message":"TypeError: x is undefined\\n    at foo (/app/x.js:1:2)"}',
    '{"message":"at foo (/app/x.js:1:2)"}',
    '{"message":"Traceback (most recent call last): File app.py"}',
    '{"message":"NullPointerException in PetService"}',
    '{"message":"ORA-00942: table or view does not exist"}',
    '{"message":"syntax error at or near \\"FROM\\""}',
    '{"message":"cannot open /var/lib/pets.db"}',
    `{"message":"${'Pet no. '.repeat(25)}x"}`,
    '<!DOCTYPE html><html><head><title>404 Not Found</title></head><body><h1>Not Found</h1><p>nginx</p></body></html>',
    'Traceback (most recent call last):\n  File "/app/main.py", line 1, in <module>\nKeyError: 7',
    'Error: boom\n    at foo (/app/x.js:1:2)\n    at bar (/app/y.js:3:4)',
    'password=hunter2',
  ];
  for (const body of secrets) {
    const res = run({ status: 404, body, headers: { 'content-type': body.startsWith('{') ? 'application/json' : 'text/html' } });
    assertError(t, res, 404, 'pet_not_found');
  }
  for (const body of secrets) {
    const res = run({ op: 'listPets', status: 500, body });
    assertError(t, res, 500, 'upstream_error');
  }
});

t.test('a secret-looking code in an Error-shaped body does not reach the client', async (t) => {
  const token = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc9a8b7c6d5e4f3a2b1';
  const res = run({ status: 404, body: JSON.stringify({ code: token, message: 'Not found.', status: 404 }) });
  t.notMatch(res.body.toString(), token, 'the token is not in the body');
});

t.test('bodies over maxBodyBytes or truncated are not read', async (t) => {
  const plain = (n: number) => {
    const pre = '{"message":"Pet 7 does not exist.","pad":"';
    return pre + ' '.repeat(n - pre.length - 2) + '"}';
  };
  t.equal(plain(4096).length, 4096);
  assertError(t, run({ status: 404, body: plain(4096) }), 404, 'pet_not_found', 'Pet 7 does not exist.');
  assertError(t, run({ status: 404, body: plain(4097) }), 404, 'pet_not_found');
  const small = { ...DEFAULT, maxBodyBytes: 256 };
  assertError(t, run({ status: 404, body: plain(256), config: small }), 404, 'pet_not_found', 'Pet 7 does not exist.');
  assertError(t, run({ status: 404, body: plain(257), config: small }), 404, 'pet_not_found');
  const error = JSON.stringify({ code: 'gone', message: 'Gone.', status: 404 });
  assertError(t, run({ status: 404, body: error + ' '.repeat(300), config: small }), 404, 'pet_not_found');
  assertError(t, run({ status: 404, body: '{"message":"Pet 7 does not exist."}', truncated: true }), 404, 'pet_not_found');
  assertError(t, run({ status: 404, body: error, truncated: true }), 404, 'pet_not_found');
});

t.test('default statusMap: createPet 422 -> 400 invalid_body, getPet 400 -> 404 pet_not_found', async (t) => {
  assertError(t, run({ op: 'createPet', status: 422, body: '{"message":"name is required"}' }), 400, 'invalid_body', 'name is required');
  assertError(t, run({ op: 'createPet', status: 409, body: '' }), 400, 'invalid_body');
  assertError(t, run({ op: 'getPet', status: 400, body: '{"message":"id must be a number"}' }), 404, 'pet_not_found', 'id must be a number');
  assertError(t, run({ op: 'getPet', status: 410, body: '' }), 404, 'pet_not_found');
  assertError(t, run({ op: 'getPet', status: 422, body: '' }), 404, 'pet_not_found');
  // Not mapped for other operations.
  assertError(t, run({ op: 'listPets', status: 422, body: '' }), 422, 'upstream_error');
  assertError(t, run({ op: 'listPets', status: 400, body: '' }), 400, 'invalid_request');
  assertError(t, run({ op: 'createPet', status: 410, body: '' }), 410, 'operation_removed');
});

t.test('a configured statusMap replaces the default for that operation only', async (t) => {
  const config = load('policies:\n  upstream-errors:\n    statusMap:\n      createPet:\n        "418": 400\n        "500": 503\n');
  t.strictSame(config.statusMap, { createPet: { '418': 400, '500': 503 }, listPets: {}, getPet: { '400': 404, '410': 404, '422': 404 } });
  assertError(t, run({ op: 'createPet', status: 418, body: '', config }), 400, 'invalid_body');
  assertError(t, run({ op: 'createPet', status: 422, body: '', config }), 422, 'upstream_error', undefined);
  assertError(t, run({ op: 'createPet', status: 409, body: '', config }), 409, 'conflict');
  assertError(t, run({ op: 'createPet', status: 500, body: '', config, headers: { 'retry-after': '30' } }), 503, 'service_unavailable', undefined, { 'retry-after': '30' });
  // getPet keeps its default.
  assertError(t, run({ op: 'getPet', status: 400, body: '', config }), 404, 'pet_not_found');
  // An empty map removes every mapping.
  const none = load('policies:\n  upstream-errors:\n    statusMap:\n      getPet: {}\n');
  assertError(t, run({ op: 'getPet', status: 400, body: '', config: none }), 400, 'invalid_request');
  assertError(t, run({ op: 'createPet', status: 422, body: '', config: none }), 400, 'invalid_body');
});

t.test('Retry-After survives on 503 and 429 only; no other upstream header does', async (t) => {
  const headers = {
    'content-type': 'text/html',
    'retry-after': '120',
    'set-cookie': 'session=abc',
    server: 'nginx/1.2.3',
    'x-powered-by': 'Express',
    'www-authenticate': 'Basic realm="internal"',
    location: '/elsewhere',
    'content-length': '5',
  };
  assertError(t, run({ op: 'listPets', status: 503, body: 'down', headers }), 503, 'service_unavailable', undefined, { 'retry-after': '120' });
  assertError(t, run({ op: 'listPets', status: 429, body: 'slow', headers }), 429, 'too_many_requests', undefined, { 'retry-after': '120' });
  const date = 'Wed, 21 Oct 2026 07:28:00 GMT';
  assertError(t, run({ op: 'listPets', status: 503, headers: { 'retry-after': date } }), 503, 'service_unavailable', undefined, { 'retry-after': date });
  for (const status of [400, 401, 404, 500, 502, 504]) {
    const res = run({ op: 'listPets', status, body: '', headers });
    t.strictSame(res.headers, { 'content-type': ERROR_CONTENT_TYPE }, `${status}: only the content type`);
  }
  // A 503 mapped to another status loses it.
  const to500 = load('policies:\n  upstream-errors:\n    statusMap:\n      listPets:\n        "503": 500\n');
  assertError(t, run({ op: 'listPets', status: 503, headers: { 'retry-after': '5' }, config: to500 }), 500, 'upstream_error');
  // Values that are not a plain Retry-After are dropped.
  for (const value of ['1\r\nX-Injected: yes', '<script>', 'x'.repeat(65), '']) {
    t.strictSame(run({ op: 'listPets', status: 503, headers: { 'retry-after': value } }).headers, { 'content-type': ERROR_CONTENT_TYPE }, `drops ${JSON.stringify(value)}`);
  }
  t.strictSame(run({ op: 'listPets', status: 503, headers: { 'retry-after': ['1', '2'] } }).headers, { 'content-type': ERROR_CONTENT_TYPE }, 'drops a repeated header');
});

t.test('operator log: a redacted excerpt of a 5xx page, never the secret', async (t) => {
  const log = fakeLog();
  const env: PolicyEnv = { env: {}, log };
  const page =
    '<!DOCTYPE html>\n<html><head><title>500 Internal Server Error</title></head><body>\n' +
    '<pre>Error: connect to postgres://admin:s3cr3tPa55@db.internal:5432/pets failed\n' +
    '  password=hunter2 api_key: "AKIAEXAMPLEKEY" Authorization: Bearer tok3n.abc.def\n' +
    `  cert ${'QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkwYWJj'}\n` +
    '    at Pool.connect (/app/node_modules/pg/lib/pool.js:45:11)</pre></body></html>';
  const res = run({ op: 'listPets', status: 500, body: page, headers: { 'content-type': 'text/html' }, env });
  assertError(t, res, 500, 'upstream_error');
  t.equal(log.lines.length, 1, 'logged once');
  const line = log.lines[0]!;
  t.match(line.fields, { policy: 'upstream-errors', operation: 'listPets', upstreamStatus: 500 });
  const excerpt = String(line.fields.excerpt);
  t.match(excerpt, /500 Internal Server Error/, 'the excerpt helps the operator');
  t.match(excerpt, /\[redacted\]/);
  for (const secret of ['s3cr3tPa55', 'hunter2', 'AKIAEXAMPLEKEY', 'tok3n.abc.def', 'QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkwYWJj']) {
    t.notOk(excerpt.includes(secret), `the log does not hold ${secret}`);
    t.notOk(res.body.toString().includes(secret), `the client does not get ${secret}`);
    t.notOk(JSON.stringify(line).includes(secret), `no field of the log line holds ${secret}`);
  }
  t.notOk(/\n/.test(excerpt), 'whitespace folded');

  // Mapped statuses: the logged upstreamStatus is the upstream's.
  const mapped = load('policies:\n  upstream-errors:\n    statusMap:\n      listPets:\n        "400": 502\n');
  run({ op: 'listPets', status: 400, body: '<html>bad</html>', config: mapped, env });
  t.equal(log.lines.length, 2);
  t.match(log.lines[1]!.fields, { upstreamStatus: 400 });

  // A plain message or an empty body is not logged; nor a 4xx page.
  run({ op: 'listPets', status: 500, body: '{"message":"Database is busy."}', env });
  run({ op: 'listPets', status: 503, body: '', env });
  run({ op: 'getPet', status: 404, body: '<html>nope</html>', env });
  t.equal(log.lines.length, 2, 'nothing more logged');

  // 3xx: logged without the body.
  run({ op: 'listPets', status: 302, body: 'password=hunter2', env });
  t.equal(log.lines.length, 3);
  t.strictSame(log.lines[2]!.fields, { policy: 'upstream-errors', upstreamStatus: 302 });
});

t.test('operator log: a token after a long inline image is not logged in part', async (t) => {
  const log = fakeLog();
  const token = 'sk_live_Q29tcGxldGVseVNlY3JldFRva2VuVmFsdWU';
  // The token starts 20 characters before the 1000th, where redactForLog slices its input.
  const page = `<html><img src="data:image/png;base64,${'iVBORw0KGgo'.repeat(85)}"> key ${token}</html>`;
  t.equal(page.indexOf(token), 980);
  const res = run({ op: 'listPets', status: 500, body: page, headers: { 'content-type': 'text/html' }, env: { env: {}, log } });
  assertError(t, res, 500, 'upstream_error');
  const excerpt = String(log.lines[0]?.fields.excerpt);
  t.notMatch(excerpt, /sk_live/, `no part of the token in ${JSON.stringify(excerpt)}`);
});

t.test('large 5xx pages: the excerpt is bounded', async (t) => {
  const log = fakeLog();
  const page = '<html>' + 'lorem ipsum '.repeat(2000) + '</html>';
  run({ op: 'listPets', status: 502, body: page, env: { env: {}, log } });
  t.equal(log.lines.length, 1);
  t.ok(String(log.lines[0]!.fields.excerpt).length <= 501, 'at most 500 characters and an ellipsis');
});

// ---------------------------------------------------------------------------------------------
// The gateway's own credential, and whose credential an upstream 401 refuses.

/** A log that records the level of each line. */
function levelLog() {
  const lines: { level: string; fields: Record<string, unknown>; message: string }[] = [];
  return {
    lines,
    warn: (fields: Record<string, unknown>, message: string) => void lines.push({ level: 'warn', fields, message }),
    error: (fields: Record<string, unknown>, message: string) => void lines.push({ level: 'error', fields, message }),
  };
}

/** The policy env the gateway builds for a policy file (gatewayPolicyEnv), with a level log. */
function envFor(authYaml: string, vars: Record<string, string>) {
  const r = parsePolicy(`policies:\n  auth:\n${authYaml}`, { env: vars });
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  const log = levelLog();
  return { env: gatewayPolicyEnv(r.config, { env: vars, log }), log };
}

const CREDENTIAL = 'Bearer u9Zq'; // 4 characters: under every length heuristic
const FROM_ENV = '    upstreamAuthorization: { fromEnv: UPSTREAM_AUTH }\n';

t.test('fromEnv or drop: an upstream 401/403 is a 502 upstream_auth_failed, logged at error level', async (t) => {
  for (const [name, yaml, vars] of [
    ['fromEnv', FROM_ENV, { UPSTREAM_AUTH: CREDENTIAL }],
    ['drop', '    upstreamAuthorization: drop\n', {}],
  ] as const) {
    for (const status of [401, 403]) {
      const { env, log } = envFor(yaml, vars);
      const body = `{"message":"Invalid API key ${CREDENTIAL}"}`;
      const res = run({ op: 'listPets', status, body, headers: { 'content-type': 'application/json', 'www-authenticate': 'Bearer' }, env });
      assertError(t, res, 502, 'upstream_auth_failed', "The upstream service refused the gateway's credentials.");
      t.equal(log.lines.length, 1, `${name} ${status}: one line`);
      t.equal(log.lines[0]?.level, 'error', `${name} ${status}: at error level`);
      t.match(log.lines[0]?.fields, { policy: 'upstream-errors', operation: 'listPets', upstreamStatus: status });
      t.notOk(JSON.stringify(log.lines).includes('u9Zq'), `${name} ${status}: the credential is not logged`);
    }
  }
  // Mapped statuses do not hide it: the upstream's status is what counts.
  const mapped = load('policies:\n  upstream-errors:\n    statusMap:\n      getPet:\n        "403": 404\n');
  assertError(t, run({ op: 'getPet', status: 403, config: mapped, env: envFor(FROM_ENV, { UPSTREAM_AUTH: CREDENTIAL }).env }), 502, 'upstream_auth_failed');
  // Without the wiring (no upstreamAuth), the safe reading: the gateway's credential was refused.
  assertError(t, run({ op: 'listPets', status: 401 }), 502, 'upstream_auth_failed');
});

t.test("forward: the upstream's 401 is the client's, in the Error shape with a Bearer challenge", async (t) => {
  const { env } = envFor('    upstreamAuthorization: forward\n    realm: pets\n', {});
  const challenge = { 'www-authenticate': 'Bearer realm="pets", error="invalid_token"' };
  assertError(t, run({ op: 'listPets', status: 401, body: '<html>401</html>', env }), 401, 'invalid_api_key', undefined, challenge);
  assertError(t, run({ op: 'getPet', status: 401, body: '{"message":"Key expired."}', env }), 401, 'invalid_api_key', 'Key expired.', challenge);
  assertError(t, run({ op: 'getPet', status: 403, body: '{"message":"Not your pet."}', env }), 403, 'upstream_error', 'Not your pet.');
  // The client's own key, echoed by the upstream, is not relayed (nor logged).
  const key = 'k3y';
  const echoed = run({ op: 'getPet', status: 401, body: `{"message":"Unknown ${key} here."}`, env, requestHeaders: { authorization: `Bearer ${key}` } });
  assertError(t, echoed, 401, 'invalid_api_key', undefined, challenge);
  // A 401 mapped from another status carries the challenge too (RFC 9110 section 15.5.2).
  const to401 = load('policies:\n  upstream-errors:\n    statusMap:\n      listPets:\n        "419": 401\n');
  assertError(t, run({ op: 'listPets', status: 419, config: to401, env }), 401, 'invalid_api_key', undefined, challenge);
});

t.test('every secret the gateway holds is masked exactly, whatever its length, in what it relays or logs', async (t) => {
  const vars = { UPSTREAM_AUTH: 'Basic dXA6cHc0eg==', PETSTORE_API_KEYS: 'abcd, Zz9_longer-client-key' }; // up:pw4z
  const { env, log } = envFor(FROM_ENV, vars);
  t.equal(env.secrets?.contains('pw4z'), true, 'the decoded Basic password is a secret too');
  const secrets = ['Basic dXA6cHc0eg==', 'dXA6cHc0eg==', 'up:pw4z', 'pw4z', 'abcd', 'Zz9_longer-client-key'];
  for (const secret of secrets) {
    // Short plain prose with no secret-like word: only the exact search can catch it.
    for (const status of [400, 404, 409, 422, 500]) {
      const res = run({ op: 'createPet', status, body: `{"message":"Rejected ${secret} for pets."}`, env });
      t.notOk(res.body.toString().includes(secret), `${status}: ${secret} is not relayed`);
      t.match(JSON.parse(res.body.toString()), { status: res.status }, 'still the Error shape');
    }
    const passthrough = run({ op: 'getPet', status: 404, body: `{"code":"gone","message":"Pet ${secret} gone.","status":404}`, env });
    t.notOk(passthrough.body.toString().includes(secret), `Error-shaped: ${secret} is not relayed`);
    run({ op: 'listPets', status: 500, body: `<html>upstream said ${secret}; and ${secret.replaceAll('/', '\\/')}</html>`, env });
  }
  const logged = JSON.stringify(log.lines);
  for (const secret of secrets) t.notOk(logged.includes(secret), `${secret} is not logged`);
  t.match(logged, /upstream said \[redacted\]/, 'the excerpt is still useful');
  // Before the fix: "Invalid API key <credential>" relayed with code invalid_api_key.
  const issue = run({ op: 'listPets', status: 400, body: '{"message":"Invalid API key abcd"}', env });
  assertError(t, issue, 400, 'invalid_request');
});
