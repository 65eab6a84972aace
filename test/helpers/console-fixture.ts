/**
 * A fake ConsoleData (src/ops/console/types.ts) with realistic numbers, for the console page's
 * browser test: three operations of the pet store (getPet deprecated, sunset 2030-12-05), a dozen
 * consumers with owners and contacts (two of them hostile text an operator could have typed:
 * the page must show it, never run it), a burn-down over 120 days with consumers that stopped,
 * contract violations with samples, keys (12 by default, any number with `keys`), a fleet of three
 * instances one of which runs another policy and one gone stale, and a migration lane.
 *
 * Deterministic for a given `nowMs` (a seeded generator, no Math.random), so a test compares what
 * the page shows with `views` exactly. `calls` records every call the routes made.
 */
import type { BurndownView, ConsoleData, FleetView, KeysView, MigrationView, TrafficRow, TrafficView, ViolationsView } from '../../src/ops/console/types.js';

export interface ConsoleFixtureOptions {
  /** Keys in the keys view (default 12: the named consumers, then generated ones). */
  readonly keys?: number;
  /** "Now" (epoch ms); default: the current minute. */
  readonly nowMs?: number;
}

export interface ConsoleFixture {
  readonly data: ConsoleData;
  /** What each endpoint answers (keys: with the default query; `keysFor` for another). */
  readonly views: {
    readonly traffic: { readonly hour: TrafficView; readonly day: TrafficView };
    readonly deprecations: BurndownView;
    readonly violations: ViolationsView;
    readonly keys: KeysView;
    readonly fleet: FleetView;
    readonly migration: MigrationView;
  };
  keysFor(query: { unusedDays?: number; expiringDays?: number }): KeysView;
  readonly calls: Array<{ readonly view: string; readonly args: unknown[] }>;
}

/** The consumers that call: id, owner, contact (null where the key names none). */
export const FIXTURE_CONSUMERS: ReadonlyArray<readonly [string, string | null, string | null]> = [
  ['mobile-app', 'Mobile team', 'mobile@example.com'],
  ['partner-acme', 'ACME Corp (partner)', 'api@acme.example'],
  ['web-frontend', 'Web team', '#web-oncall'],
  ['inventory-sync', 'Stores IT', 'stores-it@example.com'],
  ['legacy-batch', null, null],
  ['reporting', 'Data <b>platform</b>', 'data@example.com'],
  ['partner-globex', '<img src=x onerror="window.__pwned=1">', '"><script>window.__pwned=2</script>'],
  ['kiosk', 'Retail ops', 'retail@example.com'],
  ['search-indexer', 'Search team', null],
  ['qa-bot', 'QA', 'qa@example.com'],
];

const DAY_MS = 86_400_000;
const SUNSET = '2030-12-05T00:00:00Z';
const OPERATIONS = ['listPets', 'getPet', 'createPet'] as const;

/** mulberry32: a small seeded generator. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const iso = (ms: number) => new Date(ms).toISOString();
const dayOf = (ms: number) => iso(ms).slice(0, 10);

function row(rand: () => number, scale: number): TrafficRow {
  const requests = Math.round(scale * (0.5 + rand()));
  const client = Math.round(requests * 0.04 * rand());
  const gateway = Math.round(requests * 0.002 * rand());
  const upstream = Math.round(requests * 0.01 * rand());
  const rateLimited = Math.round(requests * 0.01 * rand());
  const buckets = [2, 3, 5, 7.5, 10, 15, 20, 30];
  const p50 = requests === 0 ? null : (buckets[Math.floor(rand() * 3)] ?? 5);
  const p99 = requests === 0 ? null : [50, 75, 100, 150, 300][Math.floor(rand() * 5)]!;
  return { requests, p50Ms: p50, p99Ms: p99, errors: { client, gateway, upstream }, rateLimited, aborted: Math.round(rand() * 3) };
}

/** `total` spread over `points` (summing to it), heavier around `spike` (an incident). */
function spread(total: number, points: number, rand: () => number, spike: number): number[] {
  const weights = Array.from({ length: points }, (_, i) => (0.6 + 0.8 * rand()) * (Math.abs(i - spike) <= 1 ? 4 : 1));
  const sum = weights.reduce((a, b) => a + b, 0);
  const out = weights.map((w) => Math.floor((total * w) / sum));
  let rest = total - out.reduce((a, b) => a + b, 0);
  for (let i = 0; rest > 0; i = (i + 7) % points, rest--) out[i]!++;
  return out;
}

function traffic(nowMs: number, window: 'hour' | 'day', rand: () => number, who: ReadonlyMap<string, readonly [string | null, string | null]>): TrafficView {
  const stepSeconds = window === 'hour' ? 60 : 3600;
  const points = window === 'hour' ? 60 : 24;
  const scale = window === 'hour' ? 1 : 24;
  const end = Math.floor(nowMs / (stepSeconds * 1000)) * stepSeconds;
  const t = Array.from({ length: points }, (_, i) => end - (points - 1 - i) * stepSeconds);
  const weights: Record<string, number> = { listPets: 600, getPet: 250, createPet: 40, '-': 8 };
  const operations = Object.entries(weights).map(([operation, w]) => ({ operation, ...row(rand, w * scale) })).sort((a, b) => b.requests - a.requests);
  const ids = [...who.keys(), '-'];
  const consumers = ids.map((consumer, i) => ({ consumer, ...(who.get(consumer) ? { owner: who.get(consumer)![0], contact: who.get(consumer)![1] } : { owner: null, contact: null }), ...row(rand, (300 * scale) / (i + 1)) }));
  consumers.sort((a, b) => b.requests - a.requests);
  const cells = OPERATIONS.flatMap((operation) => ids.slice(0, 4).map((consumer) => ({ operation, consumer, ...row(rand, 40 * scale) }))).sort((a, b) => b.requests - a.requests);
  const series = {
    t,
    operations: operations.map((o) => ({
      operation: o.operation,
      requests: spread(o.requests, points, rand, points - 8),
      errors: spread(o.errors.client + o.errors.gateway + o.errors.upstream, points, rand, points - 8),
    })),
  };
  return { generatedAt: iso(nowMs), scope: 'fleet', window, from: iso((end - (points - 1) * stepSeconds) * 1000), to: iso(nowMs), stepSeconds, operations, consumers, cells, series };
}

function burndown(nowMs: number, rand: () => number, who: ReadonlyMap<string, readonly [string | null, string | null]>): BurndownView {
  const today = Math.floor(nowMs / DAY_MS) * DAY_MS;
  const n = 120;
  const days = Array.from({ length: n }, (_, i) => dayOf(today - (n - 1 - i) * DAY_MS));
  // Each caller tails off at its own pace; the last two stopped weeks ago.
  const callers = ['mobile-app', 'partner-acme', 'legacy-batch', 'partner-globex', 'reporting', 'kiosk', 'qa-bot'];
  const consumers = callers.map((consumer, k) => {
    const stopAt = k >= 5 ? n - 20 - k * 5 : n;
    const base = 900 / (k + 1);
    const daily = days.map((_, i) => (i >= stopAt ? 0 : Math.max(0, Math.round(base * (1 - i / (n * 1.4)) * (0.7 + 0.6 * rand())))));
    const first = daily.findIndex((c) => c > 0);
    const last = daily.length - 1 - [...daily].reverse().findIndex((c) => c > 0);
    const [owner, contact] = who.get(consumer) ?? [null, null];
    return {
      consumer,
      owner,
      contact,
      calls: daily.reduce((a, b) => a + b, 0),
      firstSeen: iso(today - (n - 1 - first) * DAY_MS + 3_600_000 * (k + 1)),
      lastSeen: iso(today - (n - 1 - last) * DAY_MS + 3_600_000 * (k + 2)),
      stopped: stopAt < n,
      daily,
    };
  });
  consumers.sort((a, b) => b.calls - a.calls);
  const total = days.map((_, i) => consumers.reduce((a, c) => a + (c.daily[i] ?? 0), 0));
  return { generatedAt: iso(nowMs), scope: 'fleet', stoppedAfterDays: 14, operations: [{ operation: 'getPet', sunset: SUNSET, days, total, consumers }] };
}

function violations(nowMs: number): ViolationsView {
  const rules = [
    { operation: 'listPets', field: '/*/id', kind: 'must be integer', count: 412, lastSeen: iso(nowMs - 40_000) },
    { operation: 'getPet', field: '/', kind: "must have required property 'name'", count: 57, lastSeen: iso(nowMs - 3_600_000) },
    { operation: 'listPets', field: '(status)', kind: 'status 500 where the interface says 200', count: 12, lastSeen: iso(nowMs - 7_200_000) },
    { operation: 'createPet', field: '(content-type)', kind: 'text/html where the interface says application/json', count: 3, lastSeen: iso(nowMs - 86_000_000) },
  ];
  const samples = [0, 1, 2, 3, 4].map((i) => ({
    at: iso(nowMs - 40_000 - i * 600_000),
    operation: i === 3 ? 'getPet' : 'listPets',
    requestId: `req-${(0x5f3a9c + i * 7919).toString(16)}`,
    status: i === 4 ? 500 : 200,
    problems: i === 3 ? ["/ must have required property 'name'"] : i === 4 ? ['(status) status 500 where the interface says 200'] : ['/0/id must be integer', '/3/id must be integer', '/<b>7</b>/id must be integer'],
  }));
  return { generatedAt: iso(nowMs), scope: 'fleet', total: rules.reduce((a, r) => a + r.count, 0), rules, samples };
}

type KeyRow = KeysView['keys'][number];

function keyRows(nowMs: number, count: number, rand: () => number): Array<Omit<KeyRow, 'expiringSoon' | 'expired' | 'unused'>> {
  const sources = ['registry', 'file', 'env'] as const;
  return Array.from({ length: count }, (_, i) => {
    const named = FIXTURE_CONSUMERS[i];
    const id = named?.[0] ?? `svc-${String(i).padStart(4, '0')}`;
    const r = rand();
    const expires = r < 0.3 ? null : iso(nowMs + Math.round((rand() * 120 - 10) * DAY_MS));
    const lastUsed = rand() < 0.15 ? null : iso(nowMs - Math.round(rand() * rand() * 90 * DAY_MS));
    return {
      id,
      source: sources[i % 3]!,
      owner: named ? named[1] : i % 5 === 0 ? null : `Team ${String.fromCharCode(65 + (i % 26))}`,
      contact: named ? named[2] : i % 7 === 0 ? null : `team-${i % 26}@example.com`,
      expires,
      overlapUntil: i % 11 === 3 ? iso(nowMs + 3 * 3_600_000) : null,
      lastUsed,
    };
  }).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

function keysView(nowMs: number, rows: ReturnType<typeof keyRows>, query: { unusedDays?: number; expiringDays?: number }): KeysView {
  const unusedDays = query.unusedDays ?? 30;
  const expiringDays = query.expiringDays ?? 14;
  const keys = rows.map((k) => {
    const exp = k.expires === null ? null : Date.parse(k.expires);
    const expired = exp !== null && exp <= nowMs;
    return {
      ...k,
      expiringSoon: exp !== null && !expired && exp - nowMs <= expiringDays * DAY_MS,
      expired,
      unused: k.lastUsed === null || nowMs - Date.parse(k.lastUsed) > unusedDays * DAY_MS,
    };
  });
  const revoked = [
    { id: 'old-partner', owner: 'Initech', contact: 'ops@initech.example', revokedAt: iso(nowMs - 2 * DAY_MS), by: 'PETSTORE_ADMIN_TOKENS#1' },
    { id: 'leaked-ci-key', owner: null, contact: null, revokedAt: iso(nowMs - 9 * DAY_MS), by: null },
  ];
  return { generatedAt: iso(nowMs), scope: 'fleet', unusedDays, expiringDays, keys, revoked };
}

function fleet(nowMs: number): FleetView {
  const base = { version: '0.1.0', reason: null, workers: 2 };
  const instances = [
    { ...base, id: 'gw-a:4121:x7f2', host: 'gw-a', pid: 4121, policyFingerprint: '9f2c4e1ab37d5c08', policyDiffers: false, ready: true, startedAt: iso(nowMs - 5 * DAY_MS), lastReload: iso(nowMs - 3_600_000), lastHeartbeat: iso(nowMs - 2_000), stale: false, self: true },
    { ...base, id: 'gw-b:977:k2m9', host: 'gw-b', pid: 977, policyFingerprint: '9f2c4e1ab37d5c08', policyDiffers: false, ready: true, startedAt: iso(nowMs - 5 * DAY_MS), lastReload: null, lastHeartbeat: iso(nowMs - 4_000), stale: false, self: false },
    { ...base, id: 'gw-c:55:q0p1', host: 'gw-c', pid: 55, version: '0.0.9', policyFingerprint: '03d1b9e77a6c4f21', policyDiffers: true, ready: false, reason: 'upstream unreachable', startedAt: iso(nowMs - DAY_MS), lastReload: iso(nowMs - 7_200_000), lastHeartbeat: iso(nowMs - 95_000), stale: true, self: false, workers: 1 },
  ];
  return { generatedAt: iso(nowMs), scope: 'fleet', majorityFingerprint: '9f2c4e1ab37d5c08', instances };
}

function migration(nowMs: number): MigrationView {
  return {
    generatedAt: iso(nowMs),
    scope: 'fleet',
    enabled: true,
    operations: [
      { operation: 'listPets', compared: 18_234, equal: 18_190, different: 44, divergence: 44 / 18_234, fallbacks: 3, nextViolations: 9 },
      { operation: 'getPet', compared: 7_021, equal: 7_021, different: 0, divergence: 0, fallbacks: 0, nextViolations: 0 },
      { operation: 'createPet', compared: 0, equal: 0, different: 0, divergence: null, fallbacks: 0, nextViolations: 0 },
    ],
  };
}

/**
 * The fake data and the views it answers.
 *
 * @example
 *   const fx = consoleFixture({ keys: 1000 });
 *   const admin = await startAdmin({ ..., routes: consoleRoutes({ data: fx.data }) });
 */
export function consoleFixture(options: ConsoleFixtureOptions = {}): ConsoleFixture {
  const nowMs = options.nowMs ?? Math.floor(Date.now() / 60_000) * 60_000;
  const rand = seeded(43);
  const who = new Map(FIXTURE_CONSUMERS.map(([id, owner, contact]) => [id, [owner, contact] as const]));
  const rows = keyRows(nowMs, options.keys ?? 12, rand);
  const views = {
    traffic: { hour: traffic(nowMs, 'hour', rand, who), day: traffic(nowMs, 'day', rand, who) },
    deprecations: burndown(nowMs, rand, who),
    violations: violations(nowMs),
    keys: keysView(nowMs, rows, {}),
    fleet: fleet(nowMs),
    migration: migration(nowMs),
  };
  const calls: Array<{ view: string; args: unknown[] }> = [];
  const instance = <T extends object>(v: T, scope: unknown): T => (scope === 'instance' ? { ...v, scope: 'instance' } : v);
  const data: ConsoleData = {
    traffic: (window, scope) => (calls.push({ view: 'traffic', args: [window, scope] }), Promise.resolve(instance(views.traffic[window], scope))),
    deprecations: (scope) => (calls.push({ view: 'deprecations', args: [scope] }), Promise.resolve(instance(views.deprecations, scope))),
    violations: (scope) => (calls.push({ view: 'violations', args: [scope] }), Promise.resolve(instance(views.violations, scope))),
    keys: (query) => (calls.push({ view: 'keys', args: [query] }), Promise.resolve(keysView(nowMs, rows, query))),
    fleet: () => (calls.push({ view: 'fleet', args: [] }), Promise.resolve(views.fleet)),
    migration: () => (calls.push({ view: 'migration', args: [] }), Promise.resolve(views.migration)),
  };
  return { data, views, keysFor: (q) => keysView(nowMs, rows, q), calls };
}
