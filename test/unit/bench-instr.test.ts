import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PROJECT_ROOT } from '../helpers/root.js';

type Inclusive = (file: string, re: RegExp, lookup?: (addr: number) => string | undefined, root?: string) => Map<string, { ir: number; calls: number }>;
type Shares = Map<string, { run: number; gc: number; compile: number }>;

// bench/ is plain JavaScript outside the compiled tree: imported by URL, its export typed here.
const instr = (await import(pathToFileURL(join(PROJECT_ROOT, 'bench', 'instr.mjs')).href)) as {
  inclusiveCalls: Inclusive;
  callerShares: (file: string) => Shares;
  splitShared: (fns: Map<string, number>, shares: Shares) => void;
  classify: (name: string) => string;
};

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

// libc's memset and malloc called by V8's compiler (directly, and through operator new from its
// zone), by the collector and by JIT code (a request's work).
const SHARED_DUMP = `# callgrind format
events: Ir

fn=(1) v8::internal::compiler::PipelineImpl::OptimizeGraph()
cfn=(2) __memset_avx2_unaligned_erms
calls=2 0
0 600
cfn=(3) operator new(unsigned long)
calls=1 0
0 150

fn=(4) 0x0000000000001010
cfn=(2)
calls=1 0
0 200
cfn=(3)
calls=1 0
0 50

fn=(5) v8::internal::Heap::Scavenge()
cfn=(2)
calls=1 0
0 200

fn=(3)
0 20
cfn=(6) malloc
calls=2 0
0 180
`;

t.test('callerShares files libc memory functions under the class of their callers', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'instr-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'cg.1');
  writeFileSync(file, SHARED_DUMP);
  const shares = instr.callerShares(file);
  // memset: 600 of its 1,000 from the compiler, 200 from the collector, 200 from JIT code.
  t.same(shares.get('__memset_avx2_unaligned_erms'), { run: 0.2, gc: 0.2, compile: 0.6 });
  // malloc: its one caller (operator new) passes it on to its own, 150 compiler and 50 JIT code.
  t.same(shares.get('malloc'), { run: 0.25, gc: 0, compile: 0.75 });
  t.notOk(shares.has('operator new(unsigned long)'), 'a pass-through helper keeps its own self cost');

  const fns = new Map([
    ['./string/../sysdeps/x86_64/multiarch/memset-vec-unaligned-erms.S:__memset_avx2_unaligned_erms [/usr/lib/x86_64-linux-gnu/libc.so.6]', 1000],
    ['???:v8::internal::Heap::Scavenge() [/bin/node]', 10],
  ]);
  instr.splitShared(fns, shares);
  const byClass: Record<string, number> = {};
  for (const [name, ir] of fns) byClass[instr.classify(name)] = (byClass[instr.classify(name)] ?? 0) + Math.round(ir);
  t.same(byClass, { run: 200, gc: 210, compile: 600 });
  t.end();
});
