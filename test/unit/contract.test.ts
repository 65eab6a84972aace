/**
 * The data shapes of the interface: int64 literals, the JSON media type, lossless JSON and the
 * NewPet validator in its three unknown-field modes.
 */
import t from 'tap';
import { isInt64Text, isJsonMediaType, isValidUpstreamStatus, isLosslessNumber, parseLossless, stringifyLossless } from '../../src/core/contract.js';
import { compileNewPet, isPetStatus, PET_STATUSES } from '../helpers/pet-store.js';

t.test('isInt64Text', async (t) => {
  const cases: [string, boolean][] = [
    ['0', true],
    ['-0', true],
    ['1', true],
    ['-1', true],
    ['42', true],
    ['9223372036854775807', true],
    ['-9223372036854775808', true],
    ['9223372036854775808', false],
    ['-9223372036854775809', false],
    ['18446744073709551615', false],
    ['99999999999999999999', false],
    ['123456789012345678901', false],
    ['1e23', false],
    ['1E2', false],
    ['1.0', false],
    ['0.5', false],
    ['01', false],
    ['-01', false],
    ['00', false],
    ['', false],
    [' 1', false],
    ['1 ', false],
    ['+1', false],
    ['-', false],
    ['--1', false],
    ['0x10', false],
    ['1_000', false],
    ['١', false],
    ['Infinity', false],
    ['NaN', false],
  ];
  for (const [text, expected] of cases) t.equal(isInt64Text(text), expected, JSON.stringify(text));
});

t.test('isInt64Text agrees with BigInt around every length and both limits', async (t) => {
  const reference = (text: string): boolean => {
    if (!/^-?(0|[1-9][0-9]*)$/.test(text)) return false;
    const n = BigInt(text);
    return n >= -(2n ** 63n) && n <= 2n ** 63n - 1n;
  };
  const texts: string[] = [];
  for (const edge of [2n ** 63n - 1n, -(2n ** 63n)]) {
    for (let d = -1000n; d <= 1000n; d += 7n) texts.push(String(edge + d));
    for (const p of [10n ** 18n, 10n ** 18n - 1n, 10n ** 19n, 10n ** 19n - 1n]) texts.push(String(p), String(-p));
  }
  // Deterministic pseudo-random digit strings of 1 to 21 digits, both signs.
  let s = 7;
  const digit = (): number => (s = (s * 1103515245 + 12345) % 2147483648) % 10;
  for (let len = 1; len <= 21; len++) {
    for (let i = 0; i < 40; i++) {
      let text = String(1 + (digit() % 9));
      while (text.length < len) text += String(digit());
      // The first digit of a 19-digit text near 9 so both sides of the limit are drawn.
      if (len === 19 && i % 2 === 0) text = '92233720' + text.slice(8);
      texts.push(text, '-' + text);
    }
  }
  let disagreements = 0;
  for (const text of texts) if (isInt64Text(text) !== reference(text)) disagreements++;
  t.equal(disagreements, 0, `${texts.length} texts`);
  t.ok(texts.some((x) => reference(x)) && texts.some((x) => !reference(x)), 'both answers are drawn');
});

t.test('isJsonMediaType', async (t) => {
  const cases: [string | string[] | undefined, boolean][] = [
    ['application/json', true],
    ['APPLICATION/JSON', true],
    ['Application/Json', true],
    ['application/json; charset=utf-8', true],
    ['application/json;charset=UTF-8', true],
    ['application/json ; charset=utf-8', true],
    ['application/json\t;charset=utf-8', true],
    ['application/json;', true],
    [undefined, false],
    ['', false],
    ['text/plain', false],
    ['text/json', false],
    ['application/jsonp', false],
    ['application/json5', false],
    ['application/json-seq', false],
    ['application/x-www-form-urlencoded', false],
    ['multipart/form-data; boundary=x', false],
    ['application/problem+json', false],
    ['application/merge-patch+json', false],
    ['application/json, text/plain', false],
    ['application/json x', false],
    ['application', false],
    ['json', false],
    ['*/*', false],
    [' application/json', false],
    [['application/json'], false],
    [[], false],
  ];
  for (const [value, expected] of cases) t.equal(isJsonMediaType(value), expected, JSON.stringify(value));
});

t.test('isPetStatus', async (t) => {
  t.strictSame([...PET_STATUSES], ['available', 'pending', 'sold']);
  for (const s of PET_STATUSES) t.equal(isPetStatus(s), true, s);
  for (const s of ['Available', 'SOLD', '', 'lost', null, undefined, 1, ['sold']]) t.equal(isPetStatus(s), false, JSON.stringify(s));
});

t.test('parseLossless / stringifyLossless', async (t) => {
  const big = '{"name":"Rex","categoryId":9223372036854775807,"n":-9223372036854775808,"f":1.50,"e":1e400}';
  const value = parseLossless(big) as Record<string, unknown>;
  t.ok(isLosslessNumber(value.categoryId));
  t.equal((value.categoryId as { value: string }).value, '9223372036854775807');
  t.equal(stringifyLossless(value), big, 'every number keeps its source text');
  t.equal(JSON.stringify(JSON.parse('9223372036854775807')), '9223372036854776000', 'what JSON.parse would have done');
  t.equal(stringifyLossless(undefined), 'null');

  t.throws(() => parseLossless('{"a":1,"a":2}'), SyntaxError, 'duplicate keys');
  t.throws(() => parseLossless(''), SyntaxError);
  t.throws(() => parseLossless('{"a":1} x'), SyntaxError);
  t.throws(() => parseLossless("{'a':1}"), SyntaxError);
  t.throws(() => parseLossless('{"a":01}'), SyntaxError);

  const proto = parseLossless('{"__proto__":{"polluted":true},"a":1}') as Record<string, unknown>;
  t.equal(Object.getPrototypeOf(proto), Object.prototype);
  t.ok(Object.hasOwn(proto, '__proto__'), '__proto__ is a plain own field');
  t.strictSame(Object.keys(proto), ['__proto__', 'a']);
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype is untouched');
});

const N = (text: string) => parseLossless(text);

t.test('compileNewPet: valid bodies pass in every mode', async (t) => {
  for (const mode of ['reject', 'strip', 'allow'] as const) {
    const check = compileNewPet(mode);
    for (const body of [
      '{"name":"Rex","categoryId":1}',
      '{"name":"","categoryId":0}',
      '{"name":"Rex","categoryId":-9223372036854775808,"status":"available"}',
      '{"status":"pending","categoryId":9223372036854775807,"name":"Rex"}',
      '{"name":"Rex","categoryId":1,"status":"sold"}',
    ]) {
      t.strictSame(check(N(body)), { errors: [] }, `${mode} ${body}`);
    }
  }
});

t.test('compileNewPet: every violation in one list, each naming its field', async (t) => {
  const body = '{"id":1,"colour":"red","categoryId":1.5,"status":"lost"}';
  t.strictSame([...compileNewPet('reject')(N(body)).errors].sort(), [
    'categoryId must be an integer within int64',
    'id must not be sent: the service assigns it',
    'name is required',
    'status must be one of available, pending, sold',
    "unknown field 'colour'",
  ]);
  // strip and allow do not object to colour, and report the rest alike.
  for (const mode of ['strip', 'allow'] as const) {
    t.strictSame([...compileNewPet(mode)(N(body)).errors].sort(), [
      'categoryId must be an integer within int64',
      'id must not be sent: the service assigns it',
      'name is required',
      'status must be one of available, pending, sold',
    ], mode);
  }
});

t.test('compileNewPet: one table of single violations (reject mode)', async (t) => {
  const check = compileNewPet('reject');
  const cases: [string, string[]][] = [
    ['{}', ['name is required', 'categoryId is required']],
    ['{"name":"Rex"}', ['categoryId is required']],
    ['{"categoryId":1}', ['name is required']],
    ['{"name":5,"categoryId":1}', ['name must be a string']],
    ['{"name":null,"categoryId":1}', ['name must be a string']],
    ['{"name":"Rex","categoryId":"1"}', ['categoryId must be an integer within int64']],
    ['{"name":"Rex","categoryId":1.0}', ['categoryId must be an integer within int64']],
    ['{"name":"Rex","categoryId":1e2}', ['categoryId must be an integer within int64']],
    ['{"name":"Rex","categoryId":9223372036854775808}', ['categoryId must be an integer within int64']],
    ['{"name":"Rex","categoryId":-9223372036854775809}', ['categoryId must be an integer within int64']],
    ['{"name":"Rex","categoryId":null}', ['categoryId must be an integer within int64']],
    ['{"name":"Rex","categoryId":true}', ['categoryId must be an integer within int64']],
    ['{"name":"Rex","categoryId":1,"status":"Sold"}', ['status must be one of available, pending, sold']],
    ['{"name":"Rex","categoryId":1,"status":null}', ['status must be one of available, pending, sold']],
    ['{"name":"Rex","categoryId":1,"id":7}', ['id must not be sent: the service assigns it']],
    ['{"name":"Rex","categoryId":1,"id":null}', ['id must not be sent: the service assigns it']],
    ['{"name":"Rex","categoryId":1,"colour":"red"}', ["unknown field 'colour'"]],
    ['{"name":"Rex","categoryId":1,"__proto__":{}}', ["unknown field '__proto__'"]],
    ['[]', ['the body must be a JSON object']],
    ['[{"name":"Rex","categoryId":1}]', ['the body must be a JSON object']],
    ['"Rex"', ['the body must be a JSON object']],
    ['null', ['the body must be a JSON object']],
    ['true', ['the body must be a JSON object']],
  ];
  for (const [body, errors] of cases) t.strictSame([...check(N(body)).errors].sort(), [...errors].sort(), body);
});

t.test('compileNewPet: an object that looks like a LosslessNumber is not a number', async (t) => {
  for (const mode of ['reject', 'strip', 'allow'] as const) {
    t.strictSame(
      compileNewPet(mode)(N('{"name":"Rex","categoryId":{"isLosslessNumber":true,"value":"1"}}')),
      { errors: ['categoryId must be an integer within int64'] },
      mode,
    );
  }
});

t.test(
  'compileNewPet: a bare number is not a JSON object',
  async (t) => {
    for (const mode of ['reject', 'strip', 'allow'] as const) {
      for (const body of ['1', '0', '-1.5e3']) t.strictSame(compileNewPet(mode)(N(body)), { errors: ['the body must be a JSON object'] }, `${mode} ${body}`);
    }
  },
);

t.test('compileNewPet: strip returns the value without unknown fields, losslessly', async (t) => {
  const strip = compileNewPet('strip');
  const r = strip(N('{"colour":"red","name":"Rex","extra":{"deep":[1,2]},"categoryId":9223372036854775807,"status":"sold"}'));
  t.strictSame(r.errors, []);
  t.ok(r.stripped !== undefined, 'a stripped value when something was removed');
  t.strictSame(Object.keys(r.stripped as object), ['name', 'categoryId', 'status']);
  t.equal(stringifyLossless(r.stripped), '{"name":"Rex","categoryId":9223372036854775807,"status":"sold"}');

  const neg = strip(N('{"name":"Rex","categoryId":-9223372036854775808,"x":1}'));
  t.equal(stringifyLossless(neg.stripped), '{"name":"Rex","categoryId":-9223372036854775808}');

  // Nothing to strip: no stripped value (the client's bytes are forwarded).
  t.strictSame(strip(N('{"name":"Rex","categoryId":1}')), { errors: [] });
  // __proto__ is stripped like any unknown field, and pollutes nothing.
  const proto = strip(N('{"__proto__":{"polluted":true},"name":"Rex","categoryId":1}'));
  t.equal(stringifyLossless(proto.stripped), '{"name":"Rex","categoryId":1}');
  t.equal(({} as Record<string, unknown>).polluted, undefined);
  // An invalid body is reported, not stripped.
  t.strictSame(strip(N('{"name":"Rex","colour":"red"}')), { errors: ['categoryId is required'] });
});

t.test('compileNewPet: allow forwards unknown fields untouched', async (t) => {
  t.strictSame(compileNewPet('allow')(N('{"name":"Rex","categoryId":1,"colour":"red"}')), { errors: [] });
});

t.test('compileNewPet: validators are independent and reusable', async (t) => {
  const a = compileNewPet('reject');
  const b = compileNewPet('allow');
  const body = N('{"name":"Rex","categoryId":1,"colour":"red"}');
  for (let i = 0; i < 3; i++) {
    t.strictSame(a(body), { errors: ["unknown field 'colour'"] });
    t.strictSame(b(body), { errors: [] });
  }
});

t.test('isValidUpstreamStatus: 200..599 final; 101 only for an upgrade; nothing else', async (t) => {
  for (const status of [200, 201, 204, 299, 300, 304, 399, 400, 401, 404, 418, 499, 500, 502, 599]) t.equal(isValidUpstreamStatus(status), true, String(status));
  for (const status of [0, 1, 99, 100, 102, 103, 199, 600, 999, 1000, -200, 200.5, Number.NaN, Number.POSITIVE_INFINITY]) {
    t.equal(isValidUpstreamStatus(status), false, String(status));
    t.equal(isValidUpstreamStatus(status, true), false, `${status} with an upgrade`);
  }
  t.equal(isValidUpstreamStatus(101), false, '101 without an upgrade');
  t.equal(isValidUpstreamStatus(101, true), true, '101 answering an upgrade');
  t.equal(isValidUpstreamStatus(200, true), true, 'a refused upgrade answered normally');
});
