/**
 * The operator console attacked without sockets: what a hostile upstream, a stepping clock, a
 * flood or an operator's hostile text can do to the recorder (src/ops/console/series.ts), the
 * violation book (violations.ts) and the keys' owner and contact checks (src/core/key-owner.ts).
 */
import t from 'tap';
import { record } from '../helpers/record.js';
import { DeclaredFacts, NO_FACTS, slot } from '../../src/core/facts.js';
import type { ExchangeRecord } from '../../src/core/record.js';
import { contactProblem, ownerProblem, SECRET_EXPECTS } from '../../src/core/key-owner.js';
import { ConsoleRecorder, VIOLATION_FIELD } from '../../src/ops/console/series.js';
import { HOUR_MS, MINUTE_MS } from '../../src/ops/console/slots.js';
import { COUNTERS, HOURS_KEPT, MINUTES_KEPT, NOBODY, type ConsoleSnapshot } from '../../src/ops/console/types.js';
import { MAX_RULES, MAX_SAMPLES } from '../../src/ops/console/violations.js';
import { violationText } from '../../src/policies/response-contract/facts.js';

/** 2026-11-23 10:00:00 UTC: a whole hour. */
const T0 = Date.parse('2026-11-23T10:00:00.000Z');
const REQUESTS = COUNTERS.indexOf('requests');

const at = (ms: number, over: Partial<ExchangeRecord> = {}): ExchangeRecord => record({ startedAt: ms, facts: NO_FACTS, ...over });

const VIOLATION = slot<string>('contractViolation');
const FIELDS = Object.freeze([{ name: VIOLATION_FIELD, slot: VIOLATION }]);
function violating(ms: number, text: string, over: Partial<ExchangeRecord> = {}): ExchangeRecord {
  const facts = new DeclaredFacts(FIELDS);
  facts.set(VIOLATION, text);
  return record({ startedAt: ms, status: 502, errorCode: 'upstream_contract_violation', upstreamStatus: 200, facts, ...over });
}

function requestsIn(snap: ConsoleSnapshot, kind: 'minutes' | 'hours'): number {
  let n = 0;
  for (const c of snap.cells) for (const [, v] of c[kind]) n += v[REQUESTS] ?? 0;
  return n;
}

t.test('a clock stepped back does not stop the counting (the slots it left ahead are taken back)', async (t) => {
  // The wall clock ran a day ahead for an hour (a VM without its RTC, a wrong NTP source), then was put right.
  let now = T0 + 24 * HOUR_MS;
  for (const trackDelta of [false, true]) {
    const rec = new ConsoleRecorder({ deprecatedOperations: () => new Set(), trackDelta, now: () => now });
    for (let m = 0; m < 60; m++) rec.onEnd(at(T0 + 24 * HOUR_MS + m * MINUTE_MS));
    rec.takeDelta();
    // Put right: requests every minute of the next hour, at the true time.
    for (let m = 0; m < 60; m++) rec.onEnd(at(T0 + m * MINUTE_MS + 1000));
    now = T0 + 59 * MINUTE_MS + 30_000;
    const snap = rec.snapshot(now);
    t.equal(requestsIn(snap, 'minutes'), 60, `trackDelta ${trackDelta}: the hour after the step is counted in the minute slots`);
    t.equal(requestsIn(snap, 'hours'), 60, `trackDelta ${trackDelta}: and in the hour slots`);
    if (trackDelta) {
      const delta = rec.takeDelta(now);
      let n = 0;
      for (const c of delta?.cells ?? []) for (const [start, v] of c.minutes) if (start <= now) n += v[REQUESTS] ?? 0;
      t.equal(n, 60, 'the delta sent to Redis holds them too');
    }
    now = T0 + 24 * HOUR_MS;
  }
  // A request that really started 61 minutes ago (a long one) still falls out of the minute window.
  const rec = new ConsoleRecorder({ deprecatedOperations: () => new Set(), now: () => T0 + 61 * MINUTE_MS });
  rec.onEnd(at(T0 + 61 * MINUTE_MS));
  rec.onEnd(at(T0 + MINUTE_MS, { durationMs: 60 * MINUTE_MS }));
  t.equal(requestsIn(rec.snapshot(), 'minutes'), 1, 'a slot a whole window old is still not counted');
});

t.test('violations from a hostile upstream: bounded rules, bounded and clean samples, no \\x1f', async (t) => {
  const rec = new ConsoleRecorder({ deprecatedOperations: () => new Set() });
  // unknownFields: refuse names the upstream's member names; the scanner decodes JSON escapes.
  const names = ['<img src=x onerror=alert(1)>', 'a\u202egnp.exe', 'bell\u0007\u001b[31mred', 'sep\u001fkind', 'nl\nnext', 'x'.repeat(64)];
  for (let i = 0; i < 1000; i++) rec.onEnd(violating(T0 + i, violationText([`unknown field '${names[i % names.length]}${i}'`])));
  // What response-contract never writes, but a field by that name could carry: a long text.
  rec.onEnd(violating(T0 + 2000, `${'/'.repeat(1)}a ${'y'.repeat(5000)}; ${'z'.repeat(5000)}; 3; 4; 5; 6; 7`, { requestId: 'long' }));
  const snap = rec.snapshot(T0 + 3000);
  const rules = snap.violations.filter((v) => v.operation === 'listPets');
  t.ok(rules.length <= MAX_RULES + 1, `at most ${MAX_RULES} + 1 rules (${rules.length})`);
  t.ok(snap.samples.length <= MAX_SAMPLES, 'at most 50 samples');
  const long = snap.samples.find((s) => s.requestId === 'long');
  t.ok(long !== undefined && long.problems.length <= 5, 'at most 5 problems a sample');
  t.strictSame(snap.samples.flatMap((s) => s.problems).filter((p) => p.length > 200).map((p) => p.length), [], 'no sample problem over 200 characters');
  t.strictSame(rules.filter((r) => r.field.length + r.kind.length > 201), [], 'no rule over 200 characters');
  // Control characters and bidi overrides would reorder or hide text on the operator's page, and
  // \x1f splits the rule's key in Redis (<operation>\x1f<field>\x1f<kind>).
  const hidden = /[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]/;
  t.strictSame(rules.filter((r) => hidden.test(r.kind) || hidden.test(r.field)).map((r) => r.kind), [], 'no rule with a hidden character');
  t.strictSame(snap.samples.flatMap((s) => s.problems).filter((p) => hidden.test(p)), [], 'no sample problem with a hidden character');
  t.ok(
    rules.some((r) => r.kind.includes('<img src=x onerror=alert(1)>')),
    'markup stays text (the page escapes it)',
  );
});

t.test('a flood of requests keeps the recorder within its bounds', async (t) => {
  let now = T0;
  const rec = new ConsoleRecorder({ deprecatedOperations: () => new Set(['getPet']), trackDelta: true, maxConsumers: 50, now: () => now });
  const ops = ['listPets', 'getPet', 'createPet', undefined];
  // Three days of requests, from 200 consumer ids (past maxConsumers: _OTHER), with a take every 10 minutes.
  let i = 0;
  for (let m = 0; m < 3 * 24 * 60; m += 1) {
    now = T0 + m * MINUTE_MS;
    for (let k = 0; k < 7; k++, i++) rec.onEnd(at(now + k, { consumer: i % 11 === 0 ? undefined : `c${i % 200}`, operation: ops[i % 4], durationMs: i % 13 }));
    if (m % 10 === 0) rec.takeDelta(now);
    if (m % 60 === 0) rec.snapshot(now);
  }
  const snap = rec.snapshot(now);
  const consumers = new Set(snap.cells.map((c) => c.consumer));
  t.ok(consumers.size <= 52, `consumers bounded: ${consumers.size} (50, _OTHER and -)`);
  t.ok(consumers.has(NOBODY), 'requests without a key count under -');
  const cells = snap.cells.length;
  t.ok(cells <= 52 * 4, `cells bounded: ${cells}`);
  t.ok(rec.rowsInUse <= cells * (MINUTES_KEPT + HOURS_KEPT) * 2, `rows bounded: ${rec.rowsInUse}`);
  for (const d of snap.daily) t.ok(d.days.length <= 400, 'days bounded');
});

t.test('owner and contact: hostile text is refused or stays text; credentials in a URL are refused', async (t) => {
  for (const bad of ['javascript:alert(1)', 'JAVASCRIPT:alert(1)', 'data:text/html,<script>alert(1)</script>', 'https://u:p@example.com/', 'https://example.com/\u0000', 'https://example.com/ x', 'vbscript:x']) {
    t.not(contactProblem(bad), undefined, `contact ${JSON.stringify(bad)} refused`);
  }
  // Query parameters and fragments that carry credentials, as services name them.
  for (const bad of [
    'https://example.com/?api-key=0123',
    'https://example.com/?x-api-key=0123',
    'https://example.com/?x_api_key=0123',
    'https://example.com/?private_token=0123',
    'https://example.com/?X-Amz-Signature=0123',
    'https://example.com/?X-Goog-Credential=0123',
    'https://example.com/?refresh_token=0123',
    'https://example.com/#access_token=0123',
    'https://example.com/#id_token=0123&state=1',
    'https://example.com/?sessionid=0123',
  ]) {
    t.equal(contactProblem(bad), SECRET_EXPECTS, `contact ${bad} refused as a secret`);
  }
  for (const good of ['https://wiki.example.com/teams/payments?tab=contacts', 'https://example.com/#on-call', 'https://chat.example.com/channel/payments-oncall?keyword=api', 'https://example.com/?monkey=1', 'mailto:team@example.com']) {
    t.equal(contactProblem(good), undefined, `contact ${good} accepted`);
  }
  for (const bad of ['a\u202eb', 'x\u0000', '\u200binvisible', 'psgk_AbCdEf0123456789AbCd']) t.not(ownerProblem(bad), undefined, `owner ${JSON.stringify(bad)} refused`);
});

t.test('a clock stepped back by more than the days kept does not stop the burn-down', async (t) => {
  const DAY = 86_400_000;
  let now = T0 + 500 * DAY;
  for (const trackDelta of [false, true]) {
    const rec = new ConsoleRecorder({ deprecatedOperations: () => new Set(['getPet']), trackDelta, now: () => now });
    rec.onEnd(at(T0 + 500 * DAY, { operation: 'getPet' }));
    rec.takeDelta(now);
    now = T0 + DAY;
    rec.onEnd(at(T0, { operation: 'getPet' }));
    rec.onEnd(at(T0 + DAY, { operation: 'getPet' }));
    rec.onEnd(at(T0 + DAY + 1, { operation: 'getPet' }));
    const days = rec.snapshot(now).daily.find((d) => d.consumer === 'team-a')?.days ?? [];
    t.strictSame(days, [
      [T0 - (T0 % DAY), 1],
      [T0 - (T0 % DAY) + DAY, 2],
    ], `trackDelta ${trackDelta}: the days after the step are counted`);
    if (trackDelta) t.strictSame(rec.takeDelta(now)?.daily[0]?.days.filter(([d]) => d <= now), days, 'and sent to Redis');
    now = T0 + 500 * DAY;
  }
});

t.test('an unknown field named like a secret is not shown (a legacy upstream keying a map by tokens)', async (t) => {
  const rec = new ConsoleRecorder({ deprecatedOperations: () => new Set() });
  const secrets = ['ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8', 'psgk_9fK2mQ7xLp3RtV8wZ1bN5cH6', 'sk_live_4eC39HqLyjWDarjtT1zdp7dc'];
  for (const [i, s] of secrets.entries()) rec.onEnd(violating(T0 + i, violationText([`unknown field '${s}'`, "unknown field 'internalNote'"]), { requestId: `r${i}` }));
  const snap = rec.snapshot(T0 + 10);
  const shown = JSON.stringify(snap);
  for (const s of secrets) t.notMatch(shown, s.slice(0, 12), `${s.slice(0, 8)}...: not in the rules or samples`);
  t.match(shown, "unknown field 'internalNote'", 'a plain name is shown');
  t.equal(snap.violations.filter((v) => v.kind.includes('redacted')).length, 1, 'the redacted names are one rule');
});
