/**
 * The dependency rules of ARCHITECTURE.md ("Dependency rules"), checked from the imports: every
 * src/**\/*.ts is parsed with the TypeScript compiler API and each `import`, `import type`,
 * `export ... from`, dynamic `import()` and `import('...').T` type reference is held against the
 * table below. A type-only import is still a dependency (it ties the two folders' vocabularies),
 * so it obeys the same table unless a row says a folder may import another's types only. No file
 * may reach itself through its imports (type-only ones included): the graph has no cycle. Nor has
 * the table itself: no layer may reach itself through the layers it may import.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import t from 'tap';
import ts from 'typescript';
import { PROJECT_ROOT } from '../helpers/servers.js';

const SRC = join(PROJECT_ROOT, 'src');

/** A unit of the tree: a folder under src/, or one of the two files at its top. */
type Layer = 'core' | 'api' | 'stores' | 'registry' | 'tls' | 'policies' | 'migration' | 'telemetry' | 'ops' | 'backend' | 'fronts' | 'upstreams' | 'config' | 'gateway' | 'engines' | 'cli' | 'index';

interface Rule {
  /** Layers whose modules this one may import (values and types). Its own layer is always allowed. */
  readonly may: readonly Layer[];
  /** Layers whose types only (`import type`, `export type ... from`) this one may import. */
  readonly typesOf?: readonly Layer[];
}

/** The table of ARCHITECTURE.md, "Dependency rules", in the same order. */
export const RULES: Readonly<Record<Layer, Rule>> = {
  core: { may: [] },
  api: { may: ['core'] },
  stores: { may: [], typesOf: ['core'] },
  registry: { may: ['core', 'stores'] },
  tls: { may: ['core'] },
  policies: { may: ['core', 'api', 'stores', 'registry'] },
  migration: { may: ['core', 'api', 'stores', 'policies'] },
  telemetry: { may: ['core', 'api', 'policies'] },
  ops: { may: ['core', 'api', 'stores', 'registry', 'telemetry'] },
  backend: { may: ['core', 'api'] },
  fronts: { may: ['core', 'tls'] },
  upstreams: { may: ['core', 'backend', 'tls'] },
  config: { may: ['core', 'api', 'stores', 'registry', 'policies', 'migration', 'telemetry', 'ops', 'fronts', 'upstreams'] },
  gateway: { may: ['core', 'api', 'stores', 'policies', 'migration', 'telemetry', 'backend', 'upstreams', 'config'] },
  engines: { may: ['core', 'api', 'stores', 'telemetry', 'ops', 'backend', 'fronts', 'upstreams', 'config', 'gateway'] },
  cli: { may: ['core', 'api', 'stores', 'registry', 'tls', 'policies', 'migration', 'telemetry', 'ops', 'backend', 'fronts', 'upstreams', 'config', 'gateway', 'engines'] },
  index: { may: ['core', 'api', 'stores', 'registry', 'tls', 'policies', 'migration', 'telemetry', 'ops', 'backend', 'fronts', 'upstreams', 'config', 'gateway', 'engines'] },
};

/** Libraries the framework-free layers never load: the core and the policies see no HTTP stack. */
// node:net is not on the list: its isIP family is address syntax (the Host check, the brute-force
// lock's /64 grouping); sockets come only through node:http, https, http2 and tls.
const HTTP_LIBRARIES = /^(fastify|fastify-plugin|@fastify\/.*|http-proxy-3|undici|redis|node:(http|https|http2|tls))$/;
const FRAMEWORK_FREE: readonly Layer[] = ['core', 'policies'];

/**
 * Imports that break a rule today and are being removed in another branch: the Fastify plugin still
 * composes its own transports (a front importing upstreams and the composition root). Each entry must
 * still be seen (a stale entry fails), so the list only shrinks.
 */
const PENDING: ReadonlyArray<{ readonly from: string; readonly to: string; readonly why: string }> = [
  { from: 'src/fronts/fastify.ts', to: 'src/gateway.ts', why: 'the plugin builds its own pipeline from a Gateway' },
  { from: 'src/fronts/fastify.ts', to: 'src/upstreams/builtin.ts', why: 'the plugin picks its own transport' },
  { from: 'src/fronts/fastify.ts', to: 'src/upstreams/reply-from.ts', why: 'the plugin picks its own transport' },
  { from: 'src/registry/records.ts', to: 'src/policies/auth/keys.ts', why: 'the key grant type belongs in core, beside Consumer' },
  { from: 'src/registry/registry.ts', to: 'src/policies/auth/keys.ts', why: 'the key hash and grant belong in core, beside Consumer' },
];

export interface ImportRef {
  readonly specifier: string;
  readonly typeOnly: boolean;
  readonly line: number;
}

function isTypeOnlyImport(node: ts.ImportDeclaration): boolean {
  const clause = node.importClause;
  if (clause === undefined) return false; // `import './x.js'` runs the module
  if (clause.isTypeOnly) return true;
  const bindings = clause.namedBindings;
  // `import { type A, type B } from` loads nothing at run time either, but it is written per name.
  return clause.name === undefined && bindings !== undefined && ts.isNamedImports(bindings) && bindings.elements.length > 0 && bindings.elements.every((e) => e.isTypeOnly);
}

function isTypeOnlyExport(node: ts.ExportDeclaration): boolean {
  if (node.isTypeOnly) return true;
  const clause = node.exportClause;
  return clause !== undefined && ts.isNamedExports(clause) && clause.elements.length > 0 && clause.elements.every((e) => e.isTypeOnly);
}

/** Every module a source text refers to, with whether only its types are used. */
export function importsOf(fileName: string, text: string): ImportRef[] {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: ImportRef[] = [];
  const add = (spec: ts.Expression | undefined, typeOnly: boolean, at: ts.Node) => {
    if (spec === undefined || !ts.isStringLiteralLike(spec)) return;
    found.push({ specifier: spec.text, typeOnly, line: sf.getLineAndCharacterOfPosition(at.getStart(sf)).line + 1 });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) add(node.moduleSpecifier, isTypeOnlyImport(node), node);
    else if (ts.isExportDeclaration(node)) add(node.moduleSpecifier, isTypeOnlyExport(node), node);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) add(node.moduleReference.expression, node.isTypeOnly, node);
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add(node.arguments[0], false, node);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal, true, node);
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

/** The layer of a path relative to the project root (`src/core/x.ts`), or undefined outside src/. */
export function layerOf(path: string): Layer | undefined {
  const parts = path.split('/');
  if (parts[0] !== 'src') return undefined;
  if (parts.length === 2) {
    if (parts[1] === 'gateway.ts') return 'gateway';
    if (parts[1] === 'index.ts') return 'index';
    return undefined;
  }
  const folder = parts[1];
  return folder !== undefined && folder in RULES ? (folder as Layer) : undefined;
}

/** The folder of one policy (`auth` for src/policies/auth/x.ts), undefined for src/policies/index.ts. */
function policyFolder(path: string): string | undefined {
  const parts = path.split('/');
  return parts[1] === 'policies' && parts.length > 3 ? parts[2] : undefined;
}

/**
 * Which rule an import from `from` of `to` breaks (paths relative to the project root; `to` is a
 * package name for a bare specifier), or undefined when it keeps them all.
 */
export function brokenRule(from: string, to: string, typeOnly: boolean): string | undefined {
  const src = layerOf(from);
  if (src === undefined) return `${from} is in no layer of the table: add its folder to ARCHITECTURE.md and RULES`;
  if (!to.startsWith('src/')) {
    if (FRAMEWORK_FREE.includes(src) && !typeOnly && HTTP_LIBRARIES.test(to)) return `${src} imports no HTTP or Redis library (${to})`;
    return undefined;
  }
  const dst = layerOf(to);
  if (dst === undefined) return `${to} is in no layer of the table`;
  const a = policyFolder(from);
  const b = policyFolder(to);
  // A policy's facts.ts holds only the slots it owns (src/core/facts.ts): another policy may read
  // those facts (the rate limit counts per auth's key id), and nothing else of that policy.
  if (a !== undefined && b !== undefined && a !== b && !to.endsWith(`policies/${b}/facts.ts`)) {
    return `a policy imports no other policy (policies/${a} -> policies/${b}): move what they share to core, or read its facts.ts`;
  }
  if (dst === src) return undefined;
  const rule = RULES[src];
  if (rule.may.includes(dst)) return undefined;
  if (typeOnly && rule.typesOf?.includes(dst) === true) return undefined;
  const allowed = [...rule.may, ...(rule.typesOf ?? []).map((l) => `${l} (types only)`)];
  return `${src} may import ${allowed.length === 0 ? `nothing outside ${src}` : allowed.join(', ')}, not ${dst}${typeOnly ? ' (even types)' : ''}`;
}

/** Where a relative specifier of `from` points, as a project-relative .ts path. */
function resolveSpecifier(from: string, specifier: string): string {
  if (!specifier.startsWith('.')) return specifier;
  const abs = resolve(PROJECT_ROOT, dirname(from), specifier).replace(/\.js$/, '.ts');
  return relative(PROJECT_ROOT, abs).split('\\').join('/');
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return e.name.endsWith('.ts') ? [relative(PROJECT_ROOT, p).split('\\').join('/')] : [];
  });
}

/**
 * The import cycles of a graph (file -> the files it imports), each once, as the path that closes
 * it (`a -> b -> a`): a depth-first search that reports an edge back to a file still on its path.
 */
export function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const found: string[][] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    path.push(file);
    for (const to of graph.get(file) ?? []) {
      if (!graph.has(to)) continue;
      const seen = state.get(to);
      if (seen === 'open') found.push([...path.slice(path.indexOf(to)), to]);
      else if (seen === undefined) visit(to);
    }
    path.pop();
    state.set(file, 'done');
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return found;
}

/**
 * The cycles of a rules table, each as `a -> b -> a`: a layer reaching itself through the layers
 * it may import, values or types (a types-only edge ties two vocabularies as much as any).
 */
export function ruleCycles(rules: Readonly<Record<string, { readonly may: readonly string[]; readonly typesOf?: readonly string[] }>>): string[] {
  const graph = new Map(Object.entries(rules).map(([layer, rule]) => [layer, [...rule.may, ...(rule.typesOf ?? [])]]));
  return cyclesOf(graph).map((c) => c.join(' -> '));
}

t.test('the parser sees every form of import', async (t) => {
  const text = [
    "import { a } from '../stores/a.js';",
    "import type { B } from '../fronts/b.js';",
    "import { type C, type D } from '../ops/c.js';",
    "import e, { type F } from '../config/e.js';",
    "export { g } from '../engines/g.js';",
    "export type { H } from '../cli/h.js';",
    "export * from '../backend/i.js';",
    "import './side-effect.js';",
    'async function f() { return import(\'../upstreams/j.js\'); }',
    "type K = import('../gateway.js').Gateway;",
    "import fastify from 'fastify';",
  ].join('\n');
  t.same(importsOf('src/core/x.ts', text), [
    { specifier: '../stores/a.js', typeOnly: false, line: 1 },
    { specifier: '../fronts/b.js', typeOnly: true, line: 2 },
    { specifier: '../ops/c.js', typeOnly: true, line: 3 },
    { specifier: '../config/e.js', typeOnly: false, line: 4 },
    { specifier: '../engines/g.js', typeOnly: false, line: 5 },
    { specifier: '../cli/h.js', typeOnly: true, line: 6 },
    { specifier: '../backend/i.js', typeOnly: false, line: 7 },
    { specifier: './side-effect.js', typeOnly: false, line: 8 },
    { specifier: '../upstreams/j.js', typeOnly: false, line: 9 },
    { specifier: '../gateway.js', typeOnly: true, line: 10 },
    { specifier: 'fastify', typeOnly: false, line: 11 },
  ]);
});

t.test('the rules refuse what the table forbids, and say which rule', async (t) => {
  const cases: ReadonlyArray<[string, string, boolean, RegExp | undefined]> = [
    ['src/core/policy.ts', 'src/stores/types.ts', true, /^core may import nothing outside core, not stores \(even types\)$/],
    ['src/core/exchange.ts', 'src/core/forward/index.ts', false, undefined],
    ['src/core/exchange.ts', 'fastify', false, /core imports no HTTP or Redis library \(fastify\)/],
    ['src/core/exchange.ts', 'node:http', false, /no HTTP/],
    ['src/core/exchange.ts', 'node:crypto', false, undefined],
    ['src/stores/redis.ts', 'src/core/policy.ts', true, undefined],
    ['src/stores/redis.ts', 'src/core/policy.ts', false, /^stores may import core \(types only\), not core$/],
    ['src/policies/auth/index.ts', 'src/policies/deprecation/index.ts', false, /a policy imports no other policy \(policies\/auth -> policies\/deprecation\)/],
    ['src/policies/auth/index.ts', 'src/policies/auth/keys.ts', false, undefined],
    ['src/policies/rate-limit/index.ts', 'src/policies/auth/facts.ts', false, undefined],
    ['src/policies/rate-limit/index.ts', 'src/policies/auth/keys.ts', false, /a policy imports no other policy \(policies\/rate-limit -> policies\/auth\)/],
    ['src/ops/access-log.ts', 'src/policies/list-pets/facts.ts', true, /^ops may import core, api, stores, registry, telemetry, not policies \(even types\)$/],
    ['src/core/forward/index.ts', 'src/policies/cache/layer.ts', false, /^core may import nothing outside core, not policies$/],
    ['src/policies/cache/layer.ts', 'src/core/forward/layer.ts', false, undefined],
    ['src/policies/cache/redis.ts', 'src/stores/connection.ts', false, undefined],
    ['src/policies/cache/redis.ts', 'redis', false, /policies imports no HTTP or Redis library \(redis\)/],
    ['src/policies/index.ts', 'src/policies/auth/index.ts', false, undefined],
    ['src/policies/index.ts', 'src/config/types.ts', true, /^policies may import core, api, stores, registry, not config \(even types\)$/],
    ['src/ops/index.ts', 'src/config/types.ts', true, /^ops may import/],
    ['src/ops/metrics.ts', 'src/core/record.ts', false, undefined],
    ['src/upstreams/undici.ts', 'src/config/types.ts', true, /^upstreams may import core, backend, tls, not config/],
    ['src/fronts/fastify.ts', 'src/upstreams/reply-from.ts', false, /^fronts may import core, tls, not upstreams$/],
    ['src/engines/node.ts', 'src/fronts/node-http.ts', false, undefined],
    ['src/engines/node.ts', 'src/cli/commands.ts', false, /^engines may import .*, not cli$/],
    ['src/gateway.ts', 'src/engines/node.ts', false, /^gateway may import/],
    ['src/cli/commands.ts', 'src/engines/undici.ts', false, undefined],
    ['src/index.ts', 'src/cli/commands.ts', false, /not cli/],
    ['src/newfolder/x.ts', 'src/core/errors.ts', false, /src\/newfolder\/x.ts is in no layer/],
    ['src/tls/listener.ts', 'src/config/types.ts', true, /^tls may import core, not config \(even types\)$/],
    ['src/tls/upstream.ts', 'src/fronts/config.ts', true, /^tls may import core, not fronts/],
    ['src/api/model.ts', 'src/core/operations.ts', true, undefined],
    ['src/api/model.ts', 'src/policies/index.ts', false, /^api may import core, not policies$/],
    ['src/policies/route/index.ts', 'src/api/model.ts', false, undefined],
    ['src/backend/service.ts', 'src/api/model.ts', false, undefined],
    ['src/config/load.ts', 'src/api/model.ts', false, undefined],
    ['src/gateway.ts', 'src/api/model.ts', false, undefined],
    ['src/fronts/node-http.ts', 'src/api/model.ts', false, /^fronts may import core, tls, not api$/],
    ['src/core/exchange.ts', 'src/api/model.ts', true, /^core may import nothing outside core, not api \(even types\)$/],
  ];
  for (const [from, to, typeOnly, expected] of cases) {
    const broken = brokenRule(from, to, typeOnly);
    if (expected === undefined) t.equal(broken, undefined, `${from} -> ${to} is allowed`);
    else t.match(broken, expected, `${from} -> ${to}${typeOnly ? ' (type)' : ''} is refused`);
  }
});

t.test('the loader names no policy: it iterates the ordered list, each module checks its own section', async (t) => {
  const file = 'src/config/load.ts';
  const text = readFileSync(join(PROJECT_ROOT, file), 'utf8');
  const intoPolicies = importsOf(file, text).map((r) => resolveSpecifier(file, r.specifier)).filter((to) => to.startsWith('src/policies/'));
  t.same(intoPolicies, ['src/policies/index.ts'], 'only src/policies/index.ts (POLICY_MODULES)');
  const names = readdirSync(join(SRC, 'policies'), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
  t.ok(names.length >= 10, `found ${names.length} policies`);
  const literals: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteralLike(node) || ts.isTemplateHead(node) || ts.isTemplateMiddle(node) || ts.isTemplateTail(node)) literals.push(node.text);
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS));
  const named = literals.filter((l) => names.some((n) => l === n || l.includes(`policies/${n}`) || l.includes(`$.policies.${n}`) || l.includes(`policies["${n}"]`)));
  // (A message may still tell the operator where an option lives: only paths and keys count.)
  t.same(named, [], 'no string of the loader names a policy (path or key)');
});

t.test('the core names no field of the pet store: a path parameter travels as `param`', async (t) => {
  const files = sourceFiles(join(SRC, 'core'));
  const named: string[] = [];
  for (const file of files) {
    const sf = ts.createSourceFile(file, readFileSync(join(PROJECT_ROOT, file), 'utf8'), ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
    const visit = (node: ts.Node): void => {
      // Identifiers only: a route label such as '/v1/pets/{petId}' is a value, not a field.
      if (ts.isIdentifier(node) && node.text === 'petId') named.push(`${file}:${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1}`);
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  t.ok(files.length > 20, `read ${files.length} core files`);
  t.same(named, [], 'no identifier petId in src/core');
});

t.test('every import in src/ keeps the dependency rules', async (t) => {
  const files = sourceFiles(SRC);
  t.ok(files.length > 50, `found ${files.length} source files`);
  const seenPending = new Set<string>();
  const broken: string[] = [];
  let count = 0;
  for (const file of files) {
    for (const ref of importsOf(file, readFileSync(join(PROJECT_ROOT, file), 'utf8'))) {
      count++;
      const to = resolveSpecifier(file, ref.specifier);
      const rule = brokenRule(file, to, ref.typeOnly);
      if (rule === undefined) continue;
      const pending = PENDING.find((p) => p.from === file && p.to === to);
      if (pending !== undefined) {
        seenPending.add(`${file} -> ${to}`);
        continue;
      }
      broken.push(`${file}:${ref.line} imports ${ref.specifier}: ${rule}`);
    }
  }
  t.ok(count > 300, `parsed ${count} imports`);
  t.same(broken, [], 'no import breaks a rule');
  const stale = PENDING.filter((p) => !seenPending.has(`${p.from} -> ${p.to}`)).map((p) => `${p.from} -> ${p.to}`);
  t.same(stale, [], 'every pending exception is still needed (remove the ones that are not)');
});

t.test('the cycle search finds a cycle, and only a cycle', async (t) => {
  const g = (edges: Record<string, string[]>) => new Map(Object.entries(edges));
  t.same(cyclesOf(g({ a: ['b'], b: ['c'], c: [] })), [], 'a chain is no cycle');
  t.same(cyclesOf(g({ a: ['b', 'c'], b: ['d'], c: ['d'], d: [] })), [], 'a diamond is no cycle');
  t.same(cyclesOf(g({ a: ['b'], b: ['c'], c: ['a'] })), [['a', 'b', 'c', 'a']]);
  t.same(cyclesOf(g({ a: ['a'] })), [['a', 'a']], 'a file importing itself');
  t.same(cyclesOf(g({ a: ['x'], x: ['y'], y: ['x'] })), [['x', 'y', 'x']]);
});

t.test('the table has no cycle: no layer may reach itself through the layers it may import (types included)', async (t) => {
  t.same(ruleCycles({ a: { may: ['b'] }, b: { may: [], typesOf: ['c'] }, c: { may: ['a'] } }), ['a -> b -> c -> a'], 'a cycle through a types-only edge is found and named');
  t.same(ruleCycles({ core: { may: [] }, tls: { may: ['core'], typesOf: ['config'] }, config: { may: ['core', 'fronts'] }, fronts: { may: ['core', 'tls'] } }), ['config -> fronts -> tls -> config'], 'the cycle the table once had');
  t.same(ruleCycles({ a: { may: ['b', 'c'] }, b: { may: ['c'] }, c: { may: [] } }), [], 'a layered table has none');
  const cycles = ruleCycles(RULES);
  t.same(cycles, [], cycles.length === 0 ? 'RULES has no cycle' : `RULES has a cycle between layers: ${cycles.join('; ')}`);
});

t.test('no file of src/ imports itself through others (type-only imports count)', async (t) => {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const to = importsOf(file, readFileSync(join(PROJECT_ROOT, file), 'utf8')).map((r) => resolveSpecifier(file, r.specifier)).filter((p) => p.startsWith('src/'));
    graph.set(file, [...new Set(to)]);
  }
  t.ok(graph.size > 50, `a graph of ${graph.size} files`);
  t.same(cyclesOf(graph).map((c) => c.join(' -> ')), [], 'no import cycle');
});
