/**
 * The migration lane's comparison of two answers (src/migration/compare.ts): a case per
 * rule (status, Error code, exact numbers, ignore paths, list order, bodies that are not JSON or
 * are truncated, samples, bounds), then fast-check properties over JSON generated here, with
 * integers beyond 2^53 written as raw text. FC_SEED=<n> replays a run.
 */
import fc from 'fast-check';
import t from 'tap';
import { compileComparer, exactDecimal, COMPARE_LIMITS, type CompareRules } from '../../src/migration/compare.js';
import type { ClientView } from '../../src/migration/types.js';

const SEED = process.env.FC_SEED === undefined ? Date.now() ^ (Math.random() * 0x7fffffff) : Number(process.env.FC_SEED);
t.comment(`fast-check seed ${SEED} (FC_SEED=${SEED} replays it)`);
const params = { numRuns: 200, seed: SEED, interruptAfterTimeLimit: 8000 };

const STRICT: CompareRules = { ignore: [], listOrder: 'strict' };
const view = (body: string | Buffer, status = 200, code?: string, truncated = false): ClientView => ({
  status,
  code,
  body: typeof body === 'string' ? Buffer.from(body) : body,
  truncated,
});
const compare = (a: string, b: string, rules: CompareRules = STRICT) => compileComparer(rules)(view(a), view(b));

t.test('status: a different status is the one difference, bodies aside', async (t) => {
  const c = compileComparer(STRICT)(view('{"a":1}'), view('{"b":2}', 404, 'not_found'));
  t.strictSame(c, { equal: false, paths: ['status'], samples: [{ path: 'status', legacy: '200', next: '404' }] });
});

t.test('Error code: both non-2xx, one status, another code; the message compared like a field', async (t) => {
  const err = (code: string, message: string) => view(JSON.stringify({ code, message, status: 404 }), 404, code);
  const cmp = compileComparer(STRICT);
  t.strictSame(cmp(err('not_found', 'x'), err('gone', 'x')).paths, ['code']);
  t.strictSame(cmp(err('not_found', 'no pet 1'), err('not_found', 'no pet 1')).equal, true);
  t.strictSame(cmp(err('not_found', 'no pet 1'), err('not_found', 'No such pet')).paths, ['$.message']);
  t.strictSame(compileComparer({ ignore: ['$.message'], listOrder: 'strict' })(err('not_found', 'a'), err('not_found', 'b')).equal, true);
  t.strictSame(cmp(view('{}', 500, undefined), view('{}', 500, 'internal')).samples, [{ path: 'code', legacy: '(absent)', next: '"internal"' }]);
});

t.test('numbers: exact decimals, int64 exact', async (t) => {
  t.strictSame(compare('{"id":9007199254740993}', '{"id":9007199254740992}').paths, ['$.id']);
  t.strictSame(compare('[9223372036854775807]', '[9223372036854775806]').paths, ['$[*]']);
  t.equal(compare('{"id":9007199254740993}', '{"id": 9007199254740993 }').equal, true);
  for (const [a, b] of [['1.0', '1'], ['1e2', '100'], ['100E+0', '1.00e2'], ['-0', '0'], ['0.50', '5e-1'], ['10e99999999999999999999', '1e100000000000000000000']]) {
    t.equal(compare(`{"n":${a}}`, `{"n":${b}}`).equal, true, `${a} equals ${b}`);
  }
  t.strictSame(compare('{"n":1e99999999999999999999}', '{"n":10e99999999999999999999}').paths, ['$.n']);
  t.strictSame(compare('{"n":0.1}', '{"n":0.10000000000000001}').paths, ['$.n'], 'equal as doubles, not as decimals');
  t.equal(exactDecimal('1e99999999999999999999'), '1e99999999999999999999');
  t.equal(exactDecimal('-12.3400e-2'), '-1234e-4');
  t.equal(exactDecimal('-0.0e5'), '0');
  t.equal(compare('1', '"1"').paths[0], '$', 'a number is not a string');
});

t.test('paths: leaves, types, missing and extra fields, lengths; each once, sorted', async (t) => {
  const a = '{"name":"a","tags":["x"],"gone":1,"items":[{"status":"s","n":1},{"status":"s","n":2}],"odd key":1}';
  const b = '{"name":"b","tags":"x","new":1,"items":[{"status":"t","n":1},{"status":"u","n":2}],"odd key":2}';
  const c = compare(a, b);
  t.strictSame(c.paths, ['$.gone', '$.items[*].status', '$.name', '$.new', '$.tags', '$["odd key"]']);
  t.strictSame(c.samples, [
    { path: '$.name', legacy: '"a"', next: '"b"' },
    { path: '$.tags', legacy: '[1 items]', next: '"x"' },
    { path: '$.gone', legacy: '1', next: '(absent)' },
  ]);
  t.strictSame(compare('[1,2,3]', '[1,2]').paths, ['$'], 'a top-level list of another length');
  t.strictSame(compare('{"l":[{"a":1}]}', '{"l":[{"a":2},{"a":1}]}').paths, ['$.l']);
  t.strictSame(compare('{"a":null}', '{"a":false}').paths, ['$.a']);
  t.strictSame(compare('{"__proto__":1}', '{"__proto__":2}').paths, ['$.__proto__']);
});

t.test('ignore: $, .name, [*], [N]; presence too', async (t) => {
  const rules = (...ignore: string[]): CompareRules => ({ ignore, listOrder: 'strict' });
  t.equal(compare('[{"id":1,"n":"a"},{"id":2,"n":"b"}]', '[{"id":7,"n":"a"},{"n":"b"}]', rules('$[*].id')).equal, true);
  t.strictSame(compare('{"id":1,"l":[{"id":1}]}', '{"id":2,"l":[{"id":2}]}', rules('$.id')).paths, ['$.l[*].id']);
  t.strictSame(compare('[{"id":1},{"id":1}]', '[{"id":2},{"id":2}]', rules('$[1].id')).paths, ['$[*].id']);
  t.equal(compare('[{"id":1},{"id":1}]', '[{"id":2},{"id":2}]', rules('$[1].id', '$[0]')).equal, true);
  t.equal(compare('{"a":1}', 'not json', rules('$')).equal, true, '$ ignores the whole body');
  t.strictSame(compare('[1,2]', '[1,2,3]', rules('$[*]')).paths, ['$'], 'the length is the array\'s own');
  t.equal(compare('{"id":{"deep":[1]}}', '{"id":"flat"}', rules('$.id')).equal, true);
  t.throws(() => compileComparer(rules('$.a-b')), /not a path/);
  t.throws(() => compileComparer(rules('a')), /does not start with \$/);
});

t.test('listOrder: strict and ignore (multisets), with ignored ids, nested', async (t) => {
  const ignore: CompareRules = { ignore: ['$[*].id'], listOrder: 'ignore' };
  t.strictSame(compare('[1,2,3]', '[3,1,2]').paths, ['$[*]']);
  t.equal(compare('[1,2,3]', '[3,1,2]', { ignore: [], listOrder: 'ignore' }).equal, true);
  t.equal(compare('[1,1,2]', '[1,2,2]', { ignore: [], listOrder: 'ignore' }).equal, false, 'multisets, not sets');
  t.equal(compare('[{"id":1,"n":"a"},{"id":2,"n":"b"}]', '[{"id":9,"n":"b"},{"id":8,"n":"a"}]', ignore).equal, true);
  t.equal(compare('{"l":[[1,2],[3,4]]}', '{"l":[[4,3],[2,1]]}', { ignore: [], listOrder: 'ignore' }).equal, true);
  const c = compare('[{"id":1,"n":"a"},{"id":2,"n":"b"},{"id":3,"n":"c"}]', '[{"id":3,"n":"c"},{"id":2,"n":"x"},{"id":1,"n":"a"}]', ignore);
  t.strictSame(c.paths, ['$[*].n'], 'matched items set aside, the rest compared pairwise');
  t.strictSame(c.samples, [{ path: '$[*].n', legacy: '"b"', next: '"x"' }]);
  t.equal(compare('[1.0, 2]', '[2, 1]', { ignore: [], listOrder: 'ignore' }).equal, true, 'canonical numbers');
});

t.test('bodies that are not JSON, not UTF-8, empty or truncated', async (t) => {
  t.equal(compare('<html>a</html>', '<html>a</html>').equal, true);
  t.strictSame(compare('<html>a</html>', '<html>b</html>'), { equal: false, paths: ['$'], samples: [{ path: '$', legacy: '(not JSON, 14 bytes)', next: '(not JSON, 14 bytes)' }] });
  t.strictSame(compare('{"a":1}', '{"a":1').samples, [{ path: '$', legacy: '{1 fields}', next: '(not JSON, 6 bytes)' }]);
  t.equal(compare('', '').equal, true, 'two empty bodies (204)');
  t.strictSame(compare('', '{}').paths, ['$']);
  t.strictSame(compare('{"a":1,"a":2}', '{"a":1}').paths, ['$'], 'a key repeated with another value is not JSON');
  const bad = (b: number) => Buffer.from([0x22, b, 0x22]);
  t.strictSame(compileComparer(STRICT)(view(bad(0xff)), view(bad(0xfe))).paths, ['$'], 'invalid UTF-8 is not read as U+FFFD');
  const cmp = compileComparer(STRICT);
  t.equal(cmp(view('[{"a":1},', 200, undefined, true), view('[{"a":1},', 200, undefined, true)).equal, true, 'both truncated, same bytes');
  t.strictSame(cmp(view('[{"a":1},', 200, undefined, true), view('[{"a":2},', 200, undefined, true)).paths, ['$']);
  t.strictSame(cmp(view('[1]', 200, undefined, true), view('[1]')).samples, [{ path: '$', legacy: '(truncated, 3 bytes)', next: '(whole, 3 bytes)' }]);
  t.strictSame(cmp(view('[1, 2', 200, undefined, true), view('[1,2', 200, undefined, true)).paths, ['$'], 'truncated: bytes, not values');
});

t.test('samples: bounded, redacted, cut to 64 characters, no body', async (t) => {
  const a = JSON.stringify({ a: 1, b: 1, c: 1, d: 1, e: 1 });
  const b = JSON.stringify({ a: 2, b: 2, c: 2, d: 2, e: 2 });
  t.equal(compare(a, b).samples.length, 3, 'default 3');
  t.equal(compare(a, b, { ignore: [], listOrder: 'strict', maxSamples: 0 }).samples.length, 0);
  t.equal(compare(a, b, { ignore: [], listOrder: 'strict', maxSamples: 10 }).samples.length, 5);
  const redact = (s: string) => s.replace(/psg_[A-Za-z0-9]+/g, '[redacted]');
  const c = compileComparer(STRICT, redact)(view(JSON.stringify({ k: `psg_secret ${'x'.repeat(200)}` })), view('{"k":"psg_other"}'));
  t.strictSame(c.samples, [{ path: '$.k', legacy: `"[redacted] ${'x'.repeat(52)}…`, next: '"[redacted]"' }]);
  t.equal(c.samples[0]!.legacy.length, 65);
  const big = compare(JSON.stringify({ l: ['secret-a', 'secret-b'] }), JSON.stringify({ l: 'secret-c' }));
  t.strictSame(big.samples, [{ path: '$.l', legacy: '[2 items]', next: '"secret-c"' }], 'containers summarized');
});

t.test('bounds: depth, size, paths', async (t) => {
  const deep = (n: number, leaf: string) => '['.repeat(n) + leaf + ']'.repeat(n);
  t.strictSame(compare(deep(COMPARE_LIMITS.depth, '1'), deep(COMPARE_LIMITS.depth, '2')).paths, [`$${'[*]'.repeat(COMPARE_LIMITS.depth)}`]);
  const hostile = compare(deep(100_000, '1'), deep(100_000, '2'));
  t.strictSame(hostile.samples, [{ path: '$', legacy: '(over the comparison bounds, 200001 bytes)', next: '(over the comparison bounds, 200001 bytes)' }]);
  t.equal(compare(deep(100_000, '1'), deep(100_000, '1')).equal, true, 'equal bytes need no reading');
  const wide = (v: number) => JSON.stringify(Array.from({ length: COMPARE_LIMITS.nodes + 1 }, () => v));
  t.strictSame(compare(wide(1), wide(2)).paths, ['$']);
  const keys = (v: number) => JSON.stringify(Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`k${i}`, v])));
  t.equal(compare(keys(1), keys(2)).paths.length, COMPARE_LIMITS.paths);
  // Order-free lists nested 30 deep, 600 numbers beside each level, one leaf differing at the
  // bottom. Read once per node (canonical forms kept), the leaf is found; with an ignore path that
  // reaches every level (so no form can be kept), each level reads its whole subtree again, about
  // 560,000 visits: over the work bound stops it.
  const nested = (v: number) => {
    let body: unknown = [v];
    for (let k = 1; k <= 30; k++) body = [body, Array.from({ length: 600 }, () => k)];
    return JSON.stringify(body);
  };
  const bottom = `$${'[*]'.repeat(31)}`;
  t.strictSame(compare(nested(1), nested(2)).paths, [bottom], 'strict');
  const t0 = performance.now();
  t.strictSame(compare(nested(1), nested(2), { ignore: [], listOrder: 'ignore' }).paths, [bottom], 'order ignored, forms kept');
  t.strictSame(compare(nested(1), nested(2), { ignore: [`$${'[*]'.repeat(40)}.zz`], listOrder: 'ignore' }).paths, ['$'], 'over the work bound');
  t.ok(performance.now() - t0 < 5000, 'bounded time');
});

// ---------------------------------------------------------------------------------------------
// Properties, over JSON values generated here: numbers as their text (big integers included).

type Json = null | boolean | string | { num: string } | Json[] | { obj: [string, Json][] };
const isNum = (v: Json): v is { num: string } => v !== null && typeof v === 'object' && 'num' in v;
const isObj = (v: Json): v is { obj: [string, Json][] } => v !== null && typeof v === 'object' && 'obj' in v;

const numText = fc.oneof(
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
  fc.constantFrom('9007199254740993', '9007199254740992', '-9223372036854775808', '0', '1.5', '-0.25', '3.5e10'),
  fc.integer({ min: -1000, max: 1000 }).map(String),
);
const key = fc.oneof(fc.constantFrom('id', 'name', 'status', 'tags', '_x'), fc.string({ maxLength: 6 }));
const { json } = fc.letrec<{ json: Json }>((tie) => ({
  json: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.string({ maxLength: 8 }),
    numText.map((num) => ({ num })),
    fc.array(tie('json'), { maxLength: 4 }),
    fc.uniqueArray(fc.tuple(key, tie('json')), { maxLength: 4, selector: ([k]) => k }).map((obj) => ({ obj })),
  ),
}));

/** Another spelling of one value: spaces, shuffled keys, 1 as 1.0 or 10e-1. */
function write(v: Json, alt = false, rnd = 0): string {
  if (isNum(v)) return alt && /^-?[1-9][0-9]*$/.test(v.num) ? (rnd % 2 ? `${v.num}.000` : `${v.num}0e-1`) : v.num;
  if (Array.isArray(v)) return `[${v.map((x, i) => write(x, alt, rnd + i)).join(alt ? ' , ' : ',')}]`;
  if (isObj(v)) {
    const entries = alt ? [...v.obj].reverse() : v.obj;
    return `{${entries.map(([k, x], i) => `${JSON.stringify(k)}${alt ? ' : ' : ':'}${write(x, alt, rnd + i)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/** Every node with its concrete steps. */
function nodes(v: Json, steps: (string | number)[] = [], out: { steps: (string | number)[]; value: Json }[] = []) {
  out.push({ steps, value: v });
  if (Array.isArray(v)) v.forEach((x, i) => nodes(x, [...steps, i], out));
  else if (isObj(v)) for (const [k, x] of v.obj) nodes(x, [...steps, k], out);
  return out;
}

function replaceAt(v: Json, steps: readonly (string | number)[], f: (old: Json) => Json): Json {
  if (steps.length === 0) return f(v);
  const [s, ...rest] = steps;
  if (Array.isArray(v)) return v.map((x, i) => (i === s ? replaceAt(x, rest, f) : x));
  if (isObj(v)) return { obj: v.obj.map(([k, x]) => [k, k === s ? replaceAt(x, rest, f) : x] as [string, Json]) };
  return v;
}

/** The same value with its objects' keys sorted: one text per value. */
function sorted(v: Json): Json {
  if (Array.isArray(v)) return v.map(sorted);
  if (isObj(v)) return { obj: v.obj.map(([k, x]) => [k, sorted(x)] as [string, Json]).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)) };
  return v;
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;
const normalized = (steps: readonly (string | number)[]) =>
  '$' + steps.map((s) => (typeof s === 'number' ? '[*]' : IDENT.test(s) ? `.${s}` : `[${JSON.stringify(s)}]`)).join('');

t.test('property: a value equals itself in any spelling', async (t) => {
  const cmp = compileComparer(STRICT);
  fc.assert(fc.property(json, fc.nat(), (v, rnd) => cmp(view(write(v)), view(write(v, true, rnd))).equal), params);
  t.pass('held');
});

t.test('property: equal modulo noise (values changed only under ignored paths)', async (t) => {
  const arb = json.chain((v) => {
    const eligible = nodes(v).filter((n) => n.steps.length > 0 && n.steps.every((s) => typeof s === 'number' || IDENT.test(s)));
    if (eligible.length === 0) return fc.constant(undefined);
    return fc.tuple(fc.constant(v), fc.constantFrom(...eligible), fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }), json, fc.constantFrom<'strict' | 'ignore'>('strict', 'ignore'));
  });
  fc.assert(
    fc.property(arb, (drawn) => {
      if (drawn === undefined) return true;
      const [v, node, stars, noise, listOrder] = drawn;
      const path = '$' + node.steps.map((s, i) => (typeof s === 'number' ? (stars[i % 8] ? '[*]' : `[${s}]`) : `.${s}`)).join('');
      const mutated = replaceAt(v, node.steps, () => noise);
      return compileComparer({ ignore: [path], listOrder })(view(write(v)), view(write(mutated))).equal;
    }),
    params,
  );
  t.pass('held');
});

/** A leaf changed so that its value differs: an integer by one (exact), anything else by kind. */
function mutateLeaf(v: Json): Json {
  if (isNum(v)) return /^-?[0-9]+$/.test(v.num) ? { num: String(BigInt(v.num) + 1n) } : 'changed';
  if (typeof v === 'string') return `${v}x`;
  if (typeof v === 'boolean') return !v;
  return v === null ? { num: '0' } : null;
}

t.test('property: one changed leaf, not ignored, is found at its normalized path', async (t) => {
  const arb = json.chain((v) => {
    const leaves = nodes(v).filter((n) => !Array.isArray(n.value) && !isObj(n.value));
    return leaves.length === 0 ? fc.constant(undefined) : fc.tuple(fc.constant(v), fc.constantFrom(...leaves));
  });
  fc.assert(
    fc.property(arb, fc.constantFrom<readonly string[]>([], ['$.zz_other'], ['$[*].zz_other', '$.zz_otherlist[*]']), (drawn, ignore) => {
      fc.pre(drawn !== undefined);
      const [v, leaf] = drawn;
      const c = compileComparer({ ignore, listOrder: 'strict' })(view(write(v)), view(write(replaceAt(v, leaf.steps, mutateLeaf))));
      return !c.equal && c.paths.includes(normalized(leaf.steps)) && c.paths.length === 1;
    }),
    params,
  );
  t.pass('held');
});

t.test('property: listOrder ignore takes any permutation; strict refuses one of distinct items', async (t) => {
  const ignoreOrder = compileComparer({ ignore: [], listOrder: 'ignore' });
  const strict = compileComparer(STRICT);
  const list = fc.array(json, { maxLength: 8 });
  fc.assert(
    fc.property(
      list.chain((l) => fc.tuple(fc.constant(l), fc.shuffledSubarray(l.map((_, i) => i), { minLength: l.length, maxLength: l.length }))),
      ([l, order]) => ignoreOrder(view(write(l)), view(write(order.map((i) => l[i]!), true, 1))).equal,
    ),
    params,
  );
  const distinct = fc.uniqueArray(json, { minLength: 2, maxLength: 8, selector: (v) => write(sorted(v)) });
  fc.assert(
    fc.property(
      distinct.chain((l) => fc.tuple(fc.constant(l), fc.shuffledSubarray(l.map((_, i) => i), { minLength: l.length, maxLength: l.length }))),
      ([l, order]) => {
        fc.pre(order.some((i, k) => i !== k));
        // Distinct as texts with sorted keys is distinct as values: each number has one spelling here.
        const c = strict(view(write(l)), view(write(order.map((i) => l[i]!))));
        return !c.equal && c.paths.every((p) => p.startsWith('$[*]'));
      },
    ),
    params,
  );
  t.pass('held');
});
