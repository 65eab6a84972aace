/**
 * The interface document as an operator changes it, through the built CLI: `serve --watch` reloads
 * when only the document changes (the policy file's text unchanged); a document whose OpenAPI
 * structure is wrong is refused by `serve` at start (exit 78) and by a reload (SIGHUP), the
 * interface in force staying; and the reloaded interface is the one enforced.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse, stringify } from 'yaml';
import { assertError } from '../helpers/assert.js';
import { bearer, PROJECT_ROOT, request, runCli, spawnCliUntil, tempDir, testKey, waitFor, type ProcessHandle } from '../helpers/servers.js';

const KEY = testKey();
const env = { PETSTORE_API_KEYS: KEY, LOG_LEVEL: 'info' };
const dir = tempDir(t, 'interface-reload');
const shipped = () => parse(readFileSync(join(PROJECT_ROOT, 'openapi', 'pet-store.yaml'), 'utf8')) as Record<string, unknown>;

/** The shipped document with listPets' `limit` at most `max`; `broken`: an info.contact.email that is no e-mail address. */
function writeDocument(max: number, broken = false): void {
  const doc = shipped() as { info: Record<string, unknown>; paths: Record<string, Record<string, { parameters: { schema: Record<string, unknown> }[] }>> };
  doc.paths['/pets']!.get!.parameters[0]!.schema.maximum = max;
  if (broken) doc.info.contact = { email: 'not an address' };
  writeFileSync(join(dir, 'interface.yaml'), stringify(doc));
}

const policy = join(dir, 'policy.yaml');
writeFileSync(policy, 'version: 1\ninterface: ./interface.yaml\nupstream:\n  url: builtin\npolicies:\n  auth:\n    keys: []\n    keysFromEnv: PETSTORE_API_KEYS\n');

/** The log entries after `since` characters of stdout. */
function entries(handle: ProcessHandle, since: number): Record<string, unknown>[] {
  return handle
    .output()
    .stdout.slice(since)
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

async function nextReload(handle: ProcessHandle, since: number): Promise<Record<string, unknown>> {
  return waitFor('a reload line', () => entries(handle, since).find((e) => typeof e.msg === 'string' && e.msg.startsWith('policy reload')), 10_000).catch((err: unknown) => {
    throw new Error(`${String(err)}\nstdout: ${handle.output().stdout}\nstderr: ${handle.output().stderr}`);
  });
}

// parity: the interface document is read by the CLI's loader and reload, before any engine; fourth-operation.test.ts runs what it compiles to on every engine.
t.test('serve refuses a document whose OpenAPI structure is wrong, exit 78, naming it', async (t) => {
  writeDocument(100, true);
  const served = await runCli(t, ['serve', '--policy', policy, '--host', '127.0.0.1', '--port', '0'], { env, timeoutMs: 20_000 });
  t.equal(served.code, 78);
  t.match(served.stderr, /\$\.interface: \.\/interface\.yaml: \$\.info\.contact\.email: /);
});

// parity: the --watch and SIGHUP reloads are the CLI's, before any engine; reload.test.ts covers each engine's side.
t.test('--watch reloads the document alone; SIGHUP to a broken one keeps the interface in force', async (t) => {
  writeDocument(100);
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', policy, '--host', '127.0.0.1', '--port', '0', '--watch'], /petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) /, { env, timeoutMs: 20_000 });
  const url = match[1]!;
  const list = (limit: number) => request(`${url}/v1/pets?limit=${limit}`, { headers: bearer(KEY) });
  t.equal((await list(60)).status, 200, 'limit 60 within 1..100');

  let since = handle.output().stdout.length;
  writeDocument(50);
  const reloaded = await nextReload(handle, since);
  t.equal(reloaded.msg, 'policy reloaded');
  t.equal(reloaded.reason, 'interface changed', 'the document alone changed');
  assertError(t, await list(60), 400, 'invalid_query', { message: 'limit must be at most 50' });

  since = handle.output().stdout.length;
  writeDocument(20, true);
  const refused = await nextReload(handle, since);
  t.equal(refused.msg, 'policy reload refused; the previous policy stays');
  t.match(JSON.stringify(refused.problems), /info\.contact\.email/);
  assertError(t, await list(60), 400, 'invalid_query', { message: 'limit must be at most 50' });
  t.equal((await list(40)).status, 200, 'the interface in force stays (at most 50, not 20)');

  since = handle.output().stdout.length;
  handle.child.kill('SIGHUP');
  const again = await nextReload(handle, since);
  t.equal(again.msg, 'policy reload refused; the previous policy stays', 'SIGHUP: the same refusal');
  t.equal((await list(40)).status, 200);
});
