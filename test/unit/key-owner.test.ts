/**
 * Who to tell about a key (src/core/key-owner.ts): the owner and contact every source takes, the
 * refusal of what looks like a secret, and the same rules where each source reads them: a policy
 * file's keys (schema and check, at their path), the environment's companion variable, a keys
 * export.
 */
import { createHash, randomBytes } from 'node:crypto';
import t from 'tap';
import { contactProblem, looksLikeSecret, ownerFieldsProblem, ownerProblem, SECRET_EXPECTS } from '../../src/core/key-owner.js';
import { parsePolicy } from '../../src/config/load.js';
import { envOwners, keysInForce } from '../../src/policies/auth/index.js';
import { hashKey, newKey } from '../../src/policies/auth/keys.js';
import { newRegistryKey } from '../../src/registry/format.js';
import { KeysUsageError, readExport } from '../../src/cli/keys.js';
import { policyFileSchema } from '../../src/config/schema.js';

t.test('owners accepted, at both ends of the length', async (t) => {
  for (const owner of ['P', 'Payments team', 'Équipe paiements (Paris, 3e étage)', 'team-42-payments-2024', 'k8s-platform-team-v2-oncall', 'ServiceDeskEscalationQueue', 'Jane Doe <jane@example.com>', 'x'.repeat(100)]) {
    t.equal(ownerProblem(owner), undefined, owner.slice(0, 40));
  }
});

t.test('owners refused: empty, too long, control or invisible characters, padded, not a string', async (t) => {
  for (const owner of ['', 'x'.repeat(101), ' Payments', 'Payments ', 'a\tb', 'a\nb', 'a\u0000b', 'a\u007fb', 'a\u202eb', 'a\u200bb', 'a\u2028b', 42, null, ['x']]) {
    // The name in ASCII: a line separator in it would split the TAP line.
    t.match(ownerProblem(owner), /^must be 1 to 100 printable characters/, JSON.stringify(owner)?.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
  }
});

t.test('contacts accepted: e-mail, https and mailto URLs, chat handles, up to 200 characters', async (t) => {
  const accepted = [
    'payments@example.com',
    'first.last+keys@mail.example.co.uk',
    'mailto:payments@example.com',
    'https://wiki.example.com/teams/payments',
    'https://example.atlassian.net/wiki/spaces/PAYMENTS/pages/1234567890/Payments+On+Call',
    'https://example.slack.com/archives/C01ABCD2EFG',
    'https://intranet:8443/oncall#payments',
    '@payments',
    '@example/payments-team',
    '#payments-alerts',
    `https://example.com/${'a'.repeat(200 - 'https://example.com/'.length)}`,
  ];
  for (const contact of accepted) t.equal(contactProblem(contact), undefined, contact.slice(0, 60));
});

t.test('contacts refused: other forms, user:password@, too long', async (t) => {
  const refused = [
    '',
    'Payments team',
    'payments',
    'payments@localhost',
    'http://wiki.example.com/payments',
    'ftp://example.com/x',
    'mailto:',
    'https://user:password@example.com/',
    'https://example.com/a b',
    '@',
    '#',
    '# payments',
    'slack:#payments',
    `https://example.com/${'a'.repeat(201 - 'https://example.com/'.length)}`,
    null,
    7,
  ];
  for (const contact of refused) t.match(contactProblem(contact), /^must be an e-mail address, an https:\/\/ or mailto: URL, or a chat handle/, JSON.stringify(contact).slice(0, 60));
});

t.test('what looks like a secret is refused, with a clear message', async (t) => {
  const registryKey = newRegistryKey();
  const secrets: Array<[string, string]> = [
    ['a registry key as owner', registryKey],
    ['a registry key in a sentence', `Payments (${registryKey})`],
    ['a truncated registry key', registryKey.slice(0, 30)],
    ['a new-key key', newKey()],
    ['a key hash', hashKey('x')],
    ['a random base64url token', 'Zk3pQ9vR2mW7xT4bN8cL1sD6'],
    ['a random base62 token', 'q8ZrT3mKx9WvB2nL5pYc7HdF'],
    ['random lower case and digits', 'a8k3m9x2q7w4z1p6r5t0v3b8'],
    ['a hex token', createHash('md5').update('x').digest('hex')],
    ['a GitHub token', `ghp_${'A1b2C3d4'.repeat(4)}abcd`],
    ['an AWS access key id', 'AKIAIOSFODNN7EXAMPLE'],
    ['a Slack bot token', 'xoxb-123456789012-abcdefghij'],
  ];
  for (const [what, value] of secrets) {
    t.ok(looksLikeSecret(value), what);
    t.equal(ownerProblem(value), SECRET_EXPECTS, `${what}: as owner`);
  }
  t.match(SECRET_EXPECTS, /^looks like a secret/);
  const contacts: Array<[string, string]> = [
    ['a Slack webhook', 'https://hooks.slack.com/services/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'],
    ['a token in the query', 'https://wiki.example.com/payments?token=abc'],
    ['an API key in the query', 'https://wiki.example.com/payments?api_key=abc&x=1'],
    ['a key as a handle', `#${registryKey}`],
    ['a key as an e-mail local part', `${'Zk3pQ9vR2mW7xT4bN8cL1sD6'}@example.com`],
    ['a percent-encoded token', `https://example.com/${encodeURIComponent('x/Zk3pQ9vR2mW7xT4bN8cL1sD6')}`],
  ];
  for (const [what, value] of contacts) t.equal(contactProblem(value), SECRET_EXPECTS, what);
});

t.test('random tokens are refused, words are not: every key the gateway makes, and most random strings of 20 characters', async (t) => {
  let made = 0;
  for (let i = 0; i < 200; i++) if (looksLikeSecret(newRegistryKey()) && looksLikeSecret(newKey())) made++;
  t.equal(made, 200, 'every one of 200 registry keys and new-key keys');
  // Bounded: 1,000 fresh random base64url strings of 20 characters; at most 3% may read as words.
  let missed = 0;
  for (let i = 0; i < 1000; i++) if (!looksLikeSecret(randomBytes(15).toString('base64url'))) missed++;
  t.ok(missed <= 30, `random base64url of 20 characters: ${missed} of 1000 not refused`);
  for (const words of ['payments-platform-oncall-team', 'incident-response-rotation-2025-q3', 'customer_success_escalations_2030', 'MyTeamIsTheBestTeamInTheWorld', 'the-quick-brown-fox-jumps-over']) {
    t.notOk(looksLikeSecret(words), words);
  }
});

t.test('ownerFieldsProblem: the first problem and its field; absent fields are fine', async (t) => {
  t.equal(ownerFieldsProblem({}), undefined);
  t.equal(ownerFieldsProblem({ owner: 'A', contact: '@a' }), undefined);
  t.match(ownerFieldsProblem({ owner: '', contact: 'x' }), { field: 'owner' });
  t.match(ownerFieldsProblem({ owner: 'A', contact: 'x' }), { field: 'contact' });
});

t.test('a policy file: owner and contact of a key, refused at their path', async (t) => {
  const hash = hashKey('k');
  const policy = (key: Record<string, unknown>) => JSON.stringify({ version: 1, policies: { auth: { keysFromEnv: null, keys: [{ id: 'a', hash, ...key }] } } });
  const ok = parsePolicy(policy({ owner: 'Payments team', contact: '#payments' }), { env: {} }, {}, { format: 'json' });
  t.ok(ok.ok);
  if (ok.ok) t.match(ok.config.policies.auth.keys[0], { owner: 'Payments team', contact: '#payments' });
  const cases: Array<[Record<string, unknown>, string, RegExp]> = [
    [{ owner: '' }, '$.policies.auth.keys[0].owner', /^must be 1 to 100 printable characters/],
    [{ contact: '' }, '$.policies.auth.keys[0].contact', /^must be an e-mail address/],
    [{ owner: 'x'.repeat(101) }, '$.policies.auth.keys[0].owner', /at most 100 characters/],
    [{ owner: 'a\tb' }, '$.policies.auth.keys[0].owner', /^must be 1 to 100 printable characters/],
    [{ contact: 'Payments team' }, '$.policies.auth.keys[0].contact', /^must be an e-mail address/],
    [{ owner: newRegistryKey() }, '$.policies.auth.keys[0].owner', /^looks like a secret/],
    [{ contact: 'https://hooks.slack.com/services/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' }, '$.policies.auth.keys[0].contact', /^looks like a secret/],
  ];
  for (const [key, path, message] of cases) {
    const r = parsePolicy(policy(key), { env: {} }, {}, { format: 'json' });
    t.notOk(r.ok, JSON.stringify(key).slice(0, 50));
    if (!r.ok) t.strictSame(r.problems.map((p) => p.path), [path], 'one problem, at its path');
    if (!r.ok) t.match(r.problems[0]?.message, message);
  }
  const schema = JSON.stringify(policyFileSchema());
  t.match(schema, /"owner":\{"type":"string","maxLength":100,"pattern":/, 'in the published schema');
});

t.test('the environment: a companion variable, one entry per key in order', async (t) => {
  const env = { K: 'key-one-aaaaaaaa,key-two-bbbbbbbb,key-three-cccccc', K_OWNERS: '[{"owner":"Payments team","contact":"#payments"},null,{"contact":"ops@example.com"}]' };
  t.strictSame(envOwners('K', env, 3), { owners: [{ owner: 'Payments team', contact: '#payments' }, undefined, { contact: 'ops@example.com' }], problems: [] });
  t.strictSame(envOwners('K', { K: 'a' }, 1), { owners: [], problems: [] }, 'absent: none');
  t.strictSame(envOwners(null, env, 3), { owners: [], problems: [] }, 'no keys variable: none');
  const refused: Array<[string, number, RegExp]> = [
    ['{', 1, /^K_OWNERS must be a JSON array .*: it is not JSON$/],
    ['{"owner":"a"}', 1, /^K_OWNERS must be a JSON array with one entry per key of K, in order/],
    ['[{"owner":"a"},{"owner":"b"}]', 1, /^K_OWNERS has 2 entries but K has 1 key\(s\)/],
    ['["a"]', 1, /^K_OWNERS\[0\] must be \{"owner"\?, "contact"\?\} or null$/],
    ['[{"owner":"a","team":"b"}]', 1, /^K_OWNERS\[0\]: unknown property 'team'/],
    ['[null,{"contact":"nope"}]', 2, /^K_OWNERS\[1\]\.contact must be an e-mail address/],
    [`[{"owner":"${newRegistryKey()}"}]`, 1, /^K_OWNERS\[0\]\.owner looks like a secret/],
  ];
  for (const [raw, n, message] of refused) t.match(envOwners('K', { K_OWNERS: raw }, n).problems[0], message, raw.slice(0, 40));
  // Through the policy: a problem of check at keysFromEnv, never a key in the message.
  const text = JSON.stringify({ version: 1, policies: { auth: { keysFromEnv: 'K' } } });
  const bad = parsePolicy(text, { env: { K: env.K, K_OWNERS: '[null,{"owner":" padded"}]' } }, {}, { format: 'json' });
  t.notOk(bad.ok);
  if (!bad.ok) t.strictSame(bad.problems, [{ path: '$.policies.auth.keysFromEnv', message: 'K_OWNERS[1].owner must be 1 to 100 printable characters, without control characters or a leading or trailing space, such as "Payments team"' }]);
  const good = parsePolicy(text, { env }, {}, { format: 'json' });
  t.ok(good.ok);
  if (good.ok) {
    t.strictSame(keysInForce(good.config.policies.auth, { env }), [
      { id: 'K#1', source: 'env', expires: null, owner: 'Payments team', contact: '#payments' },
      { id: 'K#2', source: 'env', expires: null, owner: null, contact: null },
      { id: 'K#3', source: 'env', expires: null, owner: null, contact: 'ops@example.com' },
    ]);
  }
});

t.test('keysInForce: the file keys, then the environment keys, never a secret', async (t) => {
  const text = JSON.stringify({
    version: 1,
    policies: { auth: { keysFromEnv: 'K', keys: [{ id: 'f', hash: hashKey('k'), expires: '2030-01-01T00:00:00Z', owner: 'Ops', contact: '@ops' }, { id: 'g', hash: hashKey('g') }] } },
  });
  const env = { K: 'plain-env-key-value' };
  const r = parsePolicy(text, { env }, {}, { format: 'json' });
  t.ok(r.ok);
  if (!r.ok) return;
  const keys = keysInForce(r.config.policies.auth, { env });
  t.strictSame(keys, [
    { id: 'f', source: 'file', expires: '2030-01-01T00:00:00Z', owner: 'Ops', contact: '@ops' },
    { id: 'g', source: 'file', expires: null, owner: null, contact: null },
    { id: 'K#1', source: 'env', expires: null, owner: null, contact: null },
  ]);
  t.notMatch(JSON.stringify(keys), /plain-env-key-value|sha256/);
});

t.test('a keys export: owner and contact kept, refused out of form', async (t) => {
  const record = (over: Record<string, unknown>) => ({ id: 'partner', created: '2026-01-01T00:00:00.000Z', secrets: [{ hash: hashKey('x') }], ...over });
  const file = (r: unknown) => JSON.stringify({ format: 'petstore-gateway-keys/1', exported: '2026-01-02T00:00:00Z', records: [r] });
  const ok = record({ owner: 'Payments team', contact: 'payments@example.com' });
  t.strictSame(readExport(file(ok)), [ok]);
  t.throws(() => readExport(file(record({ owner: 7 }))), new KeysUsageError("record 1 ('partner'): owner must be 1 to 100 printable characters, without control characters or a leading or trailing space, such as \"Payments team\""));
  t.throws(() => readExport(file(record({ contact: newRegistryKey() }))), { message: /^record 1 \('partner'\): contact (must be|looks like a secret)/ });
});
