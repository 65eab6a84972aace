/**
 * The new-pet policy: media type (415), then the complete body (400 malformed_json or
 * invalid_body), and what the upstream receives in strip mode.
 */
import t from 'tap';
import { parseLossless, stringifyLossless } from '../../src/core/contract.js';
import type { UnknownFields } from '../../src/api/body.js';
import { Chain } from '../helpers/chain.js';
import type { IncomingHeaders } from '../../src/core/policy.js';
import { newPet } from '../../src/policies/new-pet/index.js';

function chainFor(unknownFields: UnknownFields = 'reject') {
  return new Chain([newPet.create({ maxBytes: 16384, unknownFields }, { env: {} })]);
}

function summary(error: { code: string; status: number; headers: Readonly<Record<string, string>> } | undefined) {
  return error === undefined ? 'pass' : { code: error.code, status: error.status, headers: { ...error.headers } };
}

/** POST /v1/pets with a JSON content type, then the body. */
function post(body: string | Buffer, unknownFields: UnknownFields = 'reject') {
  const chain = chainFor(unknownFields);
  const { ex, error } = chain.begin({ method: 'POST', target: '/v1/pets', headers: { 'content-type': 'application/json' } });
  if (error !== undefined) throw new Error(`unexpected ${error.code} before the body`);
  const d = chain.acceptBody(ex, typeof body === 'string' ? Buffer.from(body, 'utf8') : body);
  return { ex, error: d };
}

const MALFORMED = { code: 'malformed_json', status: 400, headers: {} };
const INVALID = { code: 'invalid_body', status: 400, headers: {} };
const UNSUPPORTED = { code: 'unsupported_media_type', status: 415, headers: {} };

t.test('415 unless the content type is application/json (before the body)', async (t) => {
  const cases: [IncomingHeaders, unknown][] = [
    [{}, UNSUPPORTED],
    [{ 'content-type': '' }, UNSUPPORTED],
    [{ 'content-type': 'text/plain' }, UNSUPPORTED],
    [{ 'content-type': 'text/json' }, UNSUPPORTED],
    [{ 'content-type': 'application/x-www-form-urlencoded' }, UNSUPPORTED],
    [{ 'content-type': 'multipart/form-data; boundary=x' }, UNSUPPORTED],
    [{ 'content-type': 'application/jsonp' }, UNSUPPORTED],
    [{ 'content-type': 'application/problem+json' }, UNSUPPORTED],
    [{ 'content-type': 'application/json' }, 'pass'],
    [{ 'content-type': 'application/json; charset=utf-8' }, 'pass'],
    [{ 'content-type': 'Application/JSON;charset=UTF-8' }, 'pass'],
  ];
  for (const [headers, expected] of cases) {
    const { error } = chainFor().begin({ method: 'POST', target: '/v1/pets', headers });
    t.strictSame(summary(error), expected, JSON.stringify(headers));
  }
});

t.test('operations without a body are not checked for a content type', async (t) => {
  for (const [method, target] of [
    ['GET', '/v1/pets'],
    ['GET', '/v1/pets/1'],
    ['DELETE', '/v1/pets'],
    ['POST', '/nowhere'],
  ]) {
    const { error } = chainFor().begin({ method: method!, target: target!, headers: { 'content-type': 'text/plain' } });
    t.equal(error, undefined, `${method} ${target}`);
  }
});

t.test('a valid body passes; the upstream gets the client bytes', async (t) => {
  for (const mode of ['reject', 'strip', 'allow'] as const) {
    const { ex, error } = post('{"name":"Rex","categoryId":9223372036854775807,"status":"available"}\n', mode);
    t.equal(error, undefined, mode);
    t.equal(ex.upstreamBody, undefined, `${mode}: no rewrite`);
  }
});

t.test('400 malformed_json: empty, not JSON, duplicate keys', async (t) => {
  const cases: [string, string | Buffer][] = [
    ['empty body', ''],
    ['whitespace only', ' \n'],
    ['truncated', '{"name":"Rex",'],
    ['single quotes', "{'name':'Rex','categoryId':1}"],
    ['trailing garbage', '{"name":"Rex","categoryId":1} x'],
    ['two values', '{"name":"Rex","categoryId":1}{}'],
    ['trailing comma', '{"name":"Rex","categoryId":1,}'],
    ['comment', '{"name":"Rex","categoryId":1 /* c */}'],
    ['leading zero', '{"name":"Rex","categoryId":01}'],
    ['NaN', '{"name":"Rex","categoryId":NaN}'],
    ['byte order mark', '\ufeff{"name":"Rex","categoryId":1}'],
    ['duplicate keys', '{"name":"Rex","name":"Max","categoryId":1}'],
    ['duplicate keys nested', '{"name":"Rex","categoryId":1,"x":{"a":1,"a":2}}'],
    ['duplicate keys, same number in another form', '{"name":"Rex","categoryId":1,"categoryId":1.0}'],
  ];
  for (const [name, body] of cases) t.strictSame(summary(post(body).error), MALFORMED, name);
  t.match(post('{"name":"Rex","name":"Max","categoryId":1}').error?.message, /'name'/, 'the duplicate key is named');
});

t.test('a key repeated with the same value is accepted: every parser reads the same value', async (t) => {
  t.equal(post('{"name":"Rex","name":"Rex","categoryId":1}').error, undefined);
  t.equal(post('{"name":"Rex","categoryId":1,"categoryId":1}').error, undefined);
});

t.test('400 invalid_body: not an object', async (t) => {
  // A bare number is a 400 invalid_body too (its message is the subject of a todo in contract.test.ts).
  for (const body of ['[]', '[{"name":"Rex","categoryId":1}]', '"Rex"', 'null', '0', '1', 'true']) {
    for (const mode of ['reject', 'strip', 'allow'] as const) t.strictSame(summary(post(body, mode).error), INVALID, `${mode} ${body}`);
  }
});

t.test('400 invalid_body: every violation in one message, fields named', async (t) => {
  const { error } = post('{"id":1,"colour":"red","categoryId":"7","status":"lost"}');
  t.strictSame(summary(error), INVALID);
  const message = error?.message ?? '';
  for (const field of ['name', 'categoryId', 'status', "'colour'"]) t.match(message, field, `names ${field}`);
  t.match(message, /id must not be sent: the service assigns it/);
  t.equal(message.split('; ').length, 5, 'five violations');
});

t.test('unknown fields per mode', async (t) => {
  const body = '{"name":"Rex","colour":"red","categoryId":9223372036854775807}';
  const reject = post(body, 'reject');
  t.strictSame(summary(reject.error), INVALID);
  t.match(reject.error?.message, /'colour'/);

  const allow = post(body, 'allow');
  t.equal(allow.error, undefined);
  t.equal(allow.ex.upstreamBody, undefined, 'allow forwards the client bytes');

  const strip = post(body, 'strip');
  t.equal(strip.error, undefined);
  t.ok(Buffer.isBuffer(strip.ex.upstreamBody));
  t.equal(strip.ex.upstreamBody?.toString('utf8'), '{"name":"Rex","categoryId":9223372036854775807}', 'strip forwards lossless bytes');
  t.equal(stringifyLossless(parseLossless(strip.ex.upstreamBody!.toString('utf8'))), '{"name":"Rex","categoryId":9223372036854775807}');
});

t.test('__proto__ in the body does not pollute Object.prototype', async (t) => {
  const bodies = [
    '{"__proto__":{"polluted":true},"name":"Rex","categoryId":1}',
    '{"name":"Rex","categoryId":1,"constructor":{"prototype":{"polluted":true}}}',
    '{"name":"Rex","categoryId":1,"x":{"__proto__":{"polluted":true}}}',
  ];
  for (const body of bodies) {
    t.strictSame(summary(post(body, 'reject').error), INVALID, `reject ${body}`);
    t.equal(post(body, 'allow').error, undefined, `allow ${body}`);
    const strip = post(body, 'strip');
    t.equal(strip.error, undefined, `strip ${body}`);
    t.equal(strip.ex.upstreamBody?.toString(), '{"name":"Rex","categoryId":1}');
  }
  t.equal(({} as Record<string, unknown>).polluted, undefined);
  t.notOk(Object.hasOwn(Object.prototype, 'polluted'));
});

t.test('a deeply nested body is a 400, not a crash', async (t) => {
  const depth = 10_000;
  const bodies = [
    '['.repeat(depth) + ']'.repeat(depth),
    '{"a":'.repeat(depth) + '1' + '}'.repeat(depth),
    '{"name":"Rex","categoryId":1,"x":' + '['.repeat(depth) + ']'.repeat(depth) + '}',
    '['.repeat(100_000) + ']'.repeat(100_000),
  ];
  for (const body of bodies) {
    for (const mode of ['reject', 'strip', 'allow'] as const) {
      const { error } = post(body, mode);
      t.equal(error?.status, 400, `${mode}, ${body.length} bytes`);
      t.ok(error?.code === 'malformed_json' || error?.code === 'invalid_body', `${mode}: ${error?.code}`);
    }
  }
  // Unbalanced too: still a 400.
  t.strictSame(summary(post('['.repeat(depth)).error), MALFORMED);
});

t.test(
  'a body that is not UTF-8 is malformed JSON (RFC 8259 section 8.1)',
  async (t) => {
    const bad = Buffer.concat([Buffer.from('{"name":"R'), Buffer.from([0xff, 0xfe]), Buffer.from('x","categoryId":1}')]);
    t.strictSame(summary(post(bad).error), MALFORMED);
    const overlong = Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('","categoryId":1}')]);
    t.strictSame(summary(post(overlong).error), MALFORMED);
  },
);

t.test('the policy module', async (t) => {
  t.equal(newPet.name, 'new-pet');
  t.equal(newPet.check, undefined, 'no cross-field rules');
  const policy = newPet.create({ maxBytes: 64, unknownFields: 'reject' }, { env: {} });
  t.equal(policy.name, 'new-pet');
  t.type(policy.onRequest, 'function');
  t.type(policy.onBody, 'function');
});

// ---------------------------------------------------------------------------------------------
// Charset: JSON bodies in UTF-8 only.

t.test('charset: absent or utf-8 (any case, quoted or not) passes; any other charset is a 415', async (t) => {
  const NOT_UTF8 = { ...UNSUPPORTED, message: 'The request body must be application/json in UTF-8: send no charset, or charset=utf-8.' };
  const cases: [string, unknown][] = [
    ['application/json', 'pass'],
    ['application/json ', 'pass'],
    ['application/json;charset=utf-8', 'pass'],
    ['application/json; charset=UTF-8', 'pass'],
    ['application/json; CHARSET="utf-8"', 'pass'],
    ['application/json ;\tcharset="UTF-8" ', 'pass'],
    ['application/json; foo=bar; charset=utf-8', 'pass'],
    ['application/json;', 'pass'],
    ['application/json; charset=utf-7', NOT_UTF8],
    ['application/json; charset=UTF-16', NOT_UTF8],
    ['application/json; charset=utf-16le', NOT_UTF8],
    ['application/json; charset=latin1', NOT_UTF8],
    ['application/json; charset="iso-8859-1"', NOT_UTF8],
    ['application/json; charset=utf8', NOT_UTF8],
    ['application/json; charset=', NOT_UTF8],
    ['application/json; charset="utf-8', NOT_UTF8],
    ['application/json; charset=utf-8; charset=utf-7', NOT_UTF8],
    ['application/json; charset=utf-8; charset=utf-8', NOT_UTF8],
    ['application/json; charset=utf-8 x', NOT_UTF8],
    ['application/json; charset="utf-\\8"', 'pass'],
    ['application/jsonx; charset=utf-8', UNSUPPORTED],
    ['text/json; charset=utf-8', UNSUPPORTED],
  ];
  for (const [contentType, expected] of cases) {
    const { error } = chainFor().begin({ method: 'POST', target: '/v1/pets', headers: { 'content-type': contentType } });
    const withMessage = typeof expected === 'object' && expected !== null && 'message' in expected;
    const got = error === undefined ? 'pass' : withMessage ? { code: error.code, status: error.status, headers: { ...error.headers }, message: error.message } : summary(error);
    t.strictSame(got, expected, contentType);
  }
});

t.test('bytes that are not UTF-8 are a 400; a UTF-8 BOM is refused with a 400, never stripped', async (t) => {
  const valid = '{"name":"Rex","categoryId":1}';
  const cases: [string, Buffer][] = [
    ['a lone continuation byte', Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0x80]), Buffer.from('","categoryId":1}')])],
    ['an overlong encoding of "/"', Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('","categoryId":1}')])],
    ['a surrogate encoded in UTF-8', Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('","categoryId":1}')])],
    ['latin1 bytes', Buffer.from('{"name":"Réx","categoryId":1}', 'latin1')],
    ['UTF-16LE with its BOM', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(valid, 'utf16le')])],
    ['UTF-16BE with its BOM', Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(valid, 'utf16le').swap16()])],
    ['UTF-16LE without a BOM', Buffer.from(valid, 'utf16le')],
  ];
  for (const [name, body] of cases) {
    const { ex, error } = post(body);
    t.strictSame(summary(error), MALFORMED, name);
    t.equal(ex.upstreamBody, undefined, `${name}: nothing rewritten`);
  }
  const withBom = post(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(valid)]));
  t.strictSame(summary(withBom.error), MALFORMED, 'UTF-8 BOM');
  t.match(withBom.error?.message, /byte order mark/, 'the message names the BOM');
  t.equal(post(valid).error, undefined, 'the same body without the BOM passes');
  t.equal(post('{"name":"\uFEFF","categoryId":1}').error, undefined, 'U+FEFF inside a string is just a character');
});
