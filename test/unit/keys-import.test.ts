/**
 * `keys import` reads only what `keys export` writes (src/cli/keys.ts readExport): a file that is
 * not an export, or a record a gateway would misread (a date it cannot parse would never expire),
 * is refused before anything is written.
 */
import t from 'tap';
import { KeysUsageError, readExport } from '../../src/cli/keys.js';

const HASH = `sha256:${'a'.repeat(64)}`;
const record = (over: Record<string, unknown> = {}) => ({ id: 'partner', created: '2026-01-01T00:00:00.000Z', secrets: [{ hash: HASH }], ...over });
const file = (records: unknown[], format = 'petstore-gateway-keys/1') => JSON.stringify({ format, exported: '2026-01-02T00:00:00Z', records });

t.test('an export is read back', async (t) => {
  const ok = record({ expires: '2027-01-01T00:00:00Z', operations: ['listPets'], scopes: ['migration:tester'], secrets: [{ hash: HASH, until: 1767225600000 }, { hash: HASH.replace(/a$/, 'b') }] });
  t.strictSame(readExport(file([ok])), [ok]);
  t.strictSame(readExport(file([])), []);
});

t.test('anything else is refused, with the record it is about', async (t) => {
  const refused: Array<[string, string, RegExp]> = [
    ['not JSON', '{', /not JSON/],
    ['another format', file([record()], 'other/1'), /not a keys export/],
    ['a plaintext key instead of a hash', file([record({ secrets: [{ hash: 'psgk_abc' }] })]), /record 1 .*not a key record/],
    ['an id with #', file([record({ id: 'ENV#1' })]), /record 1/],
    ['an expiry that is no date', file([record(), record({ id: 'p2', expires: 'tomorrow' })]), /record 2 \('p2'\) has a date/],
    ['an unknown operation', file([record({ operations: ['deletePet'] })]), /names an operation/],
    ['scopes that are no list', file([record({ scopes: 'migration:tester' })]), /record 1 \('partner'\) has scopes that are not a list/],
    ['a scope out of form', file([record({ scopes: ['migration:tester', 'has space'] })]), /record 1 \('partner'\) has a scope that is not one, 'has space'/],
    ['too many scopes', file([record({ scopes: Array.from({ length: 33 }, (_, i) => `s${i}`) })]), /at most 32 scopes/],
    ['an overlap end that is no number', file([record({ secrets: [{ hash: HASH, until: 'soon' }] })]), /end is not epoch milliseconds/],
    ['an id twice', file([record(), record({ secrets: [{ hash: HASH.replace(/a$/, 'b') }] })]), /the id 'partner' twice; nothing was imported/],
    ['a hash under two ids', file([record({ operations: ['listPets'] }), record({ id: 'partner-all' })]), /one secret hash under two records \('partner', 'partner-all'\)/],
  ];
  for (const [what, text, message] of refused) {
    let err: unknown;
    try {
      readExport(text);
    } catch (e) {
      err = e;
    }
    t.ok(err instanceof KeysUsageError, `${what}: refused as bad usage`);
    t.match((err as Error | undefined)?.message, message, what);
  }
});
