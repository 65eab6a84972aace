/**
 * L6: a file or environment key that happens to start with `psgk_` (the registry's prefix) is an
 * ordinary bearer token: `check` lists it and a request with it is answered 200, through the
 * built CLI and a real listening gateway. A mistyped registry-format key (no such file key) is
 * still refused.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { hashKey } from '../../src/policies/auth/keys.js';
import { bearer, ensureBuilt, request, runCli, startGateway, tempDir } from '../helpers/servers.js';

ensureBuilt();

const ENV_KEY = 'psgk_my-own-long-secret-that-happens-to-start-with-psgk';
const FILE_KEY = 'psgk_another-hand-made-secret-0123456789abcdef';

// parity: the auth policy's lookup is in the core chain, the same in every engine (keys-outage.test.ts runs registry keys on each)
t.test('file and environment keys that start with psgk_ work, at check and on a request', async (t) => {
  const dir = tempDir(t, 'keys-format');
  const file = join(dir, 'p.json');
  writeFileSync(file, JSON.stringify({ version: 1, upstream: { url: 'builtin' }, policies: { auth: { keys: [{ id: 'hand', hash: hashKey(FILE_KEY) }] } } }));
  const checked = await runCli(t, ['check', file], { env: { PETSTORE_API_KEYS: ENV_KEY } });
  t.equal(checked.code, 0, checked.stdout + checked.stderr);
  t.match(checked.stdout, /key hand: never expires/);
  t.match(checked.stdout, /key PETSTORE_API_KEYS#1/);
  t.notMatch(checked.stdout + checked.stderr, ENV_KEY, 'the key is never echoed');

  const gw = await startGateway(t, { policies: { auth: { keys: [{ id: 'hand', hash: hashKey(FILE_KEY) }] } } }, { key: ENV_KEY });
  t.equal((await request(`${gw.url}/v1/pets`, { headers: bearer(ENV_KEY) })).status, 200, 'the environment key');
  t.equal((await request(`${gw.url}/v1/pets`, { headers: bearer(FILE_KEY) })).status, 200, 'the file key');
  const wrong = await request(`${gw.url}/v1/pets`, { headers: bearer(ENV_KEY.slice(0, -1)) });
  t.equal(wrong.status, 401, 'a key that is neither is refused');
  t.equal((wrong.json as { code: string }).code, 'invalid_api_key');
});
