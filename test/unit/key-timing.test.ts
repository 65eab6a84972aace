/**
 * Timing of API key checks (src/policies/auth/keys.ts): rejecting a wrong key must not take longer
 * the more of a real key it shares (no early-exit comparison on the presented text), and a ring of
 * 100,000 keys must answer in about the time a ring of 10 does (a hash lookup, not a scan).
 *
 * Measurements are bounded (rounds x calls), interleaved (every round measures every group, in a
 * rotating order, so drift in machine load hits all groups alike) and summarised by medians. The
 * bands are generous so a loaded 2-core machine does not make the test flaky; a measurement that
 * misses its band is repeated (at most MAX_ATTEMPTS times): a real dependency shows up every time,
 * a burst of load does not.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { KeyRing, hashKey } from '../../src/policies/auth/keys.js';
import { auth } from '../../src/policies/auth/index.js';
import { KEY_ID } from '../../src/policies/auth/facts.js';
import { Chain } from '../helpers/chain.js';
import { LocalReply, type Exchange } from '../../src/core/policy.js';

const ROUNDS = 20;
const CALLS = 2000;
const WARMUP_ROUNDS = 2;
const MAX_ATTEMPTS = 3;
const BAND = { low: 0.75, high: 1.33 };
/** Distinct candidates per group, cycled through, so no one string's quirks decide the result. */
const VARIANTS = 8;

const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** A 43-character key: 32 random bytes in base64url (the body of a `new-key` key). */
function key43(): string {
  const k = randomBytes(32).toString('base64url');
  if (k.length !== 43) throw new Error('unexpected key length');
  return k;
}

/** A random base64url character other than `not`. */
function otherChar(not: string): string {
  for (let i = 0; i < 100; i++) {
    const c = B64URL[randomBytes(1)[0]! & 63]!;
    if (c !== not) return c;
  }
  return not === 'A' ? 'B' : 'A';
}

/** A wrong key of the real key's length sharing exactly `shared` leading characters with it. */
function sharing(real: string, shared: number): string {
  let tail = '';
  for (let i = shared + 1; i < real.length; i++) tail += B64URL[randomBytes(1)[0]! & 63]!;
  return real.slice(0, shared) + otherChar(real[shared]!) + tail;
}

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * Measures `fn` over each group's inputs: ROUNDS rounds (after WARMUP_ROUNDS unrecorded ones), in
 * each round every group once, CALLS calls each, the order rotating per round. Returns the median
 * nanoseconds per call of each group, and how many calls returned something other than `expect`.
 */
function measure<R>(groups: ReadonlyArray<readonly string[]>, fn: (input: string, group: number) => R, expect: (r: R, group: number) => boolean) {
  const samples: number[][] = groups.map(() => []);
  let unexpected = 0;
  for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
    for (let j = 0; j < groups.length; j++) {
      const g = (j + round) % groups.length;
      const inputs = groups[g]!;
      const start = process.hrtime.bigint();
      for (let i = 0; i < CALLS; i++) if (!expect(fn(inputs[i % inputs.length]!, g), g)) unexpected++;
      const ns = Number(process.hrtime.bigint() - start) / CALLS;
      if (round >= WARMUP_ROUNDS) samples[g]!.push(ns);
    }
  }
  return { medians: samples.map(median), unexpected };
}

function within(ratio: number): boolean {
  return ratio >= BAND.low && ratio <= BAND.high;
}

const fmt = (n: number) => n.toFixed(0);

t.test('rejecting a wrong key takes as long whatever part of a real key it shares', async (t) => {
  const real = key43();
  const ring = new KeyRing();
  ring.addPlain('real', real);
  t.equal(ring.size, 1, 'one key in the ring');
  t.equal(ring.identify(real), 'real', 'the real key is accepted (the ring works)');

  const SHARES = [0, 21, 42] as const;
  const groups = SHARES.map((n) => Array.from({ length: VARIANTS }, () => sharing(real, n)));
  for (const [i, n] of SHARES.entries()) {
    for (const c of groups[i]!) {
      if (c.length !== 43 || c === real || c.slice(0, n) !== real.slice(0, n) || c[n] === real[n]) throw new Error('bad candidate');
    }
  }
  t.ok(groups.every((g) => g.every((c) => ring.identify(c) === undefined)), 'every candidate is rejected');

  let last: number[] = [];
  let ratios: number[] = [];
  let attempt = 0;
  let unexpected = 0;
  while (attempt < MAX_ATTEMPTS) {
    attempt++;
    const m = measure(groups, (c) => ring.identify(c), (r) => r === undefined);
    unexpected += m.unexpected;
    last = m.medians;
    ratios = [last[1]! / last[0]!, last[2]! / last[0]!, last[2]! / last[1]!];
    t.comment(
      `attempt ${attempt}: median ns/identify(): shares 0: ${fmt(last[0]!)}, 21: ${fmt(last[1]!)}, 42: ${fmt(last[2]!)}; ` +
        `ratios 21/0 ${ratios[0]!.toFixed(3)}, 42/0 ${ratios[1]!.toFixed(3)}, 42/21 ${ratios[2]!.toFixed(3)}`,
    );
    if (ratios.every(within)) break;
  }
  t.equal(unexpected, 0, 'no candidate was ever accepted while timing');
  t.ok(within(ratios[0]!), `21 shared chars vs 0: ratio ${ratios[0]!.toFixed(3)} within ${BAND.low}..${BAND.high}`);
  t.ok(within(ratios[1]!), `42 shared chars vs 0: ratio ${ratios[1]!.toFixed(3)} within ${BAND.low}..${BAND.high}`);
  t.ok(within(ratios[2]!), `42 shared chars vs 21: ratio ${ratios[2]!.toFixed(3)} within ${BAND.low}..${BAND.high}`);
});

t.test('the auth policy as a whole rejects near misses in the same time as strangers', async (t) => {
  // The whole request phase of `auth`: header parsing, the b64token check, then the ring.
  const real = key43();
  const policy = auth.create(
    { keys: [{ id: 'real', hash: hashKey(real) }], keysFromEnv: null, realm: 'petstore', upstreamAuthorization: 'drop', bruteForce: null, registry: null },
    { env: {} },
  );
  const exchange = (authorization: string) =>
    new Chain([]).open({ method: 'GET', target: '/v1/pets', headers: { authorization } });
  const accepted = exchange(`Bearer ${real}`);
  t.equal(policy.onRequest!(accepted), undefined, 'the real key passes');
  t.equal(accepted.get(KEY_ID), 'real');

  const SHARES = [0, 21, 42] as const;
  const groups = SHARES.map((n) => Array.from({ length: VARIANTS }, () => `Bearer ${sharing(real, n)}`));
  // Exchanges are made once: the measurement is of onRequest, not of object allocation.
  const exchanges = new Map<string, Exchange>();
  for (const g of groups) for (const h of g) exchanges.set(h, exchange(h));

  let ratios: number[] = [];
  let unexpected = 0;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    // auth decides synchronously (a Promise here would be measured as an unexpected answer).
    const m = measure(groups, (h) => policy.onRequest!(exchanges.get(h)!), (d) => !(d instanceof Promise) && !(d instanceof LocalReply) && d?.code === 'invalid_api_key');
    unexpected += m.unexpected;
    const [a, b, c] = m.medians as [number, number, number];
    ratios = [b / a, c / a, c / b];
    t.comment(`attempt ${attempt}: median ns/onRequest: shares 0: ${fmt(a)}, 21: ${fmt(b)}, 42: ${fmt(c)}; ratios ${ratios.map((r) => r.toFixed(3)).join(', ')}`);
    if (ratios.every(within)) break;
  }
  t.equal(unexpected, 0, 'every near miss was answered invalid_api_key');
  t.ok(ratios.every(within), `ratios ${ratios.map((r) => r.toFixed(3)).join(', ')} within ${BAND.low}..${BAND.high}`);
});

t.test('a ring of 100,000 keys answers in about the time a ring of 10 does (O(1))', async (t) => {
  const BIG = 100_000;
  const real = key43();
  const small = new KeyRing();
  const big = new KeyRing();
  for (const ring of [small, big]) ring.addPlain('real', real);
  for (let i = 0; i < 9; i++) small.add(`k${i}`, 'sha256:' + randomBytes(32).toString('hex'));
  // Random digests stand in for hashed keys: the ring only ever sees digests.
  for (let i = 0; i < BIG - 1; i++) big.add(`k${i}`, 'sha256:' + randomBytes(32).toString('hex'));
  t.equal(small.size, 10, 'the small ring holds 10 keys');
  t.equal(big.size, BIG, 'the big ring holds 100,000 keys');
  t.equal(big.identify(real), 'real', 'the big ring finds the real key');

  const misses = Array.from({ length: VARIANTS }, () => key43());
  const hits = [real];
  // Four groups, interleaved: misses and hits, on each ring.
  const rings = [small, big, small, big];
  const inputs = [misses, misses, hits, hits];
  let ratios: number[] = [];
  let unexpected = 0;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const m = measure(
      inputs,
      (k, g) => rings[g]!.identify(k),
      (r, g) => (g < 2 ? r === undefined : r === 'real'),
    );
    unexpected += m.unexpected;
    const [smallMiss, bigMiss, smallHit, bigHit] = m.medians as [number, number, number, number];
    ratios = [bigMiss / smallMiss, bigHit / smallHit];
    t.comment(
      `attempt ${attempt}: median ns/identify(): miss ${fmt(smallMiss)} (10 keys) vs ${fmt(bigMiss)} (100,000 keys); ` +
        `hit ${fmt(smallHit)} vs ${fmt(bigHit)}; ratios ${ratios.map((r) => r.toFixed(3)).join(', ')}`,
    );
    if (ratios.every((r) => r < 3)) break;
  }
  t.equal(unexpected, 0, 'misses were rejected and hits found throughout');
  t.ok(ratios[0]! < 3, `a miss on 100,000 keys costs ${ratios[0]!.toFixed(2)}x a miss on 10 (< 3)`);
  t.ok(ratios[1]! < 3, `a hit on 100,000 keys costs ${ratios[1]!.toFixed(2)}x a hit on 10 (< 3)`);
});
