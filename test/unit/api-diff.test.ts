/**
 * diffDocuments: each kind of change between two interface documents, found at its JSON path and
 * marked breaking or not; nothing for an identical document or a reworded one; a loop of
 * references ends. formatChanges and documentReport: the report `check` prints.
 */
import t from 'tap';
import { diffDocuments, documentReport, formatChanges, type Change } from '../../src/api/diff.js';
import type { TapTest } from '../helpers/assert.js';
import { deleteAt, getAt, setAt, shippedDocument, type Doc, type Key } from '../helpers/openapi.js';

type Edit = (d: Doc) => void;
interface Expected {
  readonly kind: Change['kind'];
  readonly path: string;
  readonly breaking: boolean;
  readonly message: RegExp;
}

const LIST = ['paths', '/pets', 'get'];
const CREATE = ['paths', '/pets', 'post'];
const GET = ['paths', '/pets/{petId}', 'get'];
const LIMIT = [...LIST, 'parameters', 0];
const SCHEMAS = ['components', 'schemas'];
const P_LIST = '$.paths["/pets"].get';
const P_CREATE = '$.paths["/pets"].post';
const P_GET = '$.paths["/pets/{petId}"].get';
const P_LIMIT = `${P_LIST}.parameters[0]`;

const set = (keys: Key[], value: unknown): Edit => (d) => setAt(d, keys, value);
const del = (keys: Key[]): Edit => (d) => deleteAt(d, keys);

function diff(after: Edit[], before: Edit[] = []): { changes: Change[]; b: Doc; a: Doc } {
  const b = shippedDocument();
  for (const edit of before) edit(b);
  const a = structuredClone(b);
  for (const edit of after) edit(a);
  return { changes: diffDocuments(b, a), b, a };
}

/** The value a JSON path (`$.paths["/pets"].get.parameters[0]`) names in a document. */
function atPath(doc: Doc, path: string): unknown {
  const keys: Key[] = [];
  for (const m of path.slice(1).matchAll(/\.([A-Za-z_$][\w$]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/g)) {
    keys.push(m[1] ?? m[2] ?? (JSON.parse(m[3]!) as string));
  }
  try {
    return getAt(doc, keys);
  } catch {
    return undefined;
  }
}

/** Asserts the exact set of changes (in any order), and that each path names a place in one of the documents. */
function expectChanges(t: TapTest, name: string, after: Edit[], expected: Expected[], before: Edit[] = []): void {
  const { changes, b, a } = diff(after, before);
  const shown = JSON.stringify(changes, null, 1);
  t.equal(changes.length, expected.length, `${name}: ${expected.length} changes, got ${shown}`);
  for (const e of expected) {
    t.ok(
      changes.some((c) => c.kind === e.kind && c.path === e.path && c.breaking === e.breaking && e.message.test(c.message)),
      `${name}: ${e.kind} at ${e.path} (${e.breaking ? 'breaking' : 'not breaking'}) ${String(e.message)}; got ${shown}`,
    );
  }
  for (const c of changes) t.not(atPath(a, c.path) ?? atPath(b, c.path), undefined, `${name}: ${c.path} is a place in a document`);
}

t.test('an identical document, or one reworded, changes nothing', async (t) => {
  t.strictSame(diffDocuments(shippedDocument(), shippedDocument()), []);
  const { changes } = diff([
    set([...LIST, 'summary'], 'Lists animals.'),
    set([...LIMIT, 'description'], 'How many.'),
    set([...SCHEMAS, 'Pet', 'properties', 'name', 'description'], 'What it is called.'),
    set(['info', 'description'], 'Another text.'),
    set([...SCHEMAS, 'Pet', 'example'], { id: 1, name: 'Rex', categoryId: 2 }),
  ]);
  t.strictSame(changes, []);
});

t.test('operations added and removed', async (t) => {
  expectChanges(t, 'removed', [del(CREATE)], [{ kind: 'operation-removed', path: P_CREATE, breaking: true, message: /^POST \/pets: operation removed \(clients that call it get an error\)$/ }]);
  const orders = { operationId: 'listOrders', responses: { '200': { description: 'ok' } } };
  expectChanges(t, 'added', [set(['paths', '/store/orders'], { get: orders })], [{ kind: 'operation-added', path: '$.paths["/store/orders"].get', breaking: false, message: /^GET \/store\/orders: operation added$/ }]);
  // A path parameter renamed is the same operation: the URL clients call is the same.
  expectChanges(
    t,
    'path parameter renamed',
    [
      (d) => {
        setAt(d, ['paths', '/pets/{id}'], getAt(d, ['paths', '/pets/{petId}']));
        deleteAt(d, ['paths', '/pets/{petId}']);
        setAt(d, ['paths', '/pets/{id}', 'get', 'parameters', 0, 'name'], 'id');
      },
    ],
    [{ kind: 'parameter-renamed', path: '$.paths["/pets/{id}"].get.parameters[0].name', breaking: false, message: /path parameter petId renamed id/ }],
  );
});

t.test('deprecation, sunset and successor', async (t) => {
  expectChanges(
    t,
    'deprecation added',
    [set([...CREATE, 'deprecated'], true), set([...CREATE, 'x-sunset'], '2031-01-01T00:00:00Z'), set([...CREATE, 'x-successor'], '/v2/pets')],
    [{ kind: 'deprecation-added', path: `${P_CREATE}.deprecated`, breaking: false, message: /^POST \/pets: deprecated, removal on 2031-01-01T00:00:00Z, successor "\/v2\/pets"$/ }],
  );
  expectChanges(t, 'deprecation removed', [del([...GET, 'deprecated'])], [{ kind: 'deprecation-removed', path: `${P_GET}.deprecated`, breaking: false, message: /no longer deprecated/ }]);
  expectChanges(
    t,
    'sunset brought forward',
    [set([...GET, 'x-sunset'], '2029-06-01T00:00:00Z')],
    [{ kind: 'sunset-earlier', path: `${P_GET}["x-sunset"]`, breaking: true, message: /sunset "2030-12-05T00:00:00Z" changed to "2029-06-01T00:00:00Z" \(clients have less time to move\)/ }],
  );
  expectChanges(t, 'sunset put back', [set([...GET, 'x-sunset'], '2032-01-01T00:00:00Z')], [{ kind: 'sunset-changed', path: `${P_GET}["x-sunset"]`, breaking: false, message: /changed to "2032-01-01T00:00:00Z"$/ }]);
  expectChanges(t, 'sunset dropped', [del([...GET, 'x-sunset'])], [{ kind: 'sunset-changed', path: `${P_GET}["x-sunset"]`, breaking: false, message: /changed to none$/ }]);
  expectChanges(t, 'successor', [set([...GET, 'x-successor'], '/v2/pets')], [{ kind: 'successor-changed', path: `${P_GET}["x-successor"]`, breaking: false, message: /successor "\/v1\/pets" changed to "\/v2\/pets"/ }]);
});

t.test('parameters added, removed, required or not', async (t) => {
  const sort = { name: 'sort', in: 'query', schema: { type: 'string' } };
  expectChanges(t, 'optional added', [set([...LIST, 'parameters', 2], sort)], [{ kind: 'parameter-added', path: `${P_LIST}.parameters[2]`, breaking: false, message: /^GET \/pets: query parameter sort added$/ }]);
  expectChanges(
    t,
    'required added',
    [set([...LIST, 'parameters', 2], { ...sort, required: true })],
    [{ kind: 'required-parameter-added', path: `${P_LIST}.parameters[2]`, breaking: true, message: /query parameter sort added, required \(requests without it are refused\)/ }],
  );
  expectChanges(t, 'removed', [del([...LIST, 'parameters', 1])], [{ kind: 'parameter-removed', path: `${P_LIST}.parameters[1]`, breaking: true, message: /query parameter status removed \(clients that send it lose its effect\)/ }]);
  expectChanges(t, 'made required', [set([...LIMIT, 'required'], true)], [{ kind: 'parameter-required', path: `${P_LIMIT}.required`, breaking: true, message: /query parameter limit now required/ }]);
  expectChanges(t, 'made optional', [set([...LIMIT, 'required'], false)], [{ kind: 'parameter-optional', path: `${P_LIMIT}.required`, breaking: false, message: /no longer required/ }], [set([...LIMIT, 'required'], true)]);
  expectChanges(t, 'serialisation', [set([...LIMIT, 'style'], 'deepObject')], [{ kind: 'schema-changed', path: `${P_LIMIT}.style`, breaking: true, message: /style none changed to "deepObject"/ }]);
  // A parameter written once under components and referenced: the same parameter.
  expectChanges(t, 'moved under components', [
    (d) => {
      setAt(d, ['components', 'parameters'], { Limit: getAt(d, LIMIT) });
      setAt(d, LIMIT, { $ref: '#/components/parameters/Limit' });
    },
  ], []);
});

t.test('bounds tightened or loosened: breaking on a request', async (t) => {
  const S = `${P_LIMIT}.schema`;
  const cases: [string, Edit, Expected][] = [
    ['minimum raised', set([...LIMIT, 'schema', 'minimum'], 5), { kind: 'bound-tightened', path: `${S}.minimum`, breaking: true, message: /^GET \/pets query parameter limit: minimum raised from 1 to 5 \(requests valid before may be refused\)$/ }],
    ['maximum lowered', set([...LIMIT, 'schema', 'maximum'], 50), { kind: 'bound-tightened', path: `${S}.maximum`, breaking: true, message: /maximum lowered from 100 to 50/ }],
    ['minimum lowered', set([...LIMIT, 'schema', 'minimum'], 0), { kind: 'bound-loosened', path: `${S}.minimum`, breaking: false, message: /minimum lowered from 1 to 0$/ }],
    ['maximum raised', set([...LIMIT, 'schema', 'maximum'], 500), { kind: 'bound-loosened', path: `${S}.maximum`, breaking: false, message: /maximum raised from 100 to 500$/ }],
    ['maximum removed', del([...LIMIT, 'schema', 'maximum']), { kind: 'bound-loosened', path: `${S}.maximum`, breaking: false, message: /maximum 100 removed/ }],
    ['exclusiveMaximum added', set([...LIMIT, 'schema', 'exclusiveMaximum'], 100), { kind: 'bound-tightened', path: `${S}.exclusiveMaximum`, breaking: true, message: /exclusiveMaximum 100 added/ }],
    ['maxLength on a field', set([...SCHEMAS, 'NewPet', 'properties', 'name', 'maxLength'], 64), { kind: 'bound-tightened', path: '$.components.schemas.NewPet.properties.name.maxLength', breaking: true, message: /^POST \/pets request body, field name: maxLength 64 added/ }],
  ];
  for (const [name, edit, expected] of cases) expectChanges(t, name, [edit], [expected]);
  // On an answer, loosening is what breaks clients: a Pet name may now be longer than promised.
  const maxLen = (n: number): Edit => set([...SCHEMAS, 'Pet', 'properties', 'name', 'maxLength'], n);
  const P = '$.components.schemas.Pet.properties.name.maxLength';
  expectChanges(
    t,
    'answer bound raised',
    [maxLen(200)],
    [
      { kind: 'bound-loosened', path: P, breaking: true, message: /^GET \/pets response 200, field \[\]\.name: maxLength raised from 100 to 200 \(clients may receive values outside the former bounds\)$/ },
      { kind: 'bound-loosened', path: P, breaking: true, message: /^GET \/pets\/\{petId\} response 200, field name: maxLength raised/ },
      { kind: 'bound-loosened', path: P, breaking: true, message: /^POST \/pets response 201, field name: maxLength raised/ },
    ],
    [maxLen(100)],
  );
});

t.test('enum values: removed breaks requests, added breaks answers', async (t) => {
  const P = '$.components.schemas.PetStatus.enum';
  expectChanges(
    t,
    'value removed',
    [set([...SCHEMAS, 'PetStatus', 'enum'], ['available', 'pending'])],
    [
      { kind: 'enum-value-removed', path: P, breaking: true, message: /^GET \/pets query parameter status: enum value "sold" removed \(clients that send it are refused\)$/ },
      { kind: 'enum-value-removed', path: P, breaking: true, message: /^POST \/pets request body, field status: enum value "sold" removed/ },
      { kind: 'enum-value-removed', path: P, breaking: false, message: /^GET \/pets response 200, field \[\]\.status: enum value "sold" removed$/ },
      { kind: 'enum-value-removed', path: P, breaking: false, message: /^GET \/pets\/\{petId\} response 200, field status: enum value "sold" removed$/ },
      { kind: 'enum-value-removed', path: P, breaking: false, message: /^POST \/pets response 201, field status: enum value "sold" removed$/ },
    ],
  );
  expectChanges(
    t,
    'value added',
    [set([...SCHEMAS, 'PetStatus', 'enum'], ['available', 'pending', 'sold', 'reserved'])],
    [
      { kind: 'enum-value-added', path: P, breaking: false, message: /^GET \/pets query parameter status: enum value "reserved" added$/ },
      { kind: 'enum-value-added', path: P, breaking: false, message: /^POST \/pets request body, field status: enum value "reserved" added$/ },
      { kind: 'enum-value-added', path: P, breaking: true, message: /^GET \/pets response 200, field \[\]\.status: enum value "reserved" added \(clients may receive a value they do not know\)$/ },
      { kind: 'enum-value-added', path: P, breaking: true, message: /^GET \/pets\/\{petId\} response 200, field status: enum value "reserved" added/ },
      { kind: 'enum-value-added', path: P, breaking: true, message: /^POST \/pets response 201, field status: enum value "reserved" added/ },
    ],
  );
  expectChanges(t, 'an enum where any value was', [set([...SCHEMAS, 'NewPet', 'properties', 'name', 'enum'], ['Rex'])], [
    { kind: 'bound-tightened', path: '$.components.schemas.NewPet.properties.name.enum', breaking: true, message: /field name: values restricted to "Rex"/ },
  ]);
});

t.test('defaults', async (t) => {
  const S = `${P_LIMIT}.schema.default`;
  expectChanges(t, 'changed', [set([...LIMIT, 'schema', 'default'], 10)], [{ kind: 'default-changed', path: S, breaking: true, message: /default changed from 20 to 10 \(clients that omit it get another value\)/ }]);
  expectChanges(t, 'removed', [del([...LIMIT, 'schema', 'default'])], [{ kind: 'default-removed', path: S, breaking: true, message: /default 20 removed/ }]);
  expectChanges(t, 'added', [set([...SCHEMAS, 'NewPet', 'properties', 'name', 'default'], 'Rex')], [{ kind: 'default-added', path: '$.components.schemas.NewPet.properties.name.default', breaking: false, message: /default "Rex" added$/ }]);
});

t.test('request body fields', async (t) => {
  const NEW = [...SCHEMAS, 'NewPet'];
  const P = '$.components.schemas.NewPet';
  const tag = { type: 'string' };
  expectChanges(t, 'optional field added', [set([...NEW, 'properties', 'tag'], tag)], [{ kind: 'field-added', path: `${P}.properties.tag`, breaking: false, message: /^POST \/pets request body: field tag added$/ }]);
  expectChanges(
    t,
    'required field added',
    [set([...NEW, 'properties', 'tag'], tag), set([...NEW, 'required'], ['name', 'categoryId', 'tag'])],
    [{ kind: 'required-field-added', path: `${P}.properties.tag`, breaking: true, message: /field tag added, required \(requests without it are refused\)/ }],
  );
  expectChanges(t, 'field removed', [del([...NEW, 'properties', 'status'])], [{ kind: 'field-removed', path: `${P}.properties.status`, breaking: true, message: /field status removed \(requests that carry it may be refused as unknown\)/ }]);
  expectChanges(t, 'field made required', [set([...NEW, 'required'], ['name', 'categoryId', 'status'])], [{ kind: 'field-required', path: `${P}.required`, breaking: true, message: /field status now required/ }]);
  expectChanges(t, 'field made optional', [set([...NEW, 'required'], ['name'])], [{ kind: 'field-optional', path: `${P}.required`, breaking: false, message: /field categoryId no longer required$/ }]);
  // `id: false`: the client may not send it. Allowing it loosens; refusing another field tightens.
  expectChanges(t, 'forbidden field allowed', [del([...NEW, 'properties', 'id'])], [{ kind: 'bound-loosened', path: `${P}.properties.id`, breaking: false, message: /field id no longer refused/ }]);
  expectChanges(t, 'field now refused', [set([...NEW, 'properties', 'status'], false)], [{ kind: 'field-removed', path: `${P}.properties.status`, breaking: true, message: /field status removed: now refused/ }]);
});

t.test('response fields', async (t) => {
  const PET = [...SCHEMAS, 'Pet'];
  const P = '$.components.schemas.Pet';
  expectChanges(
    t,
    'field removed',
    [del([...PET, 'properties', 'name'])],
    [
      { kind: 'field-removed', path: `${P}.properties.name`, breaking: true, message: /^GET \/pets response 200: field \[\]\.name removed \(clients that read it no longer get it\)$/ },
      { kind: 'field-removed', path: `${P}.properties.name`, breaking: true, message: /^GET \/pets\/\{petId\} response 200: field name removed/ },
      { kind: 'field-removed', path: `${P}.properties.name`, breaking: true, message: /^POST \/pets response 201: field name removed/ },
    ],
  );
  const added = [set([...PET, 'properties', 'tag'], { type: 'string' })];
  const { changes } = diff(added);
  t.equal(changes.length, 3, 'a field added to Pet: one change per answer that carries it');
  t.ok(changes.every((c) => c.kind === 'field-added' && !c.breaking), 'none breaking');
  expectChanges(t, 'field no longer required', [set([...PET, 'required'], ['id', 'name'])], [
    { kind: 'field-optional', path: `${P}.required`, breaking: true, message: /^GET \/pets response 200: field \[\]\.categoryId no longer required \(clients may no longer get it\)$/ },
    { kind: 'field-optional', path: `${P}.required`, breaking: true, message: /^GET \/pets\/\{petId\} response 200: field categoryId no longer required/ },
    { kind: 'field-optional', path: `${P}.required`, breaking: true, message: /^POST \/pets response 201: field categoryId no longer required/ },
  ]);
});

t.test('types and formats', async (t) => {
  expectChanges(t, 'type changed', [set([...GET, 'parameters', 0, 'schema', 'type'], 'string')], [
    { kind: 'type-changed', path: `${P_GET}.parameters[0].schema.type`, breaking: true, message: /^GET \/pets\/\{petId\} path parameter petId: type integer changed to string \(values of the former type are refused\)$/ },
  ]);
  expectChanges(t, 'format changed', [set([...SCHEMAS, 'NewPet', 'properties', 'categoryId', 'format'], 'int32')], [
    { kind: 'format-changed', path: '$.components.schemas.NewPet.properties.categoryId.format', breaking: true, message: /field categoryId: format "int64" changed to "int32"/ },
  ]);
  expectChanges(t, 'nullable in 3.1', [set([...SCHEMAS, 'Error', 'properties', 'code', 'type'], ['string', 'null'])], [
    { kind: 'type-changed', path: '$.components.schemas.Error.properties.code.type', breaking: true, message: /^GET \/pets response 401, field code: type string changed to null or string \(clients may receive another type\)$/ },
    { kind: 'type-changed', path: '$.components.schemas.Error.properties.code.type', breaking: true, message: /^GET \/pets\/\{petId\} response 401/ },
    { kind: 'type-changed', path: '$.components.schemas.Error.properties.code.type', breaking: true, message: /^GET \/pets\/\{petId\} response 404/ },
    { kind: 'type-changed', path: '$.components.schemas.Error.properties.code.type', breaking: true, message: /^POST \/pets response 400/ },
    { kind: 'type-changed', path: '$.components.schemas.Error.properties.code.type', breaking: true, message: /^POST \/pets response 401/ },
  ]);
  expectChanges(t, 'a keyword not analysed', [set([...SCHEMAS, 'NewPet', 'properties', 'name', 'pattern'], '^[A-Z]')], [
    { kind: 'schema-changed', path: '$.components.schemas.NewPet.properties.name.pattern', breaking: true, message: /pattern none changed to "\^\[A-Z\]" \(not analysed, so taken as breaking\)/ },
  ]);
});

t.test('x-list-limit and x-list-filter', async (t) => {
  expectChanges(t, 'limit removed', [del([...LIST, 'x-list-limit'])], [{ kind: 'list-limit-removed', path: `${P_LIST}["x-list-limit"]`, breaking: true, message: /x-list-limit "limit" removed \(the list is no longer cut to the parameter\)/ }]);
  expectChanges(t, 'limit added', [set([...LIST, 'x-list-limit'], 'limit')], [{ kind: 'list-limit-added', path: `${P_LIST}["x-list-limit"]`, breaking: false, message: /x-list-limit added: the list is cut to parameter "limit"$/ }], [del([...LIST, 'x-list-limit'])]);
  expectChanges(t, 'limit changed', [set([...LIST, 'x-list-limit'], 'status')], [{ kind: 'list-limit-changed', path: `${P_LIST}["x-list-limit"]`, breaking: true, message: /changed from parameter "limit" to "status"/ }]);
  expectChanges(t, 'filter removed', [del([...LIST, 'x-list-filter'])], [{ kind: 'list-filter-removed', path: `${P_LIST}["x-list-filter"].status`, breaking: true, message: /x-list-filter status removed \(answers no longer match the filter\)/ }]);
  expectChanges(t, 'filter changed', [set([...LIST, 'x-list-filter', 'status'], 'name')], [{ kind: 'list-filter-changed', path: `${P_LIST}["x-list-filter"].status`, breaking: true, message: /changed from item field "status" to "name"/ }]);
  expectChanges(t, 'filter added', [set([...LIST, 'x-list-filter', 'limit'], 'categoryId')], [{ kind: 'list-filter-added', path: `${P_LIST}["x-list-filter"].limit`, breaking: false, message: /x-list-filter limit added: each item's "categoryId" equals the parameter$/ }]);
});

t.test('responses, error codes, request bodies, media types, base path, security', async (t) => {
  expectChanges(t, 'error response removed', [del([...GET, 'responses', '404'])], [{ kind: 'response-removed', path: `${P_GET}.responses[404]`, breaking: false, message: /response 404 removed$/ }]);
  expectChanges(t, 'success response removed', [del([...GET, 'responses', '200'])], [{ kind: 'success-response-removed', path: `${P_GET}.responses[200]`, breaking: true, message: /response 200 removed \(clients that expect it get another status\)/ }]);
  expectChanges(t, 'response added', [set([...GET, 'responses', '410'], { description: 'Gone.' })], [{ kind: 'response-added', path: `${P_GET}.responses[410]`, breaking: false, message: /response 410 added$/ }]);
  expectChanges(t, 'error code', [set([...GET, 'responses', '404', 'x-error-code'], 'not_found')], [{ kind: 'error-code-changed', path: `${P_GET}.responses[404]["x-error-code"]`, breaking: true, message: /error code "pet_not_found" changed to "not_found" \(clients that match on the code miss it\)/ }]);
  expectChanges(t, 'request body removed', [del([...CREATE, 'requestBody'])], [{ kind: 'request-body-removed', path: `${P_CREATE}.requestBody`, breaking: true, message: /request body removed/ }]);
  expectChanges(t, 'request body optional', [set([...CREATE, 'requestBody', 'required'], false)], [{ kind: 'request-body-optional', path: `${P_CREATE}.requestBody.required`, breaking: false, message: /request body no longer required$/ }]);
  const body = { required: true, content: { 'application/json': { schema: { type: 'object' } } } };
  expectChanges(t, 'required request body added', [set([...LIST, 'requestBody'], body)], [{ kind: 'required-request-body-added', path: `${P_LIST}.requestBody`, breaking: true, message: /request body added, required/ }]);
  const json = [...CREATE, 'requestBody', 'content', 'application/json'];
  expectChanges(t, 'media type added', [(d) => setAt(d, [...CREATE, 'requestBody', 'content', 'application/merge-patch+json'], getAt(d, json))], [
    { kind: 'media-type-added', path: `${P_CREATE}.requestBody.content["application/merge-patch+json"]`, breaking: false, message: /POST \/pets request body: media type application\/merge-patch\+json added$/ },
  ]);
  expectChanges(t, 'media type removed', [del(json)], [{ kind: 'media-type-removed', path: `${P_CREATE}.requestBody.content["application/json"]`, breaking: true, message: /media type application\/json removed/ }]);
  expectChanges(t, 'base path', [set(['servers', 0, 'url'], '/v2')], [{ kind: 'base-path-changed', path: '$.servers[0].url', breaking: true, message: /base path "\/v1" changed to "\/v2"/ }]);
  expectChanges(t, 'security of one operation', [set([...GET, 'security'], [])], [{ kind: 'security-changed', path: `${P_GET}.security`, breaking: true, message: /GET \/pets\/\{petId\}: security \[\{"bearer":\[\]\}\] changed to \[\]/ }]);
});

t.test('a loop of references ends', async (t) => {
  // A tree of pets: Pet.parent is a Pet. The same change is found once per answer, and the walk ends.
  const parent: Edit = set([...SCHEMAS, 'Pet', 'properties', 'parent'], { $ref: '#/components/schemas/Pet' });
  const { changes } = diff([parent, set([...SCHEMAS, 'Pet', 'properties', 'name', 'maxLength'], 10)], [parent]);
  t.equal(changes.length, 3, JSON.stringify(changes));
  t.ok(changes.every((c) => c.kind === 'bound-tightened' && c.path === '$.components.schemas.Pet.properties.name.maxLength'));
  // References that only name each other (A -> B -> A) resolve to nothing, shown where the loop closes.
  const loop: Edit[] = [set([...SCHEMAS, 'A'], { $ref: '#/components/schemas/B' }), set([...SCHEMAS, 'B'], { $ref: '#/components/schemas/A' }), set([...SCHEMAS, 'Pets', 'items'], { $ref: '#/components/schemas/A' })];
  t.strictSame(diff(loop, loop).changes, [], 'the same loop on both sides: no change');
  const { changes: lost } = diff(loop);
  t.equal(lost.length, 1, JSON.stringify(lost));
  t.match(lost[0], { kind: 'schema-changed', path: '$.components.schemas.B', breaking: true, message: /^GET \/pets response 200, field \[\]: schema of type object changed to a reference that resolves to nothing/ });
});

t.test('changes are sorted by path; formatChanges marks the breaking ones', async (t) => {
  const { changes } = diff([del(CREATE), set([...LIMIT, 'schema', 'maximum'], 500), set(['servers', 0, 'url'], '/v2')]);
  t.strictSame(
    changes.map((c) => c.path),
    ['$.paths["/pets"].get.parameters[0].schema.maximum', '$.paths["/pets"].post', '$.servers[0].url'],
  );
  t.strictSame(formatChanges([...changes].reverse()), [
    '          $.paths["/pets"].get.parameters[0].schema.maximum: GET /pets query parameter limit: maximum raised from 100 to 500',
    'breaking  $.paths["/pets"].post: POST /pets: operation removed (clients that call it get an error)',
    'breaking  $.servers[0].url: base path "/v1" changed to "/v2" (every client calls the old path)',
  ]);
});

t.test('documentReport: nothing for no document or the shipped one; else the counted changes', async (t) => {
  const shipped = shippedDocument();
  t.strictSame(documentReport(shipped, undefined), []);
  t.strictSame(documentReport(shipped, shippedDocument()), []);
  const reworded = shippedDocument();
  setAt(reworded, ['info', 'description'], 'Another text.');
  t.strictSame(documentReport(shipped, reworded), ['interface: differs from the shipped document only in what is not enforced (descriptions, examples): no change']);
  const chosen = shippedDocument();
  deleteAt(chosen, CREATE);
  setAt(chosen, [...LIMIT, 'schema', 'maximum'], 500);
  t.strictSame(documentReport(shipped, chosen), [
    'interface: 2 changes against the shipped document (1 breaking)',
    '            $.paths["/pets"].get.parameters[0].schema.maximum: GET /pets query parameter limit: maximum raised from 100 to 500',
    '  breaking  $.paths["/pets"].post: POST /pets: operation removed (clients that call it get an error)',
  ]);
  const one = shippedDocument();
  deleteAt(one, CREATE);
  t.equal(documentReport(shipped, one)[0], 'interface: 1 change against the shipped document (1 breaking)');
});
