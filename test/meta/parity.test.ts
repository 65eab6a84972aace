/**
 * Parity of the adapters (issue: "the end-to-end suite is written once and run against both"):
 * every end-to-end test file runs against each engine, through `forEachEngine` or a loop over
 * `ENGINES`, and passes its engine to every gateway it starts, unless it says why not with a
 * `// parity: <reason>` line. This test fails when a file does neither.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { PROJECT_ROOT } from '../helpers/servers.js';

const E2E = join(PROJECT_ROOT, 'test', 'e2e');

/** The argument text of every call of `name(` in `source`. */
function callsOf(source: string, name: string): string[] {
  const out: string[] = [];
  for (let i = source.indexOf(name + '('); i !== -1; i = source.indexOf(name + '(', i + 1)) {
    let depth = 0;
    let j = i + name.length;
    for (; j < source.length; j++) {
      if (source[j] === '(') depth++;
      else if (source[j] === ')' && --depth === 0) break;
    }
    out.push(source.slice(i + name.length + 1, j));
  }
  return out;
}

export function parityProblems(source: string): string[] {
  const reason = /^\/\/ parity: \S.{10,}$/m.test(source);
  if (reason) return [];
  const problems: string[] = [];
  if (!source.includes('forEachEngine(') && !source.includes('ENGINES')) problems.push('runs against one engine and gives no `// parity: <reason>`');
  for (const args of callsOf(source, 'startGateway')) {
    if (!/\bengine\b/.test(args)) problems.push(`startGateway(${args.slice(0, 60)}...) does not pass the engine`);
  }
  return problems;
}

t.test('the checker itself', async (t) => {
  t.strictSame(parityProblems("forEachEngine(t, async (t, engine) => { await startGateway(t, {}, { engine }); });"), []);
  t.strictSame(parityProblems("t.test('x', async () => { await startGateway(t, {}); });").length, 2);
  t.strictSame(parityProblems("forEachEngine(t, async (t, engine) => { await startGateway(t, {}); });").length, 1);
  t.strictSame(parityProblems('// parity: talks to the CLI only, no adapter involved\nt.test()'), []);
});

t.test('every end-to-end file runs against every adapter or says why not', async (t) => {
  const files = readdirSync(E2E).filter((f) => f.endsWith('.test.ts'));
  t.ok(files.length > 0, 'there are end-to-end files');
  for (const f of files) t.strictSame(parityProblems(readFileSync(join(E2E, f), 'utf8')), [], f);
});
