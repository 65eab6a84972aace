/**
 * The generated reference pages (docs/configuration.md, docs/errors.md) are what
 * scripts/gen-docs.mjs makes from the current schema and catalogue: an option or an error code
 * added without `npm run docs` fails here, with the command to run in the message. And the
 * embedding page shows the snippets that test/meta/embedding.test.ts compiles, not other code.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { promisify } from 'node:util';
import t from 'tap';
import { policyFileSchema } from '../../src/config/schema.js';
import { CATALOGUE } from '../../src/core/errors.js';
import { POLICY_MODULES } from '../../src/policies/index.js';
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

/** GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a Markdown page: one per heading (a repeated one gets -1, -2, ...), outside code blocks. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = fenced ? null : /^#{1,6} (.*)$/.exec(line);
    if (m === null) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The relative links of a Markdown page (outside code), as [target file, anchor]. */
function links(text: string): Array<[string, string | undefined]> {
  const prose = text.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  const out: Array<[string, string | undefined]> = [];
  for (const m of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!;
    if (/^[a-z]+:/i.test(target)) continue;
    const [file, anchor] = target.split('#', 2) as [string, string | undefined];
    out.push([file, anchor]);
  }
  return out;
}

t.test('every docs page is reachable from the README, and every relative link resolves', async (t) => {
  const pages = new Map<string, string>();
  const read = (rel: string): string => {
    let text = pages.get(rel);
    if (text === undefined) {
      text = readFileSync(join(PROJECT_ROOT, rel), 'utf8');
      pages.set(rel, text);
    }
    return text;
  };
  const problems: string[] = [];
  const reached = new Set<string>(['README.md']);
  const queue = ['README.md'];
  for (let i = 0; i < queue.length && i < 1000; i++) {
    const from = queue[i]!;
    const dir = posix.dirname(from);
    for (const [file, anchor] of links(read(from))) {
      const to = file === '' ? from : posix.normalize(posix.join(dir, file)).replace(/\/$/, '');
      if (!existsSync(join(PROJECT_ROOT, to))) {
        problems.push(`${from}: the link to ${file} names no file`);
        continue;
      }
      if (!to.endsWith('.md')) continue;
      if (anchor !== undefined && !anchors(read(to)).has(anchor)) problems.push(`${from}: ${to} has no heading for #${anchor}`);
      if (!reached.has(to)) {
        reached.add(to);
        queue.push(to);
      }
    }
  }
  t.strictSame(problems, [], 'every relative link names a file, and every anchor a heading');
  const docs = readdirSync(DOCS).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`);
  t.strictSame(docs.filter((d) => !reached.has(d)), [], 'every page under docs/ is reachable from README.md');
  const index = read('docs/README.md');
  const listed = new Set(links(index).map(([f]) => posix.normalize(posix.join('docs', f))));
  t.strictSame(docs.filter((d) => d !== 'docs/README.md' && !listed.has(d)), [], 'docs/README.md lists every page');
  t.ok(links(read('README.md')).some(([f]) => f === 'docs/README.md'), "the README's links include docs/README.md");

  // The check itself: a page that nothing links to, and a broken anchor, are found.
  t.notOk(anchors('# A\n## `b.c` d\n').has('nope'), 'an unknown anchor is not a heading');
  t.ok(anchors('# A\n## `b.c` d\n```\n# not\n```\n').has('bc-d'), 'a heading with code and a dot has its GitHub anchor');
  t.notOk(anchors('```\n# not a heading\n```\n').has('not-a-heading'), 'a line in a code block is not a heading');
});

t.test("policies.md's chain names every policy in the order src/policies/index.ts runs them", async (t) => {
  const page = readFileSync(join(DOCS, 'policies.md'), 'utf8');
  const section = page.slice(page.indexOf('## The policies'));
  const chain = /((?:`[a-z-]+`\s*→\s*){3,}`[a-z-]+`)/.exec(section)?.[1];
  if (chain === undefined) return t.fail('no chain "`a` → `b` ..." under "## The policies"');
  const names = [...chain.matchAll(/`([a-z-]+)`/g)].map((m) => m[1]);
  t.strictSame(names, POLICY_MODULES.map((m) => m.name), 'the chain on the page is the order of POLICY_MODULES');
  for (const m of POLICY_MODULES) t.ok(page.includes(`\`${m.name}\``), `${m.name} is on the page`);
});

t.test("the README's Node requirement is package.json's engines", async (t) => {
  const engines = (JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
  const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8');
  const contributing = readFileSync(join(PROJECT_ROOT, 'CONTRIBUTING.md'), 'utf8');
  t.ok(readme.includes(`\`${engines}\``), `README.md quotes engines (${engines})`);
  t.ok(contributing.includes(`\`${engines}\``), `CONTRIBUTING.md quotes engines (${engines})`);
  // Each major the range allows is named, with the minimum minor, and no other major is offered.
  const majors = [...engines.matchAll(/\^(\d+)\.(\d+)\.\d+/g)].map((m) => [m[1]!, m[2]!] as const);
  const requirement = /with Node ([^:]*):/.exec(readme)?.[1] ?? '';
  for (const [major, minor] of majors) t.match(requirement, new RegExp(`Node ${major}${minor === '0' ? '' : `\\.${minor}`}|\\b${major}\\b`), `the README names Node ${major}`);
  for (const m of requirement.matchAll(/Node (\d+)/g)) t.ok(majors.some(([major]) => major === m[1]), `Node ${m[1]} is allowed by engines`);
});

t.test('statements the code contradicts stay out of the pages (D6, D21, I3)', async (t) => {
  const page = (name: string) => readFileSync(join(DOCS, name), 'utf8').replace(/\s+/g, ' ');
  // Each fact from the code first, so that the check goes if the code changes its mind.
  const { failingStatus } = await import('../../src/core/forward/breaker.js');
  t.ok(failingStatus(502) && failingStatus(504) && !failingStatus(500) && !failingStatus(429), 'the breaker counts 502-504, never a 4xx or 500');
  t.notMatch(page('policies.md'), /consecutive failures \([^)]*5xx/, 'policies.md does not say any 5xx trips the breaker');

  const { clientResolver } = await import('../../src/policies/auth/client-address.js');
  const resolve = clientResolver(['127.0.0.1']);
  t.equal(resolve({ remoteAddress: '127.0.0.1', headers: { 'x-forwarded-for': '1.1.1.1' } } as never), '1.1.1.1', 'the lock charges the client behind a trusted proxy');
  for (const name of ['scaling.md', 'policies.md', 'security.md']) {
    t.notMatch(page(name), /affects the forwarded headers only, not this count|counted per client address \(the connection's peer address\)|Brute-force protection and the access log's `client` field use the connection's peer/, `${name}: the lock is not said to key on the TCP peer`);
  }

  const { rateLimit } = await import('../../src/policies/rate-limit/index.js');
  t.match(JSON.stringify(rateLimit.schema), /never unlimited/, 'onStoreError: open limits with the process\'s own counters');
  t.notMatch(page('scaling.md'), /keep serving, unlimited/, 'scaling.md does not call onStoreError: open unlimited');

  const headers = readFileSync(join(PROJECT_ROOT, 'src', 'core', 'headers.ts'), 'utf8');
  t.match(headers, /conn\.tls \? 'https' : 'http'/, 'X-Forwarded-Proto follows the connection');
  t.notMatch(page('security.md'), /does not terminate TLS/, 'security.md does not say the gateway never terminates TLS');
  t.ok(POLICY_MODULES.some((m) => m.name === 'cors'), 'a cors policy exists');
  for (const name of ['security.md', 'choices.md']) t.notMatch(page(name), /preflights are not answered/, `${name} does not say preflights go unanswered`);
});
