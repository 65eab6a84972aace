/**
 * The structural cut of a list (src/api/scan's filterArray), behind listPets response enforcement:
 * at most `limit` elements, only those whose top-level filter field (`status` here) equals the
 * filter, kept as their original bytes; the original Buffer when nothing is removed; ScanError for
 * what is not a JSON array (within what it reads) and for truncated bodies it cannot cut before the
 * truncation point.
 */
import t from 'tap';
import fc from 'fast-check';
import { filterArray, ScanError } from '../../src/api/scan/index.js';

const b = (s: string): Buffer => Buffer.from(s, 'utf8');
/** The bytes of the result, as text. */
const out = (s: string, limit: number, status?: string): string => filterArray(b(s), limit, 'status', status).body.toString('utf8');

type TapTest = Parameters<Parameters<typeof t.test>[0]>[0];
/** Asserts that filterArray throws a ScanError (and nothing else). */
function throwsScan(t: TapTest, text: string, limit: number, status: string | undefined, msg: string, extra: { todo?: string } = {}): void {
  let error: unknown;
  let result: string | undefined;
  try {
    result = filterArray(b(text), limit, 'status', status).body.toString();
  } catch (err) {
    error = err;
  }
  t.ok(error instanceof ScanError, `${msg}: ScanError (got ${error === undefined ? `result ${result}` : String(error)})`, extra);
}

t.test('nothing to remove: the very same Buffer, changed false', async (t) => {
  const cases: [string, number, string | undefined][] = [
    ['[]', 20, undefined],
    [' \n[ \t]\r\n ', 20, 'sold'],
    ['[{"id":1}]', 1, undefined],
    ['[{"id":1},{"id":2},{"id":3}]', 3, undefined],
    ['[{"id":1},{"id":2},{"id":3}]', 100, undefined],
    ['[ {"id" : 1 , "status" : "sold"} ,\n {"id":2,"status":"sold"} ]', 2, 'sold'],
    ['[1,"two",null,true,[3],{"x":{}}]', 6, undefined],
    ['[{"id":9007199254740993,"categoryId":9223372036854775807,"name":"Rex","status":"available"}]', 20, 'available'],
  ];
  for (const [text, limit, status] of cases) {
    const buf = b(text);
    const r = filterArray(buf, limit, 'status', status);
    t.equal(r.body, buf, `same object: ${text}`);
    t.equal(r.changed, false, `changed false: ${text}`);
  }
});

t.test('limit: keeps the first `limit` elements, as their original bytes', async (t) => {
  const text = '[{"id":1},{"id":2},{"id":3},{"id":4}]';
  for (const [limit, expected] of [
    [1, '[{"id":1}]'],
    [2, '[{"id":1},{"id":2}]'],
    [3, '[{"id":1},{"id":2},{"id":3}]'],
  ] as const) {
    const r = filterArray(b(text), limit, 'status', undefined);
    t.equal(r.body.toString(), expected, `limit ${limit}`);
    t.equal(r.changed, true, `limit ${limit}: changed`);
  }
  // Whitespace inside an element is its bytes; separators between kept elements are normalised.
  t.equal(out('[ {"id": 1,  "name" : "a b"} ,\n\t{"id":2} ]', 1), '[{"id": 1,  "name" : "a b"}]');
  t.equal(out('[1, 2, 3]', 2), '[1,2]');
});

t.test('lossless: big integers and unicode survive byte for byte', async (t) => {
  const rex = '{"id":9007199254740993,"name":"Rex","categoryId":9223372036854775807,"status":"available"}';
  const ada = '{"id":-9223372036854775808,"name":"Ad\\u00e9 \\"the\\" \u00e9\u{1F436}","categoryId":1.50,"status":"available"}';
  const max = '{"id":2,"name":"Max","categoryId":0,"status":"sold"}';
  const text = `[${rex},${max},${ada},${max}]`;
  const r = filterArray(b(text), 20, 'status', 'available');
  t.equal(r.changed, true);
  t.ok(r.body.equals(b(`[${rex},${ada}]`)), 'exactly the bytes of the kept elements');
  t.match(r.body.toString(), /"id":9007199254740993,/, '2^53+1 unchanged');
  t.match(r.body.toString(), /"categoryId":9223372036854775807,/, 'int64 max unchanged');
  t.match(r.body.toString(), /"categoryId":1\.50,/, 'number text unchanged');
  // Cut by limit: the same.
  t.ok(filterArray(b(`[${rex},${max}]`), 1, 'status', undefined).body.equals(b(`[${rex}]`)));
});

t.test('status filter: only objects whose top-level status equals the filter', async (t) => {
  const text =
    '[{"id":1,"status":"available"},{"id":2,"status":"sold"},{"id":3},{"id":4,"status":null},' +
    '{"id":5,"status":["available"]},{"id":6,"status":1},{"id":7,"owner":{"status":"available"}},' +
    '{"id":8,"status":"Available"},{"id":9,"status":"available "},"available",null,[{"status":"available"}],' +
    '{"id":10,"status":"available"}]';
  t.equal(out(text, 20, 'available'), '[{"id":1,"status":"available"},{"id":10,"status":"available"}]');
  t.equal(out(text, 20, 'sold'), '[{"id":2,"status":"sold"}]');
  t.equal(out(text, 20, 'pending'), '[]');
  t.equal(filterArray(b(text), 20, 'status', 'pending').changed, true);
  // The nested object's status does not count, the top-level one does, wherever it is.
  t.equal(out('[{"owner":{"status":"sold"},"status":"available"}]', 5, 'sold'), '[]');
  t.equal(out('[{"status":"available","owner":{"status":"sold"}}]', 5, 'available'), '[{"status":"available","owner":{"status":"sold"}}]');
});

t.test('status filter and limit together: limit counts kept elements', async (t) => {
  const pets = [1, 2, 3, 4, 5, 6].map((id) => `{"id":${id},"status":"${id % 2 === 0 ? 'sold' : 'available'}"}`);
  const text = `[${pets.join(',')}]`;
  t.equal(out(text, 2, 'available'), `[${pets[0]},${pets[2]}]`);
  t.equal(out(text, 2, 'sold'), `[${pets[1]},${pets[3]}]`);
  t.equal(out(text, 3, 'sold'), `[${pets[1]},${pets[3]},${pets[5]}]`);
  t.equal(out(text, 100, 'sold'), `[${pets[1]},${pets[3]},${pets[5]}]`);
});

t.test('strings: brackets, commas, quotes and escapes inside strings are not structure', async (t) => {
  const tricky = '{"name":"]}[{,\\"status\\":\\"sold\\", \\\\","status":"available","note":"\\\\"}';
  const sold = '{"name":"x\\"],\\"status\\":\\"available","status":"sold"}';
  const text = `[${tricky},${sold},${tricky}]`;
  t.equal(out(text, 20, 'available'), `[${tricky},${tricky}]`);
  t.equal(out(text, 20, 'sold'), `[${sold}]`);
  t.equal(out(text, 1, undefined), `[${tricky}]`);
});

t.test('escaped spellings of the key and of the value are decoded', async (t) => {
  t.equal(out('[{"st\\u0061tus":"sold"},{"status":"available"}]', 20, 'sold'), '[{"st\\u0061tus":"sold"}]');
  t.equal(out('[{"status":"s\\u006fld"},{"status":"available"}]', 20, 'sold'), '[{"status":"s\\u006fld"}]');
  t.equal(out('[{"status":"sold\\u0020"},{"status":"sold"}]', 20, 'sold'), '[{"status":"sold"}]');
});

t.test('not a JSON array: ScanError', async (t) => {
  const bodies = ['', ' ', '\n', '{}', '{"pets":[]}', 'null', 'true', '1', '"[]"', '<html>[]</html>', 'pets: []', ']', '[] []', '[]x', '[1]]', '[1] [2]'];
  for (const text of bodies) {
    for (const status of [undefined, 'sold']) {
      throwsScan(t, text, 20, status, `${JSON.stringify(text)} status=${status}`);
    }
  }
  t.ok(new ScanError('x') instanceof Error, 'ScanError is an Error');
});

t.test('malformed elements it must read: ScanError', async (t) => {
  const bodies = [
    '[1 2]',
    '[1,]',
    '[,1]',
    '[,]',
    '[{"a"}]',
    '[{"a":}]',
    '[{"a":1,}]',
    '[{"a":1 "b":2}]',
    '[{a:1}]',
    "[{'a':1}]",
    '[{"a":1}}]',
    '[{"a":1]',
    '[{"a":[1,2}]',
    '["abc]',
    '[{"a":"x}]',
    '[{"status":"sold"',
    '[[1,2]',
  ];
  for (const text of bodies) {
    throwsScan(t, text, 20, undefined, text);
    throwsScan(t, text, 20, 'sold', `${text} with a status filter`);
  }
});

t.test('invalid scalar tokens and mismatched brackets are not a JSON array', async (t) => {
  const bodies = [
    '[tru]',
    '[nul]',
    '[True]',
    '[NaN]',
    '[Infinity]',
    '[1x]',
    '[--1]',
    '[01]',
    '[.5]',
    '[1.]',
    '[-]',
    '[+1]',
    '[1e]',
    '[{"a":[1}}]',
    '[{"a":{"b":1]}]',
    '[[1,2],[3}]',
    '[{"a":1:2}]',
    '[{"a":[1,]}]',
    '[{"a":{"b" 1}}]',
    '[{"status":"sold","a":nope}]',
  ];
  for (const text of bodies) {
    throwsScan(t, text, 20, undefined, text);
    throwsScan(t, text, 20, 'sold', `${text} with a status filter`);
  }
  // Valid nested values pass, as they are.
  const nested = '[{"a":{"b":[true,false,null,-0.5e+3,0,1E2,"x\\\\"]},"c":[],"d":{},"status":"sold"},[[[]]],-0]';
  const r = filterArray(b(nested), 20, 'status', undefined);
  t.equal(r.changed, false, 'valid nested values');
  t.equal(out(nested, 20, 'sold'), '[{"a":{"b":[true,false,null,-0.5e+3,0,1E2,"x\\\\"]},"c":[],"d":{},"status":"sold"}]');
});

t.test('elements after the limit-th kept one are never read', async (t) => {
  t.equal(out('[{"id":1},{"id":2},this is not JSON at all', 2), '[{"id":1},{"id":2}]');
  t.equal(out('[{"id":1,"status":"sold"},{"id":2,"status":"available"},{"id":3,"status":"sold"}, <html>', 2, 'sold'), '[{"id":1,"status":"sold"},{"id":3,"status":"sold"}]');
  // The last element is read whole: its end must be seen to know the array closes.
  throwsScan(t, '[{"id":1}]garbage', 1, undefined, 'trailing data after the last element');
});

t.test('truncated buffers: a result only when the cut is before the truncation point', async (t) => {
  const pets = [
    '{"id":1,"name":"a","categoryId":9223372036854775807,"status":"available"}',
    '{"id":22,"name":"b]\\",","categoryId":2,"status":"sold"}',
    '{"id":333,"name":"c","categoryId":3,"status":"available"}',
    '{"id":4444,"name":"d","categoryId":4,"status":"pending"}',
    '{"id":55555,"name":"e","categoryId":5,"status":"available"}',
  ];
  const full = `[ ${pets.join(' , ')} ]`;
  const cases: [number, string | undefined, number[]][] = [
    [2, undefined, [0, 1]],
    [2, 'available', [0, 2]],
    [1, 'sold', [1]],
    [1, 'pending', [3]],
  ];
  for (const [limit, status, keep] of cases) {
    const expected = `[${keep.map((k) => pets[k]).join(',')}]`;
    // The earliest prefix that suffices: past the separator that follows the last kept element.
    const lastKept = pets[keep[keep.length - 1]!]!;
    const needed = full.indexOf(',', full.indexOf(lastKept) + lastKept.length) + 1;
    let ok = 0;
    for (let n = 0; n <= full.length; n++) {
      const prefix = Buffer.from(full.slice(0, n));
      let result: string | undefined;
      let error: unknown;
      try {
        result = filterArray(prefix, limit, 'status', status).body.toString();
      } catch (err) {
        error = err;
      }
      if (n < needed) {
        if (!(error instanceof ScanError)) t.fail(`limit ${limit} status ${status}: prefix of ${n} bytes must throw, gave ${result}`);
      } else if (result !== expected) {
        t.fail(`limit ${limit} status ${status}: prefix of ${n} bytes gave ${result ?? String(error)}`);
      } else ok++;
    }
    t.equal(ok, full.length - needed + 1, `limit ${limit} status ${status}: every prefix from ${needed} bytes gives the same result`);
  }
});

t.test('a number cut at the end of the buffer is not taken as complete', async (t) => {
  throwsScan(t, '[1,2,34', 3, undefined, '34 may be the start of 345');
  throwsScan(t, '[1,2', 2, undefined, '2 may be the start of 23');
  t.equal(out('[1,2,', 2), '[1,2]');
  t.equal(out('[1,2,3', 2), '[1,2]');
});

t.test('large arrays: bounded output', async (t) => {
  const text = '[' + Array.from({ length: 1000 }, (_, i) => `{"id":${i + 1},"status":"${['available', 'pending', 'sold'][i % 3]}"}`).join(',') + ']';
  const all = JSON.parse(out(text, 100)) as { id: number }[];
  t.equal(all.length, 100);
  t.strictSame(all.map((p) => p.id), Array.from({ length: 100 }, (_, i) => i + 1));
  const pending = JSON.parse(out(text, 20, 'pending')) as { id: number; status: string }[];
  t.equal(pending.length, 20);
  t.ok(pending.every((p) => p.status === 'pending'));
  t.equal(pending[0]!.id, 2);
});

// ---------------------------------------------------------------------------------------------
// Against JSON.parse, on generated input (fast-check; bounded runs, fixed seed for reproducibility).

const STATUSES = ['available', 'pending', 'sold', 'other'];
const element = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.record({ id: fc.integer(), status: fc.constantFrom(...STATUSES), extra: fc.jsonValue({ maxDepth: 2 }) }, { requiredKeys: ['status'] }),
);

t.test('property: on valid arrays, the same elements JSON.parse would keep, as their bytes', async (t) => {
  fc.assert(
    fc.property(fc.array(element, { maxLength: 30 }), fc.integer({ min: 1, max: 40 }), fc.option(fc.constantFrom(...STATUSES), { nil: undefined }), fc.boolean(), (arr, limit, status, pretty) => {
      const text = JSON.stringify(arr, null, pretty ? 2 : undefined);
      const kept = arr.filter((v) => status === undefined || (v !== null && typeof v === 'object' && !Array.isArray(v) && (v as { status?: unknown }).status === status));
      const result = filterArray(b(text), limit, 'status', status);
      t.strictSame(JSON.parse(result.body.toString('utf8')), JSON.parse(JSON.stringify(kept.slice(0, limit))));
      t.equal(result.changed, kept.length > limit || kept.length !== arr.length);
    }),
    { numRuns: 300, seed: 6 },
  );
});

t.test('property: what it passes on is JSON, and JSON arrays are never refused', async (t) => {
  // One byte of a valid text replaced by a byte that often breaks JSON (or a raw control character).
  const BYTES = [...'{}[]",:\\ 0-.eE+tfnu\n'].map((c) => c.charCodeAt(0)).concat([0x00, 0x1f, 0x7f, 0xe9]);
  const disagreements: string[] = [];
  let refused = 0;
  fc.assert(
    fc.property(fc.array(element, { minLength: 1, maxLength: 8 }), fc.nat(), fc.constantFrom(...BYTES), (arr, at, byte) => {
      const buf = b(JSON.stringify(arr));
      buf[at % buf.length] = byte;
      let parsed: unknown;
      let parses = true;
      try {
        parsed = JSON.parse(buf.toString('utf8'));
      } catch {
        parses = false;
      }
      let accepted = true;
      try {
        filterArray(buf, 1_000_000, 'status', undefined);
      } catch (err) {
        if (!(err instanceof ScanError)) throw err;
        accepted = false;
      }
      if (!accepted) refused++;
      if (accepted !== (parses && Array.isArray(parsed))) disagreements.push(`${buf.toString('latin1')}: scanner ${accepted ? 'accepts' : 'refuses'}, JSON.parse ${parses ? 'parses' : 'refuses'}`);
    }),
    { numRuns: 2000, seed: 6 },
  );
  t.strictSame(disagreements, [], 'the scanner accepts exactly what JSON.parse parses as an array');
  t.ok(refused > 200 && refused < 1800, `both kinds of input were generated (${refused} of 2000 refused)`);
});

t.test('more kept elements than the scratch space starts with: all of them, in order', async (t) => {
  const pets = Array.from({ length: 1000 }, (_, i) => `{"id":${i},"status":"${i % 2 === 0 ? 'sold' : 'pending'}"}`);
  const text = `[${pets.join(',')}]`;
  t.equal(filterArray(b(text), 1000, 'status', undefined).body.toString(), text, 'all 1000, unchanged');
  t.equal(out(text, 999), `[${pets.slice(0, 999).join(',')}]`, 'cut after 999');
  t.equal(out(text, 1000, 'sold'), `[${pets.filter((_, i) => i % 2 === 0).join(',')}]`, '500 of 1000 by status');
  t.equal(out('[1,2,3]', 2), '[1,2]', 'and a small list after a large one');
});

// ---------------------------------------------------------------------------------------------
// A repeated top-level `status` is a contract violation; parsers disagree on
// which value they keep (JSON.parse: the last), so the element is dropped whatever the filter.

t.test('a repeated status member: the element is dropped under a status filter, whatever the values', async (t) => {
  const dup = '{"id":1,"status":"sold","status":"available"}';
  const ok = '{"id":2,"status":"available"}';
  t.equal(out(`[${dup},${ok}]`, 20, 'available'), `[${ok}]`, 'JSON.parse would read available: still dropped');
  t.equal(out(`[${dup},${ok}]`, 20, 'sold'), '[]', 'the first parser-reading (sold): dropped too');
  t.equal(out('[{"status":"sold","status":"sold"}]', 20, 'sold'), '[]', 'the same value twice: dropped (a strict parser refuses it)');
  t.equal(out('[{"status":"sold","st\\u0061tus":"sold"}]', 20, 'sold'), '[]', 'an escaped spelling is the same name');
  t.equal(out('[{"status":1,"status":"sold"}]', 20, 'sold'), '[]', 'a non-string first value');
  t.equal(out('[{"status":"sold","status":"sold","status":"sold"}]', 20, 'sold'), '[]', 'three times');
  const nested = '{"status":"sold","owner":{"status":"a","status":"b"}}';
  t.equal(out(`[${nested}]`, 20, 'sold'), `[${nested}]`, 'a repeated name inside a nested object is not the filter\'s concern');
  const r = filterArray(b(`[${dup}]`), 20, 'status', undefined);
  t.equal(r.changed, false, 'without a filter nothing is judged: limit only');
});

t.test('property: with generated repeated status members, kept iff exactly one status and it matches', async (t) => {
  const pet = fc.record({ id: fc.nat(), statuses: fc.array(fc.constantFrom(...STATUSES), { minLength: 0, maxLength: 3 }) });
  fc.assert(
    fc.property(fc.array(pet, { maxLength: 20 }), fc.constantFrom(...STATUSES), fc.integer({ min: 1, max: 25 }), (pets, status, limit) => {
      const texts = pets.map((p) => `{"id":${p.id}${p.statuses.map((s) => `,"status":${JSON.stringify(s)}`).join('')}}`);
      const expected = texts.filter((_, i) => pets[i]!.statuses.length === 1 && pets[i]!.statuses[0] === status).slice(0, limit);
      return out(`[${texts.join(',')}]`, limit, status) === `[${expected.join(',')}]`;
    }),
    { numRuns: 500, seed: 12 },
  );
  t.pass('500 generated lists');
});

// ---------------------------------------------------------------------------------------------
// The filter reads the field it is given: any name, not only `status`.

t.test('the filter on another field name: only that member counts', async (t) => {
  const cut = (s: string, limit: number, field: string, value: string): string => filterArray(b(s), limit, field, value).body.toString('utf8');
  const text = '[{"id":1,"kind":"cat","status":"sold"},{"id":2,"kind":"dog","status":"cat"},{"id":3,"status":"sold"},{"id":4,"kind":"cat"},{"id":5,"owner":{"kind":"cat"}}]';
  t.equal(cut(text, 20, 'kind', 'cat'), '[{"id":1,"kind":"cat","status":"sold"},{"id":4,"kind":"cat"}]');
  t.equal(cut(text, 1, 'kind', 'cat'), '[{"id":1,"kind":"cat","status":"sold"}]', 'limit counts kept elements');
  t.equal(cut(text, 20, 'kind', 'dog'), '[{"id":2,"kind":"dog","status":"cat"}]');
  t.equal(cut(text, 20, 'status', 'cat'), '[{"id":2,"kind":"dog","status":"cat"}]', 'the same list by status');
  // Fields asked for in turn: each call reads its own field.
  t.equal(cut(text, 20, 'kind', 'cat'), '[{"id":1,"kind":"cat","status":"sold"},{"id":4,"kind":"cat"}]', 'kind again after status');
  t.equal(cut(text, 20, 'kin', 'cat'), '[]', 'a prefix of the name is another name');
  t.equal(cut(text, 20, 'kinds', 'cat'), '[]', 'a longer name is another name');
  t.equal(cut('[{"\\u006bind":"cat"},{"kind":"c\\u0061t"},{"kind":"dog"}]', 20, 'kind', 'cat'), '[{"\\u006bind":"cat"},{"kind":"c\\u0061t"}]', 'escaped spellings of the key and the value');
  t.equal(cut('[{"kind":"cat","kind":"cat"},{"kind":"cat"}]', 20, 'kind', 'cat'), '[{"kind":"cat"}]', 'a repeated member of that name: dropped');
  t.equal(cut('[{"kind":"cat","status":"a","status":"b"}]', 20, 'kind', 'cat'), '[{"kind":"cat","status":"a","status":"b"}]', 'another name repeated is not the filter\'s concern');
  // A name that JSON writes with an escape: its plain token and an escaped spelling both match.
  t.equal(cut('[{"a\\"b":"x"},{"a\\u0022b":"x"},{"ab":"x"}]', 20, 'a"b', 'x'), '[{"a\\"b":"x"},{"a\\u0022b":"x"}]', 'a name with a quote');
  t.equal(cut('[{"k":"a\\"b"},{"k":"a\\u0022b"},{"k":"ab"}]', 20, 'k', 'a"b'), '[{"k":"a\\"b"},{"k":"a\\u0022b"}]', 'a value with a quote');
  t.throws(() => filterArray(b('[]'), 20, undefined, 'cat'), { message: /needs the field/ }, 'a value without a field is a caller\'s error');
  let error: unknown;
  try {
    filterArray(b('[]'), 20, undefined, 'cat');
  } catch (err) {
    error = err;
  }
  t.notOk(error instanceof ScanError, 'not a ScanError: no answer is blamed for it');
});

t.test('property: the filter on a generated field name, as JSON.parse would keep', async (t) => {
  const NAMES = ['kind', 'k', 'category', 'é', 'a b', 'x"y', 'long_field_name_of_the_shape'];
  const VALUES = ['cat', 'dog', '', 'ü'];
  fc.assert(
    fc.property(
      fc.constantFrom(...NAMES),
      fc.array(fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.dictionary(fc.constantFrom(...NAMES, 'status'), fc.oneof(fc.constantFrom(...VALUES), fc.jsonValue({ maxDepth: 1 })))), { maxLength: 20 }),
      fc.integer({ min: 1, max: 25 }),
      fc.constantFrom(...VALUES),
      (field, arr, limit, value) => {
        const kept = arr.filter((v) => v !== null && typeof v === 'object' && !Array.isArray(v) && (v as Record<string, unknown>)[field] === value);
        const result = filterArray(b(JSON.stringify(arr)), limit, field, value);
        return JSON.stringify(JSON.parse(result.body.toString('utf8'))) === JSON.stringify(kept.slice(0, limit));
      },
    ),
    { numRuns: 500, seed: 39 },
  );
  t.pass('500 generated lists');
});

// ---------------------------------------------------------------------------------------------
// Without a filter, an element that is an object of scalars is skipped a word at a time (flat.ts);
// anything else is read by skipValue from the element's start. The two must agree on every input.

/** Whether filterArray (no filter) accepts the text, and what it sends. */
function cutOf(text: string | Buffer, limit: number): string {
  try {
    const r = filterArray(typeof text === 'string' ? b(text) : text, limit, 'status', undefined);
    return `${r.changed ? 'changed' : 'same'} ${r.body.toString('latin1')}`;
  } catch (err) {
    if (err instanceof ScanError) return 'ScanError';
    throw err;
  }
}

t.test('flat elements: strings of every length, escapes, UTF-8 and what a string may not hold', async (t) => {
  for (let length = 0; length <= 13; length++) {
    const name = 'abcdefghijklm'.slice(0, length);
    const pet = `{"id":1,"${name}":"${name}","status":"sold"}`;
    t.equal(cutOf(`[${pet},${pet}]`, 2), `same [${pet},${pet}]`, `a key and a value of ${length} bytes`);
    t.equal(cutOf(`[${pet},${pet}]`, 1), `changed [${pet}]`, `cut, ${length} bytes`);
    // The string's closing quote at every place in a word, and the array's end right after it.
    t.equal(cutOf(`[{"${name}":"${name}"}]`, 5), `same [{"${name}":"${name}"}]`);
  }
  const escaped = String.raw`{"name":"a\"b\\c\/d\b\f\n\r\t\u00e9","st\u0061tus":"sold"}`;
  t.equal(cutOf(`[${escaped},{"id":2}]`, 1), `changed [${escaped}]`, 'escapes: read by skipValue, the same bytes');
  const utf8 = '{"name":"Ad\u00e9 \u{1F436} \u6f22\u5b57","status":"sold"}';
  t.equal(filterArray(b(`[${utf8},${utf8}]`), 1, 'status', undefined).body.toString('utf8'), `[${utf8}]`, 'UTF-8 passes as it is');
  for (const bad of [String.raw`"a\x"`, String.raw`"\u12G4"`, String.raw`"\u12"`, '"a\u0001b"', '"tab\there"', '"new\nline"', '"\u001f"', '"ab', '"abcdefgh']) {
    t.equal(cutOf(`[{"name":${bad}},{"id":2}]`, 5), 'ScanError', `refused: ${JSON.stringify(bad)}`);
    t.equal(cutOf(`[{${bad}:1},{"id":2}]`, 5), 'ScanError', `refused as a key: ${JSON.stringify(bad)}`);
  }
  // Bytes >= 0x80 are string bytes here, each alone (UTF-8 itself is the response contract's check).
  t.equal(cutOf(Buffer.from('[{"name":"\u007f\u0080\u00ff\u00e9"}]', 'latin1'), 5), 'same [{"name":"\u007f\u0080\u00ff\u00e9"}]', 'DEL and bytes >= 0x80');
});

t.test('flat elements: numbers and literals as JSON has them', async (t) => {
  const good = ['0', '-0', '7', '-7', '10', '1234', '12345', '9007199254740993', '-9223372036854775808', '92233720368547758079223372036854775807', '1.5', '-0.0', '1e5', '1E+5', '2.5e-3', 'true', 'false', 'null'];
  for (const v of good) {
    const pet = `{"id":${v},"n":${v}}`;
    t.equal(cutOf(`[${pet},${pet}]`, 2), `same [${pet},${pet}]`, `${v} kept`);
    t.equal(cutOf(`[${pet},${pet}]`, 1), `changed [${pet}]`, `${v} cut after`);
    t.equal(cutOf(`[{"id":${v}}]`, 1), `same [{"id":${v}}]`, `${v} before the object's end`);
  }
  const bad = ['01', '-01', '00', '-', '--1', '+1', '1.', '.5', '1e', '1e+', '0x10', '1a', '12345a', '1234567a', '1234:678', '9999;999', '12345678<', 'tru', 'truE', 'trueish', 'nul', 'nulll', 'fals', 'falsey', 'False', 'NaN', 'Infinity', 'undefined', "'a'", ''];
  for (const v of bad) {
    t.equal(cutOf(`[{"id":${v}},{"id":2}]`, 5), 'ScanError', `${JSON.stringify(v)} refused`);
    t.equal(cutOf(`[{"id":1,"n":${v}}]`, 5), 'ScanError', `${JSON.stringify(v)} refused, last member`);
  }
});

t.test('flat elements: spaces between tokens, nested values and other elements', async (t) => {
  const spaced = ['{ "id" : 1 , "name" : "a b" }', '{\n\t"id":1,\r\n"status":"sold"\n}', '{ }', '{}', '{"a" :true ,"b": null}'];
  for (const e of spaced) {
    t.equal(cutOf(`[${e}, ${e}]`, 2), `same [${e}, ${e}]`, `kept: ${JSON.stringify(e)}`);
    t.equal(cutOf(`[ ${e} ,\n${e} ]`, 1), `changed [${e}]`, `cut: ${JSON.stringify(e)}`);
  }
  const nested = ['{"id":1,"tags":["a","b"],"status":"sold"}', '{"id":1,"owner":{"name":"x","pets":[{"id":2}]}}', '{"a":[]}', '{"a":{}}'];
  for (const e of nested) {
    t.equal(cutOf(`[${e},${e}]`, 2), `same [${e},${e}]`, `kept: ${e}`);
    t.equal(cutOf(`[${e},${e}]`, 1), `changed [${e}]`, `cut: ${e}`);
  }
  t.equal(cutOf('[{"a":1},[1,{"b":2}],"s",3,true,{"c":"d"}]', 6), 'same [{"a":1},[1,{"b":2}],"s",3,true,{"c":"d"}]', 'elements of every kind');
  t.equal(cutOf('[{"a":1},[1,{"b":2}],"s",3,true,{"c":"d"}]', 5), 'changed [{"a":1},[1,{"b":2}],"s",3,true]');
  for (const bad of ['{"a":1,}', '{,"a":1}', '{"a" 1}', '{"a":1 "b":2}', '{"a"::1}', '{"a":1;"b":2}', '{a:1}', '{"a":1]', '{"a":[1}', '{"a":{"b":1}', '{"a":1}}', '{"a":1']) {
    t.equal(cutOf(`[${bad},{"id":2}]`, 5), 'ScanError', `refused: ${bad}`);
    t.equal(cutOf(`[{"id":0},${bad}]`, 5), 'ScanError', `refused second: ${bad}`);
  }
});

t.test('flat elements: exactly the limit, one more, and every truncation of a flat list', async (t) => {
  const pets = Array.from({ length: 5 }, (_, i) => `{"id":${9007199254740993n + BigInt(i)},"name":"pet number ${i}","categoryId":9223372036854775807,"status":"${['available', 'pending', 'sold'][i % 3]}"}`);
  const text = `[${pets.join(',')}]`;
  t.equal(cutOf(text, 5), `same ${text}`, 'exactly the limit: the same buffer');
  t.equal(cutOf(text, 4), `changed [${pets.slice(0, 4).join(',')}]`, 'one more than the limit: cut');
  t.equal(cutOf(`[${pets.slice(0, 4).join(',')}]`, 5), `same [${pets.slice(0, 4).join(',')}]`, 'one less');
  for (const limit of [2, 5]) {
    const needed = limit === 5 ? text.length : text.indexOf(pets[limit]!);
    for (let n = 0; n <= text.length; n++) {
      const got = cutOf(text.slice(0, n), limit);
      if (n < needed) {
        if (got !== 'ScanError') t.fail(`limit ${limit}: a prefix of ${n} bytes gave ${got}`);
      } else if (got !== `${limit === 5 ? 'same' : 'changed'} [${pets.slice(0, limit).join(',')}]`) t.fail(`limit ${limit}: a prefix of ${n} bytes gave ${got}`);
    }
  }
  t.pass('every prefix');
});

t.test('flat elements: a body larger than the scratch copy is read whole', async (t) => {
  const pet = (i: number): string => `{"id":${i},"name":"${'n'.repeat(40)}","status":"sold"}`;
  const pets = Array.from({ length: 2000 }, (_, i) => pet(i));
  const text = `[${pets.join(',')}]`;
  t.ok(text.length > 64 * 1024, 'over 64 KiB');
  t.equal(cutOf(text, 2000), `same ${text}`, 'all of it');
  t.equal(cutOf(text, 1999), `changed [${pets.slice(0, 1999).join(',')}]`, 'cut past the copy');
  const broken = `[${pets.slice(0, 1990).join(',')},{"id":1990,"name":"x" "status":"sold"}]`;
  t.equal(cutOf(broken, 2000), 'ScanError', 'a malformed element past the copy is refused');
  t.equal(cutOf(`[${pets.slice(0, 1900).join(',')},{"id":01}]`, 2000), 'ScanError', 'a bad number past the copy');
  // An element that spans the copy's end.
  for (let pad = 0; pad < 8; pad++) {
    const head = `[{"name":"${'x'.repeat(64 * 1024 - 20 + pad)}"}`;
    t.equal(cutOf(`${head},{"id":123456789}]`, 5), `same ${head},{"id":123456789}]`, `spanning the end, ${pad}`);
  }
  // The copy's last bytes, read one by one: a control character or an escape there is still judged.
  for (const key of ['a', 'ab', 'abc', 'abcd']) {
    for (let at = 64 * 1024 - 8; at < 64 * 1024 + 2; at++) {
      const open = `[{"${key}":"`;
      for (const c of ['\u0001', '\\q']) {
        const head = `${open}${'x'.repeat(at - open.length)}${c}"}`;
        t.equal(cutOf(`${head},{"id":1}]`, 5), 'ScanError', `${JSON.stringify(c)} at ${at}, key ${key}`);
      }
      const ok = `${open}${'x'.repeat(at - open.length)}\\n"},{"id":1}]`;
      t.equal(cutOf(ok, 5), `same ${ok}`, `an escape at ${at}, key ${key}`);
    }
  }
});

t.test('property: flat lists with one byte changed, as JSON.parse judges them', async (t) => {
  const scalar = fc.oneof(fc.string({ maxLength: 12 }), fc.integer(), fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null));
  const object = fc.dictionary(fc.string({ maxLength: 10 }), scalar, { maxKeys: 6 });
  const BYTES = [...'{}[]",:\\ 0123456789-.eE+tfnual\n\t'].map((c) => c.charCodeAt(0)).concat([0x00, 0x1f, 0x7f, 0xe9]);
  const disagreements: string[] = [];
  let refused = 0;
  fc.assert(
    fc.property(fc.array(object, { minLength: 1, maxLength: 8 }), fc.nat(), fc.constantFrom(...BYTES), fc.boolean(), (arr, at, byte, spaced) => {
      const text = `[${arr.map((o) => `{${Object.entries(o).map(([k, v]) => `${JSON.stringify(k)}${spaced ? ' : ' : ':'}${typeof v === 'bigint' ? v.toString() : JSON.stringify(v)}`).join(',')}}`).join(',')}]`;
      const buf = b(text);
      buf[at % buf.length] = byte;
      let parses = true;
      try {
        parses = Array.isArray(JSON.parse(buf.toString('utf8')));
      } catch {
        parses = false;
      }
      const got = cutOf(buf, 1_000_000);
      if (got === 'ScanError') refused++;
      if ((got !== 'ScanError') !== parses) disagreements.push(`${buf.toString('latin1')}: ${got}`);
    }),
    { numRuns: 3000, seed: 40 },
  );
  t.strictSame(disagreements, [], 'accepted exactly when JSON.parse parses an array');
  t.ok(refused > 300 && refused < 2700, `both kinds generated (${refused} of 3000 refused)`);
});
