/**
 * The generated reference pages (docs/configuration.md, docs/errors.md) are what
 * scripts/gen-docs.mjs makes from the current schema and catalogue: an option or an error code
 * added without `npm run docs` fails here, with the command to run in the message. And the
 * embedding page shows the snippets that test/meta/embedding.test.ts compiles, not other code.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { promisify } from 'node:util';
import t from 'tap';
import { policyFileSchema } from '../../src/config/schema.js';
import { CATALOGUE } from '../../src/core/errors.js';
import { ensureBuilt, PROJECT_ROOT, tempDir, nodeCommand } from '../helpers/servers.js';

const run = promisify(execFile);
const SCRIPT = join(PROJECT_ROOT, 'scripts', 'gen-docs.mjs');
const DOCS = join(PROJECT_ROOT, 'docs');
const PAGES = ['configuration.md', 'errors.md'];

interface Outcome {
  code: unknown;
  stderr: string;
}

async function check(dir?: string): Promise<Outcome> {
  const args = [SCRIPT, '--check', ...(dir === undefined ? [] : ['--dir', dir])];
  return run(...nodeCommand(args), { cwd: PROJECT_ROOT, timeout: 60_000 }).then(
    (r) => ({ code: 0, stderr: r.stderr }),
    (err: { code?: unknown; stderr?: string; killed?: boolean }) => ({
      code: err.killed === true ? 'killed after 60 s' : err.code,
      stderr: err.stderr ?? '',
    }),
  );
}

/** Every option path of the schema, spelled as the page spells it (`a.b`, `a[].b`, `a.*.b`). */
function optionPaths(schema: Record<string, unknown>, path: string, out: string[]): string[] {
  const props = (o: unknown): Record<string, Record<string, unknown>> =>
    typeof o === 'object' && o !== null && 'properties' in o ? (o.properties as Record<string, Record<string, unknown>>) : {};
  const branches = Array.isArray(schema.oneOf) ? (schema.oneOf as unknown[]) : [];
  for (const holder of [schema, ...branches]) {
    for (const [name, sub] of Object.entries(props(holder))) optionPaths(sub, path === '' ? name : `${path}.${name}`, out);
  }
  for (const [name, sub] of Object.entries(props(schema.items))) optionPaths(sub, `${path}[].${name}`, out);
  for (const [name, sub] of Object.entries(props(schema.additionalProperties))) optionPaths(sub, `${path}.*.${name}`, out);
  if (path !== '') out.push(path);
  return out;
}

t.test('the committed pages are what `npm run docs` generates now', async (t) => {
  ensureBuilt();
  const result = await check();
  t.equal(result.stderr.trim(), '', 'gen-docs --check reports nothing (else: npm run docs, and see the message)');
  t.equal(result.code, 0, 'gen-docs --check exits 0');
});

t.test('a page that differs, or is missing, is reported stale', async (t) => {
  ensureBuilt();
  const dir = tempDir(t, 'docs');
  for (const page of PAGES) copyFileSync(join(DOCS, page), join(dir, page));
  t.equal((await check(dir)).code, 0, 'an exact copy is current');

  const errors = join(dir, 'errors.md');
  writeFileSync(errors, readFileSync(errors, 'utf8').replace('| 401 |', '| 402 |'));
  const edited = await check(dir);
  t.equal(edited.code, 1, 'one changed character: exit 1');
  t.match(edited.stderr, /out of date, run `npm run docs`: .*errors\.md/, 'the stale page is named');
  t.notMatch(edited.stderr, /configuration\.md/, 'the current page is not');

  rmSync(join(dir, 'configuration.md'));
  t.match((await check(dir)).stderr, /configuration\.md/, 'a missing page is stale too');
});

t.test('every option of the schema has its row (a section its heading) in docs/configuration.md', async (t) => {
  const page = readFileSync(join(DOCS, 'configuration.md'), 'utf8');
  const paths = optionPaths(policyFileSchema(), '', []);
  t.ok(paths.includes('policies.rate-limit.store.redis.url'), 'the walk reaches nested options');
  // A section (a top-level key, a policy) is a heading; everything under it a row of its table.
  const shown = (p: string) => page.includes(`\n| \`${p}\` |`) || new RegExp(`\n#{2,3} \`${p.replace(/[.*[\]]/g, '\\$&')}\`\n`).test(page);
  for (const p of paths) t.ok(shown(p), `${p} has a row or a heading`);
});

t.test('every catalogue code has its row, with its status, in docs/errors.md', async (t) => {
  const page = readFileSync(join(DOCS, 'errors.md'), 'utf8');
  const rows = page.split('\n').filter((l) => /^\| \d{3}/.test(l));
  t.equal(rows.length, Object.keys(CATALOGUE).length, 'one row per code');
  for (const [code, entry] of Object.entries(CATALOGUE)) {
    t.ok(
      rows.some((r) => r.startsWith(`| ${entry.status}`) && r.includes(`| \`${code}\` |`)),
      `${code} (${entry.status})`,
    );
  }
});

t.test('docs/embedding.md shows each compiled embedding snippet as it is compiled', async (t) => {
  const page = readFileSync(join(DOCS, 'embedding.md'), 'utf8');
  const blocks = [...page.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  const dir = join(PROJECT_ROOT, 'test', 'fixtures', 'embedding');
  const snippets = readdirSync(dir).filter((f) => f.endsWith('.ts'));
  t.equal(blocks.length, snippets.length, 'one code block per snippet file');
  for (const f of snippets) {
    // The file's first line is a comment naming the snippet; the rest is the snippet.
    const code = readFileSync(join(dir, f), 'utf8').split('\n').slice(1).join('\n');
    t.ok(blocks.includes(code), `${f} is on the page as written`);
  }
});

/** `excerpt` is part of `whole`: every key it shows has the same value there (lists of named items matched by name). */
function subsetProblems(excerpt: unknown, whole: unknown, path: string, out: string[]): string[] {
  if (Array.isArray(excerpt)) {
    if (!Array.isArray(whole)) return [...out, `${path}: a list on the page, not in the manifest`];
    excerpt.forEach((item, i) => {
      const name = (item as { name?: unknown } | null)?.name;
      const match = name === undefined ? whole[i] : whole.find((w) => (w as { name?: unknown } | null)?.name === name);
      subsetProblems(item, match, `${path}[${name === undefined ? i : String(name)}]`, out);
    });
    return out;
  }
  if (excerpt !== null && typeof excerpt === 'object') {
    if (whole === null || typeof whole !== 'object' || Array.isArray(whole)) return [...out, `${path}: not in the manifest`];
    for (const [k, v] of Object.entries(excerpt)) subsetProblems(v, (whole as Record<string, unknown>)[k], `${path}.${k}`, out);
    return out;
  }
  if (excerpt !== whole) out.push(`${path}: the page says ${JSON.stringify(excerpt)}, the manifest ${JSON.stringify(whole)}`);
  return out;
}

t.test("operations.md's Kubernetes probes are deploy/kubernetes.yaml's", async (t) => {
  const page = readFileSync(join(DOCS, 'operations.md'), 'utf8');
  const section = page.slice(page.indexOf('### Kubernetes probes'));
  const block = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
  if (block === undefined) return t.fail('no yaml block under "### Kubernetes probes"');
  const excerpt = parse(block) as { spec?: { containers?: unknown[] } };
  const deployment = parseAllDocuments(readFileSync(join(PROJECT_ROOT, 'deploy', 'kubernetes.yaml'), 'utf8'))
    .map((d) => d.toJS() as { kind?: string; spec?: { template?: { spec?: unknown } } })
    .find((d) => d.kind === 'Deployment');
  const pod = deployment?.spec?.template?.spec;
  t.ok(pod, 'the manifest has a Deployment');
  const shown = JSON.stringify(excerpt);
  for (const probe of ['livenessProbe', 'readinessProbe', 'startupProbe']) t.ok(shown.includes(`"${probe}"`), `the page shows the ${probe}`);
  t.strictSame(subsetProblems(excerpt.spec, pod, 'spec', []), [], 'every value the page shows is the manifest\'s');

  // The check itself: one changed value is reported.
  const altered = parse(block.replace(/periodSeconds: 5\b/, 'periodSeconds: 2')) as { spec?: unknown };
  t.match(subsetProblems(altered.spec, pod, 'spec', []).join('\n'), /readinessProbe\.periodSeconds: the page says 2/, 'a drifted excerpt is reported');
});
