/**
 * validateStructure: the shipped document is a well-formed OpenAPI 3.1 document; each broken copy
 * is refused with the JSON path of what broke it and a plain message.
 */
import t from 'tap';
import { validateStructure } from '../../src/api/validate.js';
import { deleteAt, setAt, shippedDocument, type Doc } from '../helpers/openapi.js';

const SHIPPED = shippedDocument();
const copy = (): Doc => structuredClone(SHIPPED);

t.test('the shipped document is well formed', async (t) => {
  t.strictSame(await validateStructure(SHIPPED), []);
});

t.test('what is not an OpenAPI 3.1 document at all', async (t) => {
  for (const value of [null, 'openapi: 3.1.0', [], 42]) {
    t.strictSame(await validateStructure(value), [{ path: '$', message: 'must be an object: an OpenAPI 3.1 document' }], JSON.stringify(value));
  }
  const cases: [unknown, string][] = [
    ['3.0.3', 'found "3.0.3"'],
    ['2.0', 'found "2.0"'],
    [3.1, 'found 3.1'],
    [undefined, 'it is missing'],
  ];
  for (const [version, found] of cases) {
    const doc = copy();
    if (version === undefined) deleteAt(doc, ['openapi']);
    else setAt(doc, ['openapi'], version);
    t.strictSame(await validateStructure(doc), [{ path: '$.openapi', message: `must be an OpenAPI 3.1 version such as "3.1.0" (${found})` }], String(version));
  }
});

t.test('broken documents: each problem at its JSON path', async (t) => {
  const cases: [string, (d: Doc) => void, { path: string; message: RegExp }[]][] = [
    ['no info', (d) => deleteAt(d, ['info']), [{ path: '$', message: /missing required property 'info'/ }]],
    ['info.title a number', (d) => setAt(d, ['info', 'title'], 5), [{ path: '$.info.title', message: /must be string/ }]],
    [
      'a parameter in the body',
      (d) => setAt(d, ['paths', '/pets', 'get', 'parameters', 0, 'in'], 'body'),
      [{ path: '$.paths["/pets"].get.parameters[0].in', message: /must be one of: "query", "header", "path", "cookie"/ }],
    ],
    ['a parameter without a name', (d) => deleteAt(d, ['paths', '/pets', 'get', 'parameters', 1, 'name']), [{ path: '$.paths["/pets"].get.parameters[1]', message: /missing required property 'name'/ }]],
    ['a response without a description', (d) => deleteAt(d, ['paths', '/pets', 'get', 'responses', '200', 'description']), [{ path: '$.paths["/pets"].get.responses[200]', message: /missing required property 'description'/ }]],
    ['a path without its slash', (d) => setAt(d, ['paths', 'pets'], {}), [{ path: '$.paths.pets', message: /is not a path: a path starts with '\/'/ }]],
    ['an unknown property of an operation', (d) => setAt(d, ['paths', '/pets', 'post', 'timeout'], 5), [{ path: '$.paths["/pets"].post.timeout', message: /extension's name starts with x-/ }]],
    ['a reference that is not a string', (d) => setAt(d, ['paths', '/pets', 'get', 'parameters', 1], { $ref: 5 }), [{ path: '$.paths["/pets"].get.parameters[1].$ref', message: /must be string/ }]],
    [
      'a reference to nothing',
      (d) => setAt(d, ['paths', '/pets', 'post', 'requestBody', 'content', 'application/json', 'schema', '$ref'], '#/components/schemas/Nope'),
      [{ path: '$.paths["/pets"].post.requestBody.content["application/json"].schema.$ref', message: /"#\/components\/schemas\/Nope" points to nothing in this document/ }],
    ],
    [
      'a reference to another file',
      (d) => setAt(d, ['components', 'schemas', 'Pets', 'items', '$ref'], 'pets.yaml#/Pet'),
      [{ path: '$.components.schemas.Pets.items.$ref', message: /only local references/ }],
    ],
    // The specification's schema leaves Schema Objects open; the 2020-12 meta-schema does not.
    ['a schema type that is a number', (d) => setAt(d, ['components', 'schemas', 'Pet', 'type'], 5), [{ path: '$.components.schemas.Pet.type', message: /must be one of: "array", .*"string"; or must be array/ }]],
    ['a minimum that is a word', (d) => setAt(d, ['paths', '/pets', 'get', 'parameters', 0, 'schema', 'minimum'], 'one'), [{ path: '$.paths["/pets"].get.parameters[0].schema.minimum', message: /must be number/ }]],
    ['required that is not a list', (d) => setAt(d, ['components', 'schemas', 'NewPet', 'required'], 'name'), [{ path: '$.components.schemas.NewPet.required', message: /must be array/ }]],
    [
      'two problems at once',
      (d) => {
        deleteAt(d, ['info', 'version']);
        setAt(d, ['paths', '/pets/{petId}', 'get', 'parameters', 0, 'in'], 'url');
      },
      [
        { path: '$.info', message: /missing required property 'version'/ },
        { path: '$.paths["/pets/{petId}"].get.parameters[0].in', message: /must be one of/ },
      ],
    ],
  ];
  for (const [name, mutate, expected] of cases) {
    const doc = copy();
    mutate(doc);
    const problems = await validateStructure(doc);
    t.equal(problems.length, expected.length, `${name}: ${JSON.stringify(problems)}`);
    for (const e of expected) {
      t.ok(
        problems.some((p) => p.path === e.path && e.message.test(p.message)),
        `${name}: ${e.path} ${String(e.message)} in ${JSON.stringify(problems)}`,
      );
    }
  }
});

t.test('a reference loop is reported by neither check hanging', async (t) => {
  const doc = copy();
  setAt(doc, ['components', 'schemas', 'A'], { $ref: '#/components/schemas/B' });
  setAt(doc, ['components', 'schemas', 'B'], { $ref: '#/components/schemas/A' });
  setAt(doc, ['components', 'schemas', 'Pets', 'items'], { $ref: '#/components/schemas/A' });
  const started = Date.now();
  const problems = await validateStructure(doc);
  t.ok(Date.now() - started < 10_000, 'answers at once');
  t.type(problems, Array);
});
