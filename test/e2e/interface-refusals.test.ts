/**
 * Documents the gateway would enforce unsafely, through the built CLI: a free-text path parameter
 * (its raw segment, `..%2F..%2Fadmin` or `%2e%2e`, would reach the upstream as written, past the
 * paths the document lists), dot segments, two templated paths that are one, and a query name
 * that would be written unescaped into the upstream query and the access log. `check` names each
 * by its JSON path, exit 78; `serve` refuses to start with them, exit 78, before any listener.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { stringify } from 'yaml';
import { readShippedDocument } from '../../src/api/document.js';
import { runCli, tempDir, testKey } from '../helpers/servers.js';

const dir = tempDir(t, 'interface-refusals');
const env = { PETSTORE_API_KEYS: testKey() };
const ORDER = { type: 'object', required: ['id'], properties: { id: { type: 'integer', format: 'int64' } } };
const answer = { '200': { description: 'ok', content: { 'application/json': { schema: { $ref: '#/components/schemas/Order' } } } } };

/** A policy file naming (relative to itself) the shipped document with `paths` added. */
function policyWith(name: string, paths: Record<string, unknown>): string {
  const doc = readShippedDocument() as { paths: Record<string, unknown>; components: { schemas: Record<string, unknown> } };
  doc.components.schemas.Order = ORDER;
  Object.assign(doc.paths, paths);
  writeFileSync(join(dir, `${name}.yaml`), stringify(doc));
  const policy = join(dir, `${name}.policy.yaml`);
  writeFileSync(policy, `version: 1\ninterface: ./${name}.yaml\nupstream:\n  url: http://127.0.0.1:9/v1\n`);
  return policy;
}

const cases: [string, Record<string, unknown>, string][] = [
  [
    'free-text path parameter',
    { '/things/{name}/detail': { get: { operationId: 'getThing', parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string' } }], responses: answer } } },
    "$.paths['/things/{name}/detail'].get.parameters[0].schema: a path parameter is an integer (format int64 or int32) or a string enum",
  ],
  ['dot segment', { '/pets/..': { get: { operationId: 'dots', responses: answer } } }, "$.paths['/pets/..']: must be /segment/... with plain segments (not . or ..)"],
  [
    'one templated path twice',
    { '/pets/{id}': { get: { operationId: 'getOrder', parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'integer', format: 'int32' } }], responses: answer } } },
    "$.paths['/pets/{id}']: is the path '/pets/{petId}' with another parameter name",
  ],
  [
    'query name to escape',
    { '/orders': { get: { operationId: 'listOrders', parameters: [{ name: 'x","client', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 5 } }], responses: answer } } },
    `$.paths['/orders'].get.parameters[0].name: a query parameter's name is 1 to 64 letters`,
  ],
];

// parity: check starts no engine, and serve refuses the policy before it starts one.
t.test('check and serve refuse each document, naming the problem by its JSON path, exit 78', async (t) => {
  for (const [name, paths, problem] of cases) {
    const policy = policyWith(name.replace(/ /g, '-'), paths);
    const checked = await runCli(t, ['check', policy], { env });
    t.equal(checked.code, 78, `check: ${name}`);
    t.match(checked.stdout, problem, `check names it: ${name}`);
    const served = await runCli(t, ['serve', '--policy', policy, '--host', '127.0.0.1', '--port', '0'], { env, timeoutMs: 20_000 });
    t.equal(served.code, 78, `serve refuses to start: ${name}`);
    t.match(served.stderr + served.stdout, problem, `serve says why: ${name}`);
  }
});
