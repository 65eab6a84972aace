/**
 * Parity of the engines ("a parity check that proves each e2e scenario runs on
 * every engine"; the previous check passed any file that contained the word ENGINES).
 *
 * Each end-to-end file is parsed with the TypeScript compiler API. A *scenario* is an outermost
 * `t.test(...)` / `test(...)` call that runs when the file is loaded: at the top level, in a loop,
 * in a callback passed to a call, or in a local function the file calls (followed through). Each
 * scenario must
 *   - run inside a `forEachEngine(t, async (t, engine) => ...)` callback that uses `engine`, or
 *   - run inside `for (const engine of ENGINES)` / `ENGINES.forEach|map((engine, i) => ...)` and use
 *     the loop variable in its body (a name that mentions the engine proves nothing), or
 *   - carry a `// parity: <reason>` comment on its top-level statement, saying why one engine is
 *     enough (the CLI's argument parsing, say).
 * Every `startGateway(...)` reached from an engine loop must pass the engine (else it starts the
 * default engine three times). A file with no scenario at all is a problem too (a parse that found
 * nothing must not pass).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import ts from 'typescript';
import { PROJECT_ROOT } from '../helpers/servers.js';

const E2E = join(PROJECT_ROOT, 'test', 'e2e');
/** A reason of at least 10 characters after `// parity:`. */
const PARITY_COMMENT = /^\/\/\s*parity:\s*\S.{9,}$/;

interface Context {
  /** How the scenario runs on every engine, or undefined when it does not (yet). */
  readonly via?: string;
  /** Names bound by the enclosing ENGINES loop, one of which the scenario body must use. */
  readonly loopVars?: readonly string[];
}

function isFunction(node: ts.Node): node is ts.ArrowFunction | ts.FunctionExpression {
  return ts.isArrowFunction(node) || ts.isFunctionExpression(node);
}

function mentions(node: ts.Node, name: string): boolean {
  if (ts.isIdentifier(node) && node.text === name) return true;
  return ts.forEachChild(node, (c) => (mentions(c, name) ? true : undefined)) ?? false;
}

function paramNames(fn: ts.SignatureDeclarationBase): string[] {
  return fn.parameters.flatMap((p) => (ts.isIdentifier(p.name) ? [p.name.text] : []));
}

/**
 * The problems of one end-to-end file's source text, each naming the scenario (and its line).
 * Exported for the self-test below.
 */
export function parityProblems(source: string, fileName = 'inline.test.ts'): string[] {
  const sf = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const problems = new Set<string>();
  const line = (n: ts.Node) => sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1;

  // The names tap's test function goes by: the default import of 'tap' and the usual `t`.
  const tapNames = new Set(['t', 'tap']);
  // Local functions (declarations and `const f = () => ...`), followed when called.
  const locals = new Map<string, ts.SignatureDeclarationBase & { body?: ts.Node | undefined }>();
  for (const st of sf.statements) {
    if (ts.isImportDeclaration(st) && ts.isStringLiteral(st.moduleSpecifier) && st.moduleSpecifier.text === 'tap' && st.importClause?.name) {
      tapNames.add(st.importClause.name.text);
    }
    if (ts.isFunctionDeclaration(st) && st.name) locals.set(st.name.text, st);
    if (ts.isVariableStatement(st)) {
      for (const d of st.declarationList.declarations) {
        if (ts.isIdentifier(d.name) && d.initializer && isFunction(d.initializer)) locals.set(d.name.text, d.initializer);
      }
    }
  }

  const isTestCall = (n: ts.CallExpression) => {
    const c = n.expression;
    if (ts.isIdentifier(c)) return c.text === 'test';
    return ts.isPropertyAccessExpression(c) && c.name.text === 'test' && ts.isIdentifier(c.expression) && tapNames.has(c.expression.text);
  };
  const scenarioName = (n: ts.CallExpression) => {
    const a = n.arguments[0];
    if (a && (ts.isStringLiteral(a) || ts.isNoSubstitutionTemplateLiteral(a))) return a.text;
    return a ? a.getText(sf) : '(unnamed)';
  };
  /** The `// parity:` comment on the statement holding `n`, at the top level or nearer. */
  const parityReason = (n: ts.Node) => {
    for (let p: ts.Node | undefined = n; p && !ts.isSourceFile(p); p = p.parent) {
      if (!ts.isStatement(p) && !ts.isExpressionStatement(p)) continue;
      for (const r of ts.getLeadingCommentRanges(source, p.getFullStart()) ?? []) {
        if (PARITY_COMMENT.test(source.slice(r.pos, r.end))) return true;
      }
    }
    return false;
  };

  let scenarios = 0;
  const following = new Set<string>();

  const visit = (node: ts.Node, ctx: Context, exempt: boolean, inScenario = false): void => {
    // A function that is only declared here runs when called: it is followed from its call.
    if (ts.isFunctionDeclaration(node)) return;
    if (isFunction(node) && !(node.parent && ts.isCallExpression(node.parent) && node.parent.arguments.includes(node as ts.Expression))) return;

    if (ts.isForOfStatement(node) && mentions(node.expression, 'ENGINES')) {
      const d = node.initializer;
      const vars = ts.isVariableDeclarationList(d) ? d.declarations.flatMap((x) => (ts.isIdentifier(x.name) ? [x.name.text] : [])) : [];
      visit(node.statement, inScenario ? ctx : { via: 'for…of ENGINES', loopVars: vars }, exempt, inScenario);
      return;
    }

    if (ts.isCallExpression(node)) {
      const callee = node.expression;
      if (isTestCall(node) && !inScenario) {
        scenarios++;
        const name = `"${scenarioName(node)}" (line ${line(node)})`;
        const ownExempt = exempt || parityReason(node);
        if (!ctx.via && !ownExempt) problems.add(`scenario ${name} runs on one engine and gives no \`// parity: <reason>\``);
        if (ctx.via && ctx.loopVars) {
          const body = node.arguments.find(isFunction);
          const vars = ctx.loopVars;
          if (!body || !vars.some((v) => mentions(body, v))) {
            problems.add(`scenario ${name} is inside ${ctx.via} but its body never uses ${vars.join(' or ') || 'the loop variable'}`);
          }
        }
        // The scenario's own subtests belong to it: only startGateway calls are checked inside.
        for (const a of node.arguments) visit(a, ctx, ownExempt, true);
        return;
      }
      if (ts.isIdentifier(callee) && callee.text === 'forEachEngine' && !inScenario) {
        const body = node.arguments.find(isFunction);
        const engineParam = body ? paramNames(body)[1] : undefined;
        if (!body || !engineParam || !mentions(body.body, engineParam)) {
          problems.add(`forEachEngine at line ${line(node)}: its callback never uses the engine it is given`);
        }
        if (body) visit(body.body, { via: 'forEachEngine' }, exempt, inScenario);
        return;
      }
      if (ts.isPropertyAccessExpression(callee) && ['forEach', 'map', 'flatMap'].includes(callee.name.text) && mentions(callee.expression, 'ENGINES') && !inScenario) {
        for (const a of node.arguments) {
          if (isFunction(a)) visit(a.body, { via: `ENGINES.${callee.name.text}`, loopVars: paramNames(a) }, exempt);
          else visit(a, ctx, exempt);
        }
        return;
      }
      if (ts.isIdentifier(callee) && callee.text === 'startGateway' && !exempt) {
        const args = node.arguments.map((a) => a.getText(sf)).join(', ');
        if (!/\bengine\b/.test(args)) problems.add(`startGateway(${args.slice(0, 60)}) at line ${line(node)} does not pass the engine`);
      }
      if (ts.isIdentifier(callee) && locals.has(callee.text) && !following.has(callee.text)) {
        const fn = locals.get(callee.text)!;
        following.add(callee.text);
        if (fn.body) visit(fn.body, ctx, exempt, inScenario);
        following.delete(callee.text);
      }
    }
    ts.forEachChild(node, (c) => visit(c, ctx, exempt, inScenario));
  };

  for (const st of sf.statements) visit(st, {}, false);
  if (scenarios === 0) problems.add('no scenario found (no t.test or test call runs when the file loads)');
  return [...problems];
}

t.test('the checker itself', async (t) => {
  const ok = (src: string, what: string) => t.strictSame(parityProblems(src), [], `passes: ${what}`);
  const caught = (src: string, re: RegExp, what: string) => {
    const p = parityProblems(src);
    t.ok(p.some((x) => re.test(x)), `caught: ${what} (${JSON.stringify(p)})`);
  };

  ok("forEachEngine(t, async (t, engine) => { const gw = await startGateway(t, {}, { engine }); t.test('a', async (t) => {}); });", 'forEachEngine');
  ok("for (const engine of ENGINES) t.test(engine, async (t) => { await startGateway(t, {}, { engine }); });", 'for…of ENGINES');
  ok('ENGINES.forEach((engine, i) => t.test(engine, async (t) => { await started[i]; }));', 'ENGINES.forEach using the index');
  ok("// parity: talks to the CLI only, no engine involved\nt.test('--help', async (t) => {});", 'a scenario with its reason');
  ok(
    "function suite(t: Tap, engine: Engine) { t.test('x', async (t) => { await startGateway(t, {}, { engine }); }); }\nforEachEngine(t, async (t, engine) => suite(t, engine));",
    'a local suite function called per engine',
  );

  caught("import t from 'tap';\nt.test('one engine only', async (t) => { await startGateway(t, {}); });", /scenario "one engine only" \(line 2\) runs on one engine/, 'a plain top-level scenario');
  caught("forEachEngine(t, async (t, engine) => { t.test(engine, async (t) => { await startGateway(t, {}); }); });", /does not pass the engine/, 'startGateway without the engine');
  caught("forEachEngine(t, async (t) => { t.test('x', async () => {}); });", /never uses the engine/, 'forEachEngine ignoring its engine');
  caught("for (const engine of ENGINES) t.test(engine, async (t) => { await startGateway(t, {}, {}); });", /never uses engine/, 'a loop whose body ignores the engine');
  caught("function suite(t) { t.test('hidden', async () => {}); }\nsuite(t);", /scenario "hidden".*runs on one engine/, 'a scenario hidden in a local function called once');
  caught("const suite = (t) => { t.test('hidden too', async () => {}); };\nsuite(t);", /scenario "hidden too"/, 'the same with an arrow function');
  caught("// parity: short\nt.test('x', async () => {});", /scenario "x"/, 'a parity comment without a real reason');
  caught("// parity: a real reason, but on another statement\nconst a = 1;\nt.test('x', async () => {});", /scenario "x"/, 'a parity comment on another statement');
  caught("t.test('outer', async (t) => { for (const engine of ENGINES) t.test(engine, async () => {}); });", /scenario "outer"/, 'engines looped only inside a one-engine scenario');
  t.strictSame(
    parityProblems("forEachEngine(t, async (t, engine) => { t.test('a', async (t) => { t.test('sub', async (t) => { await startGateway(t, {}, { engine }); }); }); });"),
    [],
    'subtests belong to their scenario',
  );
  caught("forEachEngine(t, async (t, engine) => { t.test(engine, async (t) => { t.test('sub', async (t) => { await startGateway(t, {}); }); }); });", /does not pass the engine/, 'startGateway without the engine in a subtest');
  caught('const x = 1;', /no scenario found/, 'a file with no scenario');
  t.equal(parityProblems("t.test('a', async () => {});\nt.test('b', async () => {});").length, 2, 'one problem per scenario');
});

t.test('every end-to-end scenario runs on every engine, or says why not', async (t) => {
  const files = readdirSync(E2E).filter((f) => f.endsWith('.test.ts'));
  t.ok(files.length > 0, 'there are end-to-end files');
  for (const f of files) t.strictSame(parityProblems(readFileSync(join(E2E, f), 'utf8'), f), [], f);
});
