/**
 * What the compiler refuses in an operator's document because the gateway would enforce it
 * unsafely: a path parameter whose raw segment could carry an encoded '/' or a dot segment to the
 * upstream, enum values a raw segment can never equal, dot segments in the document's paths, two
 * templated paths that are one, and query parameter names that would be written unescaped into
 * the upstream query and the access log.
 */
import t from 'tap';
import { compileDocument } from '../../src/api/compile.js';
import { readShippedDocument } from '../../src/api/document.js';
import { compileQuery } from '../../src/api/query.js';

type Doc = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const ORDER = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'integer', format: 'int64' }, status: { type: 'string', enum: ['placed', 'approved'] } },
};
const ANSWER = { '200': { description: 'ok', content: { 'application/json': { schema: { $ref: '#/components/schemas/Order' } } } } };

/** The shipped document with `paths` added, each a GET of an Order. */
function withPaths(paths: Record<string, { parameters?: unknown[] }>): Doc {
  const doc = readShippedDocument() as Doc;
  doc.components.schemas.Order = ORDER;
  let n = 0;
  for (const [path, op] of Object.entries(paths)) doc.paths[path] = { get: { operationId: `op${n++}`, ...op, responses: ANSWER } };
  return doc;
}

const pathParam = (name: string, schema: unknown) => ({ parameters: [{ name, in: 'path', required: true, schema }] });
const queryParam = (name: string) => ({ parameters: [{ name, in: 'query', schema: { type: 'integer', minimum: 1, maximum: 5 } }] });

function problemsOf(doc: Doc): { path: string; message: string }[] {
  const r = compileDocument(doc, 'test');
  return r.ok ? [] : [...r.problems];
}

t.test('a free-text path parameter is refused: its raw segment (..%2F, %2e%2e) would reach the upstream', async (t) => {
  const problems = problemsOf(withPaths({ '/things/{name}/detail': pathParam('name', { type: 'string' }) }));
  t.same(problems.map((p) => p.path), ["$.paths['/things/{name}/detail'].get.parameters[0].schema"]);
  t.match(problems[0]?.message, /integer \(format int64 or int32\) or a string enum/);
});

t.test('a path enum value that is no raw segment is refused; unreserved values compile', async (t) => {
  for (const value of ['a b', 'a/b', '%2F', '\u00e9', '..', '.']) {
    const problems = problemsOf(withPaths({ '/things/{kind}': pathParam('kind', { type: 'string', enum: ['placed', value] }) }));
    t.equal(problems.length, 1, JSON.stringify(value));
    t.match(problems[0]?.message, `enum value ${JSON.stringify(value)} cannot be a path segment`);
  }
  const ok = compileDocument(withPaths({ '/things/{kind}': pathParam('kind', { type: 'string', enum: ['placed', 'a-b_c.d~e'] }) }), 'test');
  t.ok(ok.ok, 'unreserved enum values compile');
  t.ok(compileDocument(withPaths({ '/things/{n}': pathParam('n', { type: 'integer', format: 'int32' }) }), 'test').ok, 'an int32 path parameter compiles');
});

t.test('a dot segment in a document path is refused', async (t) => {
  for (const path of ['/pets/..', '/./x', '/a/../b', '/a/.']) {
    const problems = problemsOf(withPaths({ [path]: {} }));
    t.same(problems.map((p) => p.path), [`$.paths['${path}']`], path);
    t.match(problems[0]?.message, /not \. or \.\./);
  }
  t.ok(compileDocument(withPaths({ '/a.b/...x': {} }), 'test').ok, 'dots inside a segment are plain characters');
});

t.test('two templated paths that differ only in the parameter name are refused (one could never be reached)', async (t) => {
  const problems = problemsOf(withPaths({ '/pets/{id}': pathParam('id', { type: 'integer', format: 'int32' }) }));
  t.same(problems.map((p) => p.path), ["$.paths['/pets/{id}']"]);
  t.match(problems[0]?.message, "is the path '/pets/{petId}' with another parameter name");
  t.ok(compileDocument(withPaths({ '/pets/{petId}/toys': pathParam('petId', { type: 'integer', format: 'int64' }) }), 'test').ok, 'a longer path is another path');
});

t.test("a query parameter's name must need no encoding or JSON escaping; '[' and ']' are encoded upstream", async (t) => {
  for (const name of ['x","client', 'a&admin=1', 'a b', 'a=b', '', 'x'.repeat(65), 'caf\u00e9']) {
    const problems = problemsOf(withPaths({ '/orders': queryParam(name) }));
    t.same(problems.map((p) => p.path), ["$.paths['/orders'].get.parameters[0].name"], JSON.stringify(name));
  }
  const ok = compileDocument(withPaths({ '/orders': queryParam('page[size]') }), 'test');
  if (!ok.ok) throw new Error(JSON.stringify(ok.problems));
  const op = ok.api.operations.find((o) => o.path === '/orders')!;
  t.same(compileQuery(op.query, false)('page%5Bsize%5D=3'), { values: [3], upstream: 'page%5Bsize%5D=3' });
});

t.test('the shipped document still compiles', async (t) => {
  t.ok(compileDocument(readShippedDocument(), 'shipped').ok);
});
