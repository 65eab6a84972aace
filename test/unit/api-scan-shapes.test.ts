/**
 * Shape scanners (src/api/scan) compiled from shapes other than Pet: an Order (int32 among its
 * fields), a shape whose list filter reads a field of another name, a shape with a forbidden field.
 * Each is held to the reference (parseLossless, then Ajv on the shape's JSON Schema) on a table and
 * on generated bodies (seeded, bounded in count); then scanners of several shapes used in turn, and
 * the shapes compileShape refuses.
 */
import t from 'tap';
import type { ObjectShape } from '../../src/api/model.js';
import { compileShape, filterArray, type ShapeScan, type ShapeScanner, type UnknownFieldMode } from '../../src/api/scan/index.js';
import { parseLossless, stringifyLossless } from '../../src/core/contract.js';
import { PET_SHAPE, referenceOf, type Verdict } from '../helpers/pet-shape.js';

type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

const MODES: readonly UnknownFieldMode[] = ['drop', 'refuse', 'pass'];

const ORDER_SHAPE: ObjectShape = {
  name: 'Order',
  fields: [
    { name: 'id', type: { kind: 'int64' } },
    { name: 'petId', type: { kind: 'int64' } },
    { name: 'quantity', type: { kind: 'int32' } },
    { name: 'status', type: { kind: 'enum', values: ['placed', 'approved', 'delivered'] } },
  ],
  required: ['id', 'petId', 'quantity'],
  forbidden: [],
};

/** A list filtered on a field that is not called `status`, the filter field not last. */
const TICKET_SHAPE: ObjectShape = {
  name: 'Ticket',
  fields: [
    { name: 'id', type: { kind: 'int64' } },
    { name: 'priority', type: { kind: 'enum', values: ['low', 'high', 'urgent'] } },
    { name: 'title', type: { kind: 'string' } },
  ],
  required: ['id', 'title'],
  forbidden: [],
};

/** NewPet's way: `id` is never sent (`id: false` in the schema). */
const DRAFT_SHAPE: ObjectShape = {
  name: 'Draft',
  fields: [
    { name: 'name', type: { kind: 'string' } },
    { name: 'count', type: { kind: 'int32' } },
  ],
  required: ['name'],
  forbidden: ['id', 'secret'],
};

function verdictOf(scanner: ShapeScanner, body: Buffer, list: boolean, mode: UnknownFieldMode): Verdict {
  const r = scanner.scanBody(body, list, mode);
  if (r.problems.length > 0) {
    const unknown = r.problems.filter((p) => p.startsWith('unknown field')).map((p) => p.slice(15, -1));
    return unknown.length > 0 ? { valid: false, unknown: unknown.sort() } : { valid: false };
  }
  if (mode !== 'drop') return { valid: true };
  return { valid: true, sent: stringifyLossless(parseLossless(r.body ?? body)) };
}

/** The scanner and the reference agree on `text`, as an object and as the only item of a list, in every mode. */
function agree(t: Tap, shape: ObjectShape, scanner: ShapeScanner, text: string, label: string): void {
  const reference = referenceOf(shape);
  for (const [body, list] of [
    [text, false],
    [`[${text}]`, true],
  ] as const) {
    for (const mode of MODES) t.strictSame(verdictOf(scanner, Buffer.from(body), list, mode), reference(Buffer.from(body), list, mode), `${label} [${list ? 'list' : 'object'}, ${mode}]: ${body}`);
  }
}

const orders = compileShape(ORDER_SHAPE, { filterField: 'status' });

t.test('int32: an integer literal within -2^31..2^31-1, on the common path and the general one', async (t) => {
  const cases: readonly (readonly [string, boolean])[] = [
    ['2147483647', true],
    ['2147483648', false],
    ['-2147483648', true],
    ['-2147483649', false],
    ['1.0', false],
    ['1e2', false],
    ['1E+2', false],
    ['0', true],
    ['-0', true],
    ['01', false],
    ['7', true],
    ['999999999', true],
    ['1000000000', true],
    ['2999999999', false],
    ['9999999999', false],
    ['21474836470', false],
    ['99999999999999999999', false],
    ['"1"', false],
    ['null', false],
    ['[1]', false],
  ];
  for (const [quantity, valid] of cases) {
    for (const text of [`{"id":1,"petId":2,"quantity":${quantity},"status":"placed"}`, `{ "quantity" : ${quantity} , "id":1, "petId":2 }`]) {
      const r = orders.scanBody(Buffer.from(text), false, 'pass');
      t.equal(r.problems.length === 0, valid, `${text}: ${valid ? 'valid' : 'invalid'}`);
      if (!valid && quantity !== '01') t.strictSame(r.problems, ['/quantity must be an integer within int32'], `${text}: the field named`);
      agree(t, ORDER_SHAPE, orders, text, `quantity ${quantity}`);
    }
  }
  // int64 beside it keeps its own bounds.
  agree(t, ORDER_SHAPE, orders, '{"id":9223372036854775807,"petId":-9223372036854775808,"quantity":1}', 'int64 bounds beside an int32');
  agree(t, ORDER_SHAPE, orders, '{"id":9223372036854775808,"petId":1,"quantity":1}', 'int64 above its bound');
  agree(t, ORDER_SHAPE, orders, '{"id":2147483648,"petId":1,"quantity":2147483647}', 'an int64 above 2^31');
  t.strictSame(orders.scanBody(Buffer.from('{"id":1,"petId":2}'), false, 'pass').problems, ["/ must have required property 'quantity'"]);
  t.strictSame(orders.scanBody(Buffer.from('[{"id":1,"petId":2,"quantity":1,"status":"sold"}]'), true, 'pass').problems, ['/0/status must be equal to one of the allowed values']);
});

/** mulberry32: seeded, so a failure is reproduced by its case number. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let x = s;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

function pick<T>(rand: () => number, xs: readonly T[]): T {
  return xs[Math.floor(rand() * xs.length)]!;
}

const INT64S = ['0', '-0', '7', '-7', '9007199254740993', '9223372036854775807', '-9223372036854775808', '9223372036854775808', '-9223372036854775809', '1.0', '1e2', '"1"', 'null', '[]'];
const INT32S = ['0', '-0', '42', '-42', '2147483647', '-2147483648', '2147483648', '-2147483649', '99999999999', '1.0', '1e2', '"1"', 'null', '{}'];
const STRINGS = ['""', '"Rex"', '"\\u00e9t\\u00e9"', '"été 🐕"', '"a\\"b\\\\c"', '7', 'null', '["x"]'];
const EXTRA_NAMES = ['"internalNote"', '"__proto__"', '"x"', '"id "', '""', '"\\u0069d"', '"secret"', '"id"'];
const EXTRA_VALUES = ['1', '"v"', 'null', 'true', '[1,[2,{"a":"b"}]]', '{"a":{"b":[]}}'];
const SPACES = ['', '', '', ' ', '\n', '\r\n  '];

/** Values for a field: the valid ones first (`valid` of them), then the faults. */
function valuesOf(shape: ObjectShape, name: string): { values: readonly string[]; valid: number } {
  const type = shape.fields.find((f) => f.name === name)!.type;
  switch (type.kind) {
    case 'int64':
      return { values: INT64S, valid: 7 };
    case 'int32':
      return { values: INT32S, valid: 6 };
    case 'string':
      return { values: STRINGS, valid: 5 };
    case 'enum': {
      const valid = type.values.map((v) => JSON.stringify(v));
      return { values: [...valid, `"${type.values[0]!.slice(0, -1)}\\u00${type.values[0]!.charCodeAt(type.values[0]!.length - 1).toString(16)}"`, '"lost"', '""', 'null', '1'], valid: valid.length + 1 };
    }
  }
}

/** One generated object of `shape`: valid fields mostly, each kind of fault sometimes. */
function objectText(rand: () => number, shape: ObjectShape): string {
  const member = (name: string): string => {
    const { values, valid } = valuesOf(shape, name);
    const value = rand() < 0.75 ? values[Math.floor(rand() * valid)]! : pick(rand, values);
    return `"${name}"${pick(rand, SPACES)}:${pick(rand, SPACES)}${value}`;
  };
  const names = shape.fields.map((f) => f.name);
  const members: string[] = [];
  for (const name of names) if (rand() < 0.93) members.push(member(name));
  while (rand() < 0.25) members.push(`${pick(rand, EXTRA_NAMES)}:${pick(rand, EXTRA_VALUES)}`);
  if (rand() < 0.15 && members.length > 0) members.push(rand() < 0.5 ? pick(rand, members) : member(pick(rand, names)));
  if (rand() < 0.3) members.sort(() => rand() - 0.5);
  const ws = () => pick(rand, SPACES);
  return `${ws()}{${ws()}${members.join(`${ws()},${ws()}`)}${ws()}}${ws()}`;
}

function bodyText(rand: () => number, shape: ObjectShape, list: boolean): string {
  let text = list ? `[${Array.from({ length: Math.floor(rand() * 4) }, () => (rand() < 0.05 ? pick(rand, ['5', 'null', '[]']) : objectText(rand, shape))).join(',')}]` : objectText(rand, shape);
  const r = rand();
  if (r < 0.06) text = text.slice(0, Math.floor(rand() * text.length));
  else if (r < 0.1 && text.length > 0) {
    const at = Math.floor(rand() * text.length);
    text = text.slice(0, at) + pick(rand, ['"', ',', ':', '{', '}', '[', ']', '\\', ' ', 'x', '0']) + text.slice(at + 1);
  }
  return text;
}

for (const [shape, filterField] of [
  [ORDER_SHAPE, 'status'],
  [TICKET_SHAPE, 'priority'],
  [DRAFT_SHAPE, undefined],
] as const) {
  t.test(`differential: generated ${shape.name} bodies, the same verdict as Ajv (seeded, 1,500 cases)`, async (t) => {
    const scanner = compileShape(shape, filterField === undefined ? {} : { filterField });
    const reference = referenceOf(shape);
    const rand = random(shape.name.length * 1000 + 39);
    const failures: string[] = [];
    let valid = 0;
    let invalid = 0;
    for (let k = 0; k < 1500; k++) {
      const list = k % 2 === 1;
      const body = Buffer.from(bodyText(rand, shape, list));
      for (const mode of MODES) {
        const want = reference(body, list, mode);
        const got = verdictOf(scanner, body, list, mode);
        if (JSON.stringify(got) !== JSON.stringify(want)) failures.push(`case ${k} ${mode}: ${body.toString()} scanner ${JSON.stringify(got)} Ajv ${JSON.stringify(want)}`);
        if (mode === 'pass' && want.valid) valid++;
        else if (mode === 'pass') invalid++;
      }
    }
    t.strictSame(failures.slice(0, 10), [], 'no disagreement');
    t.ok(valid > 200 && invalid > 200, `both verdicts reached: ${valid} valid, ${invalid} invalid`);
  });
}

/** The cut then the check as two passes, and as one (scanPage, then finish): the same outcome. */
function outcome(sent: Buffer, r: ShapeScan): string {
  return JSON.stringify({ sent: sent.toString('latin1'), problems: r.problems, body: r.body?.toString('latin1') });
}

function twoPasses(scanner: ShapeScanner, field: string, body: Buffer, limit: number, value: string | undefined, mode: UnknownFieldMode): string {
  let out: Buffer;
  try {
    out = filterArray(body, limit, field, value).body;
  } catch {
    return 'refused';
  }
  return outcome(out, scanner.scanBody(out, true, mode));
}

function onePass(scanner: ShapeScanner, body: Buffer, limit: number, value: string | undefined, mode: UnknownFieldMode): string {
  let page;
  try {
    page = scanner.scanPage(body, limit, value);
  } catch {
    return 'refused';
  }
  if (page.changed !== (page.findings === undefined)) return 'findings given for a changed list, or none for an unchanged one';
  return outcome(page.body, page.findings === undefined ? scanner.scanBody(page.body, true, mode) : scanner.finish(page.findings, mode));
}

t.test('the filter on another field name: scanPage keeps what filterArray on that field keeps (seeded, 1,000 lists)', async (t) => {
  const tickets = compileShape(TICKET_SHAPE, { filterField: 'priority' });
  const text = '[{"id":1,"priority":"high","title":"a"},{"id":2,"title":"b","status":"high"},{"id":3,"priority":"low","title":"c"},{"id":4,"priority":"high","title":"d"}]';
  const page = tickets.scanPage(Buffer.from(text), 20, 'high');
  t.equal(page.body.toString(), '[{"id":1,"priority":"high","title":"a"},{"id":4,"priority":"high","title":"d"}]', 'items whose priority is high, and only those');
  t.equal(page.changed, true);
  t.equal(tickets.scanPage(Buffer.from(text), 1, 'low').body.toString(), '[{"id":3,"priority":"low","title":"c"}]');
  t.throws(() => compileShape(TICKET_SHAPE).scanPage(Buffer.from(text), 20, 'high'), /without a filter field/, 'a filter value needs a filter field');
  const rand = random(11);
  const failures: string[] = [];
  let filtered = 0;
  for (let k = 0; k < 1000; k++) {
    const body = Buffer.from(bodyText(rand, TICKET_SHAPE, true));
    const limit = 1 + Math.floor(rand() * 4);
    const value = rand() < 0.5 ? pick(rand, ['low', 'high', 'urgent']) : undefined;
    for (const mode of MODES) {
      const want = twoPasses(tickets, 'priority', body, limit, value, mode);
      const got = onePass(tickets, body, limit, value, mode);
      if (got !== want) failures.push(`case ${k} limit ${limit} priority ${value} ${mode}: ${body.toString()}\n  one pass ${got}\n  two passes ${want}`);
    }
    try {
      if (tickets.scanPage(body, limit, value).changed) filtered++;
    } catch {
      // A list the cut refuses: compared above.
    }
  }
  t.strictSame(failures.slice(0, 5), [], 'no difference');
  t.ok(filtered > 100, `lists filtered or cut: ${filtered}`);
});

t.test('forbidden fields: a problem when present, in every mode, wherever they are', async (t) => {
  const drafts = compileShape(DRAFT_SHAPE);
  for (const mode of MODES) {
    t.strictSame(drafts.scanBody(Buffer.from('{"name":"x","id":1}'), false, mode).problems, ['/id must not be sent'], `${mode}: named`);
    t.strictSame(drafts.scanBody(Buffer.from('{"id":"1","name":"x","count":2}'), false, mode).problems, ['/id must not be sent'], `${mode}: first, any value`);
    t.strictSame(drafts.scanBody(Buffer.from('[{"name":"x"},{"name":"y","secret":null,"n\\u0061me":"y"}]'), true, mode).problems, ['/1/secret must not be sent'], `${mode}: in a list`);
    t.strictSame(drafts.scanBody(Buffer.from('{"\\u0069d":1,"name":"x"}'), false, mode).problems, ['/id must not be sent'], `${mode}: an escaped spelling`);
    t.strictSame(drafts.scanBody(Buffer.from('{"name":"x","count":1}'), false, mode), { problems: [] }, `${mode}: absent, valid`);
  }
  t.strictSame(drafts.scanBody(Buffer.from('{"name":"x","other":1}'), false, 'refuse').problems, ["unknown field 'other'"], 'an unknown field is not forbidden');
  t.strictSame(drafts.scanBody(Buffer.from('{"name":"x","other":1}'), false, 'drop'), { problems: [], body: Buffer.from('{"name":"x"}') }, 'and is dropped');
  t.strictSame(drafts.scanBody(Buffer.from('{"name":"x","id":1,"id":2}'), false, 'pass').problems, ['body is not valid JSON: a member name repeated with another value'], 'repeated with another value: not JSON, as a parser says');
  const page = drafts.scanPage(Buffer.from('[{"name":"x","id":1},{"name":"y"}]'), 20, undefined);
  t.strictSame(page.findings === undefined ? undefined : drafts.finish(page.findings, 'drop').problems, ['/0/id must not be sent'], 'found on a page, finished');
  for (const text of ['{"name":"x","id":1}', '{"id":9223372036854775808,"name":"x"}', '{"name":"x","secret":{"a":[1]}}', '{"name":"x","count":2147483648,"id":1}']) agree(t, DRAFT_SHAPE, drafts, text, text);
});

t.test('scanners of several shapes used in turn: each gives its own verdicts', async (t) => {
  const pets = compileShape(PET_SHAPE, { filterField: 'status' });
  const tickets = compileShape(TICKET_SHAPE, { filterField: 'priority' });
  const scanners: readonly (readonly [ObjectShape, ShapeScanner, string])[] = [
    [PET_SHAPE, pets, 'status'],
    [ORDER_SHAPE, orders, 'status'],
    [TICKET_SHAPE, tickets, 'priority'],
  ];
  const rand = random(2026);
  // Bodies of every shape, each judged by every scanner, the scanners taking turns call by call;
  // each answer compared with the same scanner's answer on its own (computed first, in a block).
  const bodies = Array.from({ length: 300 }, (_, k) => Buffer.from(bodyText(rand, scanners[k % 3]![0], true)));
  const alone = scanners.map(([, s]) => bodies.map((b) => JSON.stringify(s.scanBody(b, true, 'drop'))));
  const failures: string[] = [];
  for (let k = 0; k < bodies.length; k++) {
    for (let j = 0; j < scanners.length; j++) {
      const got = JSON.stringify(scanners[(j + k) % 3]![1].scanBody(bodies[k]!, true, 'drop'));
      if (got !== alone[(j + k) % 3]![k]) failures.push(`body ${k} scanner ${(j + k) % 3}: ${got} alone ${alone[(j + k) % 3]![k]}`);
    }
  }
  t.strictSame(failures.slice(0, 5), [], 'the same verdicts in turn as alone');
  // A page's findings outlive calls of other scanners: finished later, by the scanner that made them.
  const petList = Buffer.from('[{"id":1,"name":"a","categoryId":1,"internalNote":"n"},{"id":2,"name":"b","categoryId":2,"status":"sold"}]');
  const orderList = Buffer.from('[{"id":1,"petId":1,"quantity":2147483648},{"id":2,"petId":2,"quantity":1,"note":"x"}]');
  const petPage = pets.scanPage(petList, 20, undefined);
  const orderPage = orders.scanPage(orderList, 20, undefined);
  t.strictSame(tickets.scanPage(Buffer.from('[{"id":1,"title":"t","priority":"low"}]'), 20, 'high').body.toString(), '[]', 'a third scanner between');
  t.strictSame(petPage.findings === undefined ? undefined : pets.finish(petPage.findings, 'drop'), { problems: [], body: Buffer.from('[{"id":1,"name":"a","categoryId":1},{"id":2,"name":"b","categoryId":2,"status":"sold"}]') });
  t.strictSame(orderPage.findings === undefined ? undefined : orders.finish(orderPage.findings, 'drop').problems, ['/0/quantity must be an integer within int32']);
  // Pages cut in turn, each on its own filter field.
  t.equal(pets.scanPage(petList, 20, 'sold').body.toString(), '[{"id":2,"name":"b","categoryId":2,"status":"sold"}]');
  t.equal(orders.scanPage(Buffer.from('[{"id":1,"petId":1,"quantity":1,"status":"placed"},{"id":2,"petId":1,"quantity":1,"status":"sold"}]'), 20, 'placed').body.toString(), '[{"id":1,"petId":1,"quantity":1,"status":"placed"}]');
  t.equal(pets.scanPage(petList, 1, undefined).body.toString(), '[{"id":1,"name":"a","categoryId":1,"internalNote":"n"}]');
});

t.test('compileShape refuses what it cannot check, naming the field', async (t) => {
  const base = { name: 'S', required: [], forbidden: [] };
  const refused: readonly (readonly [string, ObjectShape, { filterField?: string }, RegExp])[] = [
    ['an unknown type', { ...base, fields: [{ name: 'when', type: { kind: 'date-time' } as never }] }, {}, /S\.when has a type the scanner does not implement/],
    ['an empty enum', { ...base, fields: [{ name: 'state', type: { kind: 'enum', values: [] } }] }, {}, /S\.state: an enum of strings/],
    ['an enum of numbers', { ...base, fields: [{ name: 'state', type: { kind: 'enum', values: [1] as never } }] }, {}, /S\.state: an enum of strings/],
    ['31 fields', { ...base, fields: Array.from({ length: 31 }, (_, k) => ({ name: `f${k}`, type: { kind: 'string' as const } })) }, {}, /31 fields, at most 30/],
    ['a required name that is no field', { ...base, fields: [{ name: 'a', type: { kind: 'string' } }], required: ['b'] }, {}, /required 'b' is not a field/],
    ['a field twice', { ...base, fields: [{ name: 'a', type: { kind: 'string' } }, { name: 'a', type: { kind: 'int64' } }] }, {}, /S\.a is defined twice/],
    ['a field also forbidden', { ...base, fields: [{ name: 'a', type: { kind: 'string' } }], forbidden: ['a'] }, {}, /S\.a is both a field and forbidden/],
    ['a filter on no field', { ...base, fields: [{ name: 'a', type: { kind: 'string' } }] }, { filterField: 'b' }, /S\.b: a list's filter reads an enum field/],
    ['a filter on a string', { ...base, fields: [{ name: 'a', type: { kind: 'string' } }] }, { filterField: 'a' }, /S\.a: a list's filter reads an enum field/],
  ];
  for (const [label, shape, options, message] of refused) t.throws(() => compileShape(shape, options), { message }, label);
  t.doesNotThrow(() => compileShape({ ...base, fields: Array.from({ length: 30 }, (_, k) => ({ name: `f${k}`, type: { kind: 'int32' as const } })) }), '30 fields');
});
