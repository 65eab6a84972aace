/**
 * What `npm pack` ships (never the tests or the benchmarks).
 * The tarball holds what a user installs and nothing else: the compiled library and CLI (dist,
 * without source maps: they point at src/, which is not shipped), the policy file schema, the
 * example policy files, the operator console's page (console/), the docs/ pages the README links to, README, LICENSE and package.json. Every `exports` and `bin` target must be
 * in it, or `import 'petstore-gateway'` fails after install.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { ensureBuilt, PROJECT_ROOT, plainCommand } from '../helpers/servers.js';

const run = promisify(execFile);

/** Paths allowed in the tarball: a file under one of these folders, or one of these files. */
const ALLOWED_DIRS = ['dist/', 'schema/', 'policies/', 'docs/', 'openapi/', 'console/'];
const ALLOWED_FILES = ['README.md', 'LICENSE', 'package.json'];
const REQUIRED = ['dist/index.js', 'dist/index.d.ts', 'dist/cli/main.js', 'schema/policy.schema.json', 'policies/default.yaml', 'openapi/pet-store.yaml', 'docs/configuration.md', 'console/index.html', 'console/app.js', 'README.md', 'LICENSE', 'package.json'];

/** Why `path` must not be shipped, or undefined when it may. */
export function packProblem(path: string): string | undefined {
  if (path.endsWith('.map')) return 'a source map (it points at src/, which is not shipped)';
  if (/\.test\.|(^|\/)test\//.test(path)) return 'a test artefact';
  if (ALLOWED_FILES.includes(path)) return undefined;
  if (ALLOWED_DIRS.some((d) => path.startsWith(d))) return undefined;
  return 'outside dist/, schema/, policies/, docs/, openapi/, console/ and the top-level README.md, LICENSE, package.json';
}

/** Every file target of an `exports` map (conditions and subpaths flattened), without the leading "./". */
function exportTargets(exports: unknown): string[] {
  if (typeof exports === 'string') return [exports.replace(/^\.\//, '')];
  if (exports === null || typeof exports !== 'object') return [];
  return Object.values(exports).flatMap(exportTargets);
}

t.test('the path rule itself', async (t) => {
  for (const ok of ['dist/index.js', 'dist/cli/main.js', 'schema/policy.schema.json', 'policies/default.yaml', 'docs/errors.md', 'README.md', 'LICENSE', 'package.json']) {
    t.equal(packProblem(ok), undefined, `${ok} may ship`);
  }
  for (const bad of ['src/index.ts', 'test/unit/auth.test.ts', 'bench/run.mjs', 'dist/index.js.map', 'tsconfig.json', 'eslint.config.js', 'dist/unit/x.test.js', 'notes/habits.md']) {
    t.type(packProblem(bad), 'string', `${bad} must not ship`);
  }
  t.strictSame(exportTargets({ '.': { types: './dist/index.d.ts', default: './dist/index.js' }, './package.json': './package.json' }), [
    'dist/index.d.ts',
    'dist/index.js',
    'package.json',
  ]);
});

t.test('npm pack lists only what a user installs, and everything it needs', async (t) => {
  ensureBuilt();
  // --ignore-scripts: prepack would delete dist (a clean build for publishing) under the feet of
  // test files running in parallel; dist was just brought up to date by ensureBuilt.
  const { stdout } = await run(...plainCommand('npm', ['pack', '--dry-run', '--json', '--ignore-scripts']), {
    cwd: PROJECT_ROOT,
    timeout: 60_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  const report = JSON.parse(stdout) as Array<{ files: Array<{ path: string }> }>;
  const paths = report[0]!.files.map((f) => f.path);
  t.ok(paths.length > 0, `npm pack lists ${paths.length} files`);

  const wrong = paths.map((p) => [p, packProblem(p)] as const).filter(([, why]) => why !== undefined);
  t.strictSame(wrong, [], 'no file outside the allowed set');

  const pkg = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { exports: unknown; bin: Record<string, string> };
  const needed = new Set([...REQUIRED, ...exportTargets(pkg.exports), ...Object.values(pkg.bin).map((b) => b.replace(/^\.\//, ''))]);
  for (const p of needed) t.ok(paths.includes(p), `${p} is in the tarball`);
});
