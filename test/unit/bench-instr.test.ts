import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PROJECT_ROOT } from '../helpers/root.js';

type Inclusive = (file: string, re: RegExp, lookup?: (addr: number) => string | undefined, root?: string) => Map<string, { ir: number; calls: number }>;

// bench/ is plain JavaScript outside the compiled tree: imported by URL, its export typed here.
const instr = (await import(pathToFileURL(join(PROJECT_ROOT, 'bench', 'instr.mjs')).href)) as { inclusiveCalls: Inclusive };

// A callgrind dump in its compressed form: a name given once as `(id) name`, later as `(id)`;
// the line after `calls=` is the call's inclusive cost, other cost lines are self costs.
const DUMP = `# callgrind format
events: Ir

fn=(1) 0x0000000000001010
0 50
cfn=(2) 0x0000000000002000
calls=3 0
0 900
cfn=(3) v8::internal::Runtime_SetKeyedProperty(int)
calls=2 0
0 400

fn=(2)
0 100
cfn=(3)
calls=4 0
0 700
cfn=(2)
calls=1 0
0 60

fn=(4) Builtins_CallFunction
cfn=(2)
calls=1 0
0 40
`;

t.test('inclusiveCalls sums the calls into matching functions from callers that do not match', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'instr-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'cg.1');
  writeFileSync(file, DUMP);
  // JIT code named through a perf map: 0x1000.. is the caller, 0x2000.. the observer.
  const lookup = (addr: number): string | undefined =>
    addr >= 0x1000 && addr < 0x1100 ? 'JS:*onResponseClose file:///ck/dist/core/exchange.js:10:3' : addr >= 0x2000 && addr < 0x2100 ? 'JS:~record /ck/dist/ops/metrics.js:5:1' : undefined;

  const observer = instr.inclusiveCalls(file, /^JS:record dist\/ops\/metrics/, lookup, '/ck');
  // Its two callers' calls (900 + 40), not its call into itself (a matching caller), named without the checkout.
  t.same([...observer], [['JS:record dist/ops/metrics.js', { ir: 940, calls: 4 }]]);

  const runtime = instr.inclusiveCalls(file, /Runtime_/, lookup, '/ck');
  // The runtime function is found under its JS callers, whose names self costs do not give it.
  t.same([...runtime], [['v8::internal::Runtime_SetKeyedProperty(int)', { ir: 1100, calls: 6 }]]);
  t.end();
});
