/**
 * Two rules of the source tree that no compiler checks. The core is the gateway, not the pet
 * store: no file of src/core (its subfolders included) names the store's paths, operations,
 * parameter or schemas, in code or in comments; what the interface is comes from its document.
 * And no file of src/ is over 500 lines. Each failure names the file (and the line, for a word).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import t from 'tap';
import { PROJECT_ROOT } from '../helpers/servers.js';

const SRC = join(PROJECT_ROOT, 'src');

/** Most lines a file of src/ may have. */
const MAX_LINES = 500;

/**
 * The pet store's words: its path and operation ids and its parameter anywhere (`getPet` also
 * finds `getPetById`), its schema names as whole words, case-sensitive (`Pet`, not `pet store`,
 * `PetStore` or `Petal`).
 */
const STORE_WORDS = /\/v1\/pets|listPets|getPet|createPet|petId|\b(?:Pet|NewPet|Pets)\b/g;

/**
 * Reasons the two checks below are still marked todo (on their assertions: a todo subtest would
 * not run). Delete a reason once its check passes, so that it fails again on a regression.
 */
const CORE_WORDS_TODO: string | undefined = undefined;
const LINES_TODO: string | undefined = undefined;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => {
      const p = join(dir, e.name);
      if (e.isDirectory()) return sourceFiles(p);
      return e.name.endsWith('.ts') ? [relative(PROJECT_ROOT, p).split('\\').join('/')] : [];
    })
    .sort();
}

/** Each line of `text` that names the pet store, as `file:line: word, word`. */
export function storeWordsIn(file: string, text: string): string[] {
  const hits: string[] = [];
  text.split('\n').forEach((line, i) => {
    const words = line.match(STORE_WORDS);
    if (words !== null) hits.push(`${file}:${i + 1}: ${words.join(', ')}`);
  });
  return hits;
}

/** Lines of a text as `wc -l` counts them (a last line without a newline counts too). */
export function lineCount(text: string): number {
  if (text === '') return 0;
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

const option = (todo: string | undefined) => (todo === undefined ? {} : { todo });

t.test('the word search finds the store in code and comments, and only the store', async (t) => {
  const text = [
    "const route = '/v1/pets/{petId}';",
    '// answers listPets and getPet',
    '/** the NewPet schema */ type X = Pet | Pets;',
    'const f = createPet; const g = getPetById;',
    '// the pet store, its pets; PetStore, Petal, Petsitter, pet-scan.ts, NewPets, newPet',
    'const pets = 1;',
  ].join('\n');
  t.same(storeWordsIn('src/core/x.ts', text), [
    'src/core/x.ts:1: /v1/pets, petId',
    'src/core/x.ts:2: listPets, getPet',
    'src/core/x.ts:3: NewPet, Pet, Pets',
    'src/core/x.ts:4: createPet, getPet',
  ]);
});

t.test('lines are counted as wc -l counts them', async (t) => {
  t.equal(lineCount(''), 0);
  t.equal(lineCount('a\n'), 1);
  t.equal(lineCount('a\nb'), 2);
  t.equal(lineCount('a\nb\n'), 2);
  t.equal(lineCount(`${'x\n'.repeat(MAX_LINES)}`), MAX_LINES, 'a file of exactly the bound');
});

t.test('no file of src/core names the pet store (code and comments)', async (t) => {
  const files = sourceFiles(join(SRC, 'core'));
  t.ok(files.length > 20, `read ${files.length} core files`);
  t.ok(files.some((f) => f.startsWith('src/core/forward/')), 'the subfolders too');
  const hits = files.flatMap((file) => storeWordsIn(file, readFileSync(join(PROJECT_ROOT, file), 'utf8')));
  t.same(hits, [], hits.length === 0 ? 'src/core names no word of the pet store' : `src/core names the pet store ${hits.length} times: ${hits.join('; ')}`, option(CORE_WORDS_TODO));
});

t.test(`no file of src/ is over ${MAX_LINES} lines`, async (t) => {
  const files = sourceFiles(SRC);
  t.ok(files.length > 50, `read ${files.length} source files`);
  const over = files.flatMap((file) => {
    const n = lineCount(readFileSync(join(PROJECT_ROOT, file), 'utf8'));
    return n > MAX_LINES ? [`${file}: ${n} lines`] : [];
  });
  t.same(over, [], over.length === 0 ? `every file has ${MAX_LINES} lines or fewer` : `over ${MAX_LINES} lines: ${over.join('; ')}`, option(LINES_TODO));
});
