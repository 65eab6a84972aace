/**
 * The registry's key format (src/registry/format.ts): prefix, base62 body, CRC-32 checksum; a
 * mistyped key is refused by the auth policy without a lookup; keys of the older forms still work.
 */
import t from 'tap';
import { Chain } from '../helpers/chain.js';
import { auth, hashKey, type AuthConfig } from '../../src/policies/auth/index.js';
import { claimsRegistryFormat, isWellFormedKey, KEY_LENGTH, KEY_PREFIX, KEY_REGEX_SOURCE, newRegistryKey } from '../../src/registry/format.js';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

t.test('a new key: prefix, 46 base62 characters, a valid checksum, distinct over 200 calls', async (t) => {
  const seen = new Set<string>();
  const regex = new RegExp(KEY_REGEX_SOURCE);
  for (let i = 0; i < 200; i++) {
    const key = newRegistryKey();
    t.equal(key.length, KEY_LENGTH);
    t.ok(key.startsWith(KEY_PREFIX));
    t.ok(regex.test(key), 'the documented regex finds it');
    t.ok(regex.test(`token=${key};`), 'also inside other text (a scanner reads files)');
    t.ok(isWellFormedKey(key));
    seen.add(key);
  }
  t.equal(seen.size, 200);
});

t.test('every single-character typo and truncation is caught by the checksum', async (t) => {
  const key = newRegistryKey();
  let caught = 0;
  let tried = 0;
  for (let i = KEY_PREFIX.length; i < key.length; i++) {
    // Three substitutions per position (bounded: 46 * 3 keys).
    for (const c of [ALPHABET[(ALPHABET.indexOf(key[i]!) + 1) % 62], ALPHABET[(ALPHABET.indexOf(key[i]!) + 31) % 62], '0']) {
      if (c === key[i]) continue;
      tried++;
      if (!isWellFormedKey(key.slice(0, i) + c + key.slice(i + 1))) caught++;
    }
  }
  t.equal(caught, tried, 'CRC-32 catches every single substitution');
  t.notOk(isWellFormedKey(key.slice(0, -1)), 'one character short');
  t.notOk(isWellFormedKey(key + 'a'), 'one character long');
  const swapped = key.slice(0, 10) + key[11] + key[10] + key.slice(12);
  if (swapped !== key) t.notOk(isWellFormedKey(swapped), 'two neighbours swapped');
  t.notOk(isWellFormedKey('psgk_' + '-'.repeat(46)), 'outside the alphabet');
});

t.test('keys of the older forms do not claim the format', async (t) => {
  for (const k of ['psg_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'e2e_abc', 'sk-live-123', 'psgk']) t.notOk(claimsRegistryFormat(k), k);
  t.ok(claimsRegistryFormat('psgk_x'));
});

function config(keys: Array<{ id: string; key: string }>): AuthConfig {
  return { keys: keys.map(({ id, key }) => ({ id, hash: hashKey(key) })), keysFromEnv: null, realm: 'petstore', upstreamAuthorization: 'drop', bruteForce: null, registry: null };
}

t.test('auth: the file ring is asked first, whatever the prefix; a bad checksum only skips the registry', async (t) => {
  const good = newRegistryKey();
  const last = good.at(-1)!;
  const typo = good.slice(0, -1) + (last === 'a' ? 'b' : 'a');
  const old = 'psg_an-older-key-0123456789';
  const chain = new Chain([auth.create(config([{ id: 'good', key: good }, { id: 'typo', key: typo }, { id: 'old', key: old }]), { env: {} })]);
  const call = (key: string) => chain.begin({ method: 'GET', target: '/v1/pets', headers: { authorization: `Bearer ${key}` } });
  const passed = (key: string) => {
    const d = call(key);
    return d.error === undefined ? 'pass' : d.error.code;
  };
  t.equal(passed(good), 'pass', 'a well-formed key in the file');
  // A file or environment key that happens to look like a registry key is a key like any other.
  t.equal(passed(typo), 'pass', 'a key of the file that fails the checksum still works (it is the file\'s)');
  t.equal(passed(old), 'pass', 'an older key still works');
  const stranger = typo.slice(0, -2) + (typo.at(-2) === 'c' ? 'dd' : 'cc');
  t.equal(passed(stranger), 'invalid_api_key', 'a registry-format key in no ring is refused');
});
