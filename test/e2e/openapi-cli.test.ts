/**
 * `petstore-gateway openapi [--policy FILE]` through the built CLI: the served document of a policy
 * on stdout (the one src/cli/openapi.ts makes in process, valid OpenAPI 3.1), the default policy
 * file without --policy, and the exit codes of a bad file and a bad flag.
 */
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { servedFor } from '../../src/cli/openapi.js';
import { parsePolicy } from '../../src/config/load.js';
import { runCli, tempDir } from '../helpers/servers.js';

const dir = tempDir(t, 'openapi-cli');
const POLICY = 'version: 1\nserver: { port: 8181 }\npolicies:\n  rate-limit: { limit: 10 }\n';

// parity: a CLI command that starts no engine.
t.test('openapi --policy FILE prints the served document of that policy, exit 0', async (t) => {
  const file = join(dir, 'policy.yaml');
  writeFileSync(file, POLICY);
  // No key anywhere: describing the interface needs none.
  const r = await runCli(t, ['openapi', '--policy', file]);
  t.equal(r.code, 0, `exit 0 (${r.stderr})`);
  t.equal(r.stderr, '', 'nothing on stderr');
  const document = JSON.parse(r.stdout) as Record<string, unknown>;
  const loaded = parsePolicy(POLICY, { env: {} }, {}, { keys: 'not-checked' });
  if (!loaded.ok) throw new Error('test policy');
  t.same(document, servedFor(loaded.config), 'the document src/cli/openapi.ts makes for the policy');
  t.same((document.servers as Array<{ url: string }>).map((s) => s.url), ['http://127.0.0.1:8181/v1', '/v1'], "the policy's listener, and the base path");
  t.match(r.stdout, /"RateLimit-Policy"/, 'with the rate limit of the policy');
  t.same(await new Validator().validate(document), { valid: true }, 'valid OpenAPI');
});

// parity: a CLI command that starts no engine.
t.test('openapi without --policy: the file serve would use', async (t) => {
  const r = await runCli(t, ['openapi']);
  t.equal(r.code, 0, `exit 0 (${r.stderr})`);
  t.equal((JSON.parse(r.stdout) as { openapi?: unknown }).openapi, '3.1.0');
});

// parity: a CLI command that starts no engine.
t.test('openapi: a bad policy file exits 78 naming it, a bad flag 2, --help 0', async (t) => {
  const bad = join(dir, 'bad.yaml');
  writeFileSync(bad, 'version: 1\npolicies:\n  rate-limit: { limit: 0 }\n');
  const invalid = await runCli(t, ['openapi', '--policy', bad]);
  t.equal(invalid.code, 78, 'an invalid policy: 78');
  t.match(invalid.stderr, `${bad}: $.policies["rate-limit"].limit`, 'the problem, with its path');
  t.equal(invalid.stdout, '', 'no document');

  const missing = await runCli(t, ['openapi', '--policy', join(dir, 'none.yaml')]);
  t.equal(missing.code, 78, 'a missing file: 78');
  t.match(missing.stderr, 'none.yaml');

  const flag = await runCli(t, ['openapi', '--port', '1']);
  t.equal(flag.code, 2, 'an unknown flag: 2');
  t.match(flag.stderr, "see 'petstore-gateway openapi --help'");

  const help = await runCli(t, ['openapi', '--help']);
  t.equal(help.code, 0);
  t.match(help.stdout, /^Usage: petstore-gateway openapi \[--policy FILE\]/);
  t.match((await runCli(t, ['--help'])).stdout, 'petstore-gateway openapi [--policy FILE]', 'listed in the help');
});
