/**
 * docs/embedding.md's snippets compile for a consumer (snippets that name a missing policy file,
 * pass no `log`, or use a possibly undefined value, TS18048, would fail here). Each snippet is a
 * file in test/fixtures/embedding that imports 'petstore-gateway' by its package name, resolved
 * through package.json `exports` to dist/*.d.ts, as after `npm install petstore-gateway`; the
 * folder's tsconfig is strict and checks the .d.ts files too (skipLibCheck off).
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { ensureBuilt, PROJECT_ROOT, nodeCommand } from '../helpers/servers.js';

const run = promisify(execFile);
const FIXTURES = join(PROJECT_ROOT, 'test', 'fixtures', 'embedding');
const TSC = join(PROJECT_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

t.test('one snippet per way of embedding, each importing the package by name', async (t) => {
  const files = readdirSync(FIXTURES).filter((f) => f.endsWith('.ts'));
  t.strictSame(files.sort(), ['fastify-plugin.ts', 'http-proxy-3.ts', 'undici-node-http.ts']);
  for (const f of files) {
    const text = readFileSync(join(FIXTURES, f), 'utf8');
    t.match(text, /from 'petstore-gateway';/, `${f} imports 'petstore-gateway'`);
    t.notMatch(text, /from '\.\.?\//, `${f} imports nothing of the tree by path`);
    t.match(text, /\blog: /, `${f} passes a log`);
  }
});

t.test('tsc --noEmit over the snippets: no error', async (t) => {
  ensureBuilt();
  const result = await run(...nodeCommand([TSC, '--noEmit', '-p', FIXTURES]), { cwd: PROJECT_ROOT, timeout: 120_000 }).then(
    (r) => ({ code: 0, out: r.stdout + r.stderr }),
    (err: { code?: unknown; stdout?: string; stderr?: string; killed?: boolean }) => ({
      code: err.killed === true ? 'killed after 120 s' : err.code,
      out: `${err.stdout ?? ''}${err.stderr ?? ''}`,
    }),
  );
  t.equal(result.code, 0, 'tsc exits 0');
  t.equal(result.out.trim(), '', 'and reports nothing');
});
