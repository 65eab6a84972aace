/**
 * check's interface report: the shipped document is found from src/ (tsx), from the compiled
 * tests and from dist/ (the package), and read only when a policy chooses another document.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { readShippedDocument, SHIPPED_DOCUMENT } from '../../src/api/document.js';
import { interfaceChangeReport } from '../../src/cli/check.js';
import { deleteAt, SHIPPED_DOCUMENT_PATH, shippedDocument } from '../helpers/openapi.js';
import { ensureBuilt, nodeCommand, PROJECT_ROOT } from '../helpers/servers.js';

const run = promisify(execFile);

t.test('the shipped document, found from this build', async (t) => {
  t.equal(SHIPPED_DOCUMENT, SHIPPED_DOCUMENT_PATH);
  t.strictSame(readShippedDocument(), shippedDocument());
});

t.test('the shipped document, found from dist/', async (t) => {
  ensureBuilt();
  const module = join(PROJECT_ROOT, 'dist', 'api', 'document.js');
  const script = `import(${JSON.stringify(module)}).then((m) => process.stdout.write(m.SHIPPED_DOCUMENT))`;
  const { stdout } = await run(...nodeCommand(['--input-type=module', '-e', script]), { timeout: 30_000 });
  t.equal(stdout, SHIPPED_DOCUMENT_PATH);
});

t.test('interfaceChangeReport: none chosen reads nothing and says nothing', async (t) => {
  t.strictSame(
    interfaceChangeReport(undefined, () => {
      throw new Error('read the shipped document for nothing');
    }),
    [],
  );
  t.strictSame(interfaceChangeReport(shippedDocument()), [], 'the shipped document chosen: nothing');
  const chosen = shippedDocument();
  deleteAt(chosen, ['paths', '/pets', 'post']);
  t.strictSame(interfaceChangeReport(chosen), [
    'interface: 1 change against the shipped document (1 breaking)',
    '  breaking  $.paths["/pets"].post: POST /pets: operation removed (clients that call it get an error)',
  ]);
});
