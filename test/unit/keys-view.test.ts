/**
 * The console's Keys view (src/ops/console/keys-view.ts): every key in force by id, each flag at
 * its boundary (expired, expiring soon, unused, never used), the rotation overlap, the registry's
 * last used time against the console's, the file's key over the registry's, the revocations newest
 * first, and who to tell for the other views.
 */
import t from 'tap';
import { keysView, whoToTell, type KeysViewInput, type PolicyKey } from '../../src/ops/console/keys-view.js';
import type { KeyInfo, Revocation } from '../../src/registry/index.js';

const DAY = 86_400_000;
const NOW = Date.parse('2030-06-01T12:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

const fileKey = (id: string, over: Partial<PolicyKey> = {}): PolicyKey => ({ id, source: 'file', expires: null, owner: null, contact: null, ...over });
const regKey = (id: string, over: Partial<KeyInfo> = {}): KeyInfo => ({
  id,
  created: iso(NOW - 400 * DAY),
  expires: null,
  operations: null,
  scopes: null,
  owner: null,
  contact: null,
  lastUsed: null,
  previousValidUntil: null,
  ...over,
});

function view(over: Partial<KeysViewInput>) {
  return keysView({ policyKeys: [], registry: [], revoked: [], seen: new Map(), countingSinceMs: NOW - 365 * DAY, nowMs: NOW, scope: 'instance', ...over });
}
const byId = (v: ReturnType<typeof keysView>) => new Map(v.keys.map((k) => [k.id, k]));

t.test('defaults, the view base, sorted by id', async (t) => {
  const v = view({ policyKeys: [fileKey('m'), fileKey('a', { source: 'env' })], registry: [regKey('z'), regKey('b')] });
  t.equal(v.generatedAt, '2030-06-01T12:00:00.000Z');
  t.equal(v.scope, 'instance');
  t.notOk('degraded' in v);
  t.equal(v.unusedDays, 30);
  t.equal(v.expiringDays, 14);
  t.strictSame(
    v.keys.map((k) => [k.id, k.source]),
    [
      ['a', 'env'],
      ['b', 'registry'],
      ['m', 'file'],
      ['z', 'registry'],
    ],
  );
  const fleet = view({ scope: 'fleet', degraded: 'store unreachable', unusedDays: 7, expiringDays: 3 });
  t.match(fleet, { scope: 'fleet', degraded: 'store unreachable', unusedDays: 7, expiringDays: 3 });
  t.match(view({ unusedDays: -1, expiringDays: Number.NaN }), { unusedDays: 30, expiringDays: 14 }, 'a value that is no number of days: the default');
});

t.test('expired and expiring soon, at their boundaries', async (t) => {
  const keys = [
    fileKey('at-now', { expires: iso(NOW) }),
    fileKey('just-after-now', { expires: iso(NOW + 1) }),
    fileKey('at-14-days', { expires: iso(NOW + 14 * DAY) }),
    fileKey('past-14-days', { expires: iso(NOW + 14 * DAY + 1) }),
    fileKey('long-gone', { expires: iso(NOW - 100 * DAY) }),
    fileKey('never', { expires: null }),
  ];
  const k = byId(view({ policyKeys: keys }));
  t.match(k.get('at-now'), { expired: true, expiringSoon: false }, 'expired from its instant on, as auth refuses it');
  t.match(k.get('just-after-now'), { expired: false, expiringSoon: true });
  t.match(k.get('at-14-days'), { expired: false, expiringSoon: true }, 'within expiringDays: the boundary included');
  t.match(k.get('past-14-days'), { expired: false, expiringSoon: false });
  t.match(k.get('long-gone'), { expired: true, expiringSoon: false });
  t.match(k.get('never'), { expired: false, expiringSoon: false, expires: null });
  const three = byId(view({ policyKeys: keys, expiringDays: 3 }));
  t.match(three.get('at-14-days'), { expiringSoon: false }, 'expiringDays from the query');
  t.match(byId(view({ registry: [regKey('r', { expires: iso(NOW + DAY) })] })).get('r'), { source: 'registry', expiringSoon: true }, 'a registry key likewise');
});

t.test('unused: no request for unusedDays, the boundary included', async (t) => {
  const seen = new Map([
    ['at-30-days', NOW - 30 * DAY],
    ['under-30-days', NOW - 30 * DAY + 1],
    ['recent', NOW - 1000],
  ]);
  const k = byId(view({ policyKeys: [fileKey('at-30-days'), fileKey('under-30-days'), fileKey('recent')], seen }));
  t.match(k.get('at-30-days'), { unused: true, lastUsed: iso(NOW - 30 * DAY) });
  t.match(k.get('under-30-days'), { unused: false });
  t.match(k.get('recent'), { unused: false, lastUsed: iso(NOW - 1000) });
  t.match(byId(view({ policyKeys: [fileKey('recent')], seen, unusedDays: 0 })).get('recent'), { unused: true }, 'unusedDays 0: every key');
});

t.test('never used: unused only once the console has counted for unusedDays (and the key existed that long)', async (t) => {
  const keys = [fileKey('f')];
  t.match(byId(view({ policyKeys: keys, countingSinceMs: NOW - 30 * DAY })).get('f'), { unused: true, lastUsed: null });
  t.match(byId(view({ policyKeys: keys, countingSinceMs: NOW - 30 * DAY + 1 })).get('f'), { unused: false, lastUsed: null }, 'not counted long enough: not known to be unused');
  // A registry key made 10 days ago and never used is not unused for 30 days.
  const young = regKey('young', { created: iso(NOW - 10 * DAY) });
  t.match(byId(view({ registry: [young], countingSinceMs: NOW - 365 * DAY })).get('young'), { unused: false });
  const old = regKey('old', { created: iso(NOW - 30 * DAY) });
  t.match(byId(view({ registry: [old], countingSinceMs: NOW - 365 * DAY })).get('old'), { unused: true });
});

t.test("last used: the registry's or the console's, whichever is later", async (t) => {
  const registry = [regKey('reg-newer', { lastUsed: iso(NOW - DAY) }), regKey('seen-newer', { lastUsed: iso(NOW - 40 * DAY) }), regKey('only-seen')];
  const seen = new Map([
    ['reg-newer', NOW - 50 * DAY],
    ['seen-newer', NOW - 2 * DAY],
    ['only-seen', NOW - 3 * DAY],
  ]);
  const k = byId(view({ registry, seen }));
  t.match(k.get('reg-newer'), { lastUsed: iso(NOW - DAY), unused: false });
  t.match(k.get('seen-newer'), { lastUsed: iso(NOW - 2 * DAY), unused: false }, 'used 40 days ago by the registry, 2 by the console: not unused');
  t.match(k.get('only-seen'), { lastUsed: iso(NOW - 3 * DAY) });
});

t.test('rotation overlap: until when the older secrets work, null once over', async (t) => {
  const k = byId(
    view({
      registry: [regKey('overlap', { previousValidUntil: iso(NOW + 3600_000) }), regKey('ended', { previousValidUntil: iso(NOW) }), regKey('none')],
      policyKeys: [fileKey('file')],
    }),
  );
  t.equal(k.get('overlap')?.overlapUntil, iso(NOW + 3600_000));
  t.equal(k.get('ended')?.overlapUntil, null, 'the end reached: no overlap');
  t.equal(k.get('none')?.overlapUntil, null);
  t.equal(k.get('file')?.overlapUntil, null);
});

t.test('owner and contact from each source; the file key wins over a registry key of its id', async (t) => {
  const v = view({
    policyKeys: [fileKey('shared', { owner: 'File team', contact: '#file' }), fileKey('K#1', { source: 'env', owner: 'Env team', contact: null })],
    registry: [regKey('shared', { owner: 'Registry team', lastUsed: iso(NOW) }), regKey('reg', { owner: 'Reg', contact: 'reg@example.com' })],
  });
  t.strictSame(
    v.keys.map((k) => [k.id, k.source, k.owner, k.contact]),
    [
      ['K#1', 'env', 'Env team', null],
      ['reg', 'registry', 'Reg', 'reg@example.com'],
      ['shared', 'file', 'File team', '#file'],
    ],
  );
  t.equal(byId(v).get('shared')?.lastUsed, null, "the registry key's use is not the file key's");
  t.strictSame(Object.keys(v.keys[0]!).sort(), ['contact', 'expired', 'expires', 'expiringSoon', 'id', 'lastUsed', 'overlapUntil', 'owner', 'source', 'unused']);
});

t.test('revoked: newest first, with by, owner and contact', async (t) => {
  const revoked: Revocation[] = [
    { id: 'old', at: iso(NOW - 2 * DAY), by: 'cli:ops@host', owner: null, contact: null },
    { id: 'new', at: iso(NOW - DAY), by: 'PETSTORE_ADMIN_TOKENS#1', owner: 'Payments', contact: '#payments' },
  ];
  t.strictSame(view({ revoked }).revoked, [
    { id: 'new', revokedAt: iso(NOW - DAY), by: 'PETSTORE_ADMIN_TOKENS#1', owner: 'Payments', contact: '#payments' },
    { id: 'old', revokedAt: iso(NOW - 2 * DAY), by: 'cli:ops@host', owner: null, contact: null },
  ]);
});

t.test('whoToTell: by consumer id; a consumer no key names has nobody', async (t) => {
  const v = view({ policyKeys: [fileKey('a', { owner: 'A team', contact: '@a' })], registry: [regKey('b', { contact: 'b@example.com' })] });
  const who = whoToTell(v.keys);
  t.strictSame(who('a'), { owner: 'A team', contact: '@a' });
  t.strictSame(who('b'), { owner: null, contact: 'b@example.com' });
  t.strictSame(who('-'), { owner: null, contact: null });
  t.strictSame(who('_OTHER'), { owner: null, contact: null });
});
