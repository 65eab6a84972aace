/**
 * The console's views (the JSON of `/console/api/traffic`, `deprecations` and `violations`), made
 * from a ConsoleSnapshot: this process's recorder or the fleet's, merged. Pure functions: the
 * time, the scope and who to tell about a consumer are handed in.
 *
 * A snapshot may name one cell, one day or one rule more than once (several processes' snapshots
 * put together): the views add them up.
 */
import type { DeprecatedOperation } from '../deprecations.js';
import type { DeprecationUse } from '../../stores/types.js';
import {
  COUNTERS,
  DAYS_KEPT,
  LATENCY_BOUNDS_MS,
  MINUTES_KEPT,
  HOURS_KEPT,
  SLOT_WIDTH,
  type BurndownView,
  type ConsoleSnapshot,
  type TrafficRow,
  type TrafficView,
  type ViewBase,
  type ViolationsView,
  type WhoToTell,
} from './types.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from './slots.js';

/** Who is asking for the view, as its endpoint knows it. */
export interface ViewScope {
  readonly now: number;
  readonly scope: ViewBase['scope'];
  /** Why the view is the instance's although Redis is configured. */
  readonly degraded?: string | undefined;
}

function base(o: ViewScope): ViewBase {
  return o.degraded === undefined ? { generatedAt: iso(o.now), scope: o.scope } : { generatedAt: iso(o.now), scope: o.scope, degraded: o.degraded };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** YYYY-MM-DD of a UTC day's start. */
function dayName(dayMs: number): string {
  return iso(dayMs).slice(0, 10);
}

function byName(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The latency under which a share `q` of the histogram's requests fell: the upper bound of the
 * bucket holding rank ceil(q * n) (as Prometheus' histogram_quantile reads `le` buckets, with no
 * interpolation); a rank in the last bucket reads as the last bound. null with no request.
 * `histogram`: the LATENCY_BOUNDS_MS.length + 1 bucket counts.
 */
export function quantileMs(histogram: readonly number[], q: number): number | null {
  let n = 0;
  for (const c of histogram) n += c;
  if (n === 0) return null;
  const rank = Math.max(1, Math.ceil(q * n));
  let seen = 0;
  for (let i = 0; i < histogram.length; i++) {
    seen += histogram[i]!;
    if (seen >= rank) return LATENCY_BOUNDS_MS[Math.min(i, LATENCY_BOUNDS_MS.length - 1)]!;
  }
  return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]!;
}

const HISTOGRAM = COUNTERS.length;

function addInto(total: number[], values: readonly number[]): void {
  for (let i = 0; i < SLOT_WIDTH; i++) total[i] = total[i]! + (values[i] ?? 0);
}

function trafficRow(v: readonly number[]): TrafficRow {
  const histogram = v.slice(HISTOGRAM);
  return {
    requests: v[0]!,
    p50Ms: quantileMs(histogram, 0.5),
    p99Ms: quantileMs(histogram, 0.99),
    errors: { client: v[1]!, gateway: v[2]!, upstream: v[3]! },
    rateLimited: v[4]!,
    aborted: v[5]!,
  };
}

/** The totals of `key` in `map`, made (zeros) when new. */
function totalOf<K>(map: Map<K, number[]>, key: K): number[] {
  let t = map.get(key);
  if (t === undefined) map.set(key, (t = new Array<number>(SLOT_WIDTH).fill(0)));
  return t;
}

export interface TrafficOptions extends ViewScope {
  /** Owner and contact of a consumer (its key's); null fields when it has none. */
  readonly who: (consumer: string) => WhoToTell;
}

/**
 * Requests, latency and errors per operation, consumer and both, over the last hour (the last 60
 * minute slots, now's included) or day (the last 24 hour slots), and the chart's series: a point
 * per slot, zeros where nothing was counted.
 */
export function trafficView(snap: ConsoleSnapshot, window: 'hour' | 'day', o: TrafficOptions): TrafficView {
  const stepMs = window === 'hour' ? MINUTE_MS : HOUR_MS;
  const points = window === 'hour' ? MINUTES_KEPT : HOURS_KEPT;
  const last = Math.floor(o.now / stepMs);
  const first = last - points + 1;
  const t: number[] = [];
  for (let n = first; n <= last; n++) t.push((n * stepMs) / 1000);
  const byOperation = new Map<string, number[]>();
  const byConsumer = new Map<string, number[]>();
  const byCell = new Map<string, Map<string, number[]>>();
  const series = new Map<string, { requests: number[]; errors: number[] }>();
  for (const cell of snap.cells) {
    for (const [start, values] of window === 'hour' ? cell.minutes : cell.hours) {
      const n = Math.floor(start / stepMs);
      if (n < first || n > last) continue;
      addInto(totalOf(byOperation, cell.operation), values);
      addInto(totalOf(byConsumer, cell.consumer), values);
      let consumers = byCell.get(cell.operation);
      if (consumers === undefined) byCell.set(cell.operation, (consumers = new Map()));
      addInto(totalOf(consumers, cell.consumer), values);
      let s = series.get(cell.operation);
      if (s === undefined) series.set(cell.operation, (s = { requests: new Array<number>(points).fill(0), errors: new Array<number>(points).fill(0) }));
      s.requests[n - first]! += values[0] ?? 0;
      s.errors[n - first]! += (values[1] ?? 0) + (values[2] ?? 0) + (values[3] ?? 0);
    }
  }
  const operations = [...byOperation]
    .filter(([, v]) => v[0]! > 0)
    .map(([operation, v]) => ({ operation, ...trafficRow(v) }))
    .sort((a, b) => b.requests - a.requests || byName(a.operation, b.operation));
  const consumers = [...byConsumer]
    .filter(([, v]) => v[0]! > 0)
    .map(([consumer, v]) => ({ consumer, ...o.who(consumer), ...trafficRow(v) }))
    .sort((a, b) => b.requests - a.requests || byName(a.consumer, b.consumer));
  const cells: Array<TrafficRow & { operation: string; consumer: string }> = [];
  for (const [operation, m] of byCell) for (const [consumer, v] of m) if (v[0]! > 0) cells.push({ operation, consumer, ...trafficRow(v) });
  cells.sort((a, b) => b.requests - a.requests || byName(a.operation, b.operation) || byName(a.consumer, b.consumer));
  return {
    ...base(o),
    window,
    from: iso(first * stepMs),
    to: iso(o.now),
    stepSeconds: stepMs / 1000,
    operations,
    consumers,
    cells,
    series: { t, operations: operations.map((r) => ({ operation: r.operation, ...series.get(r.operation)! })) },
  };
}

export interface BurndownOptions extends ViewScope {
  /** The deprecated operations and their sunsets (src/ops/deprecations.ts), in the view's order. */
  readonly deprecated: readonly DeprecatedOperation[];
  /** The deprecation ledger's rows: each consumer's exact first and last call. */
  readonly uses: readonly DeprecationUse[];
  readonly who: (consumer: string) => WhoToTell;
  /** A consumer with no call for this many days is `stopped`. Default 7. */
  readonly stoppedAfterDays?: number;
}

type BurndownConsumer = BurndownView['operations'][number]['consumers'][number];

/**
 * Calls of each deprecated operation per consumer and UTC day, from the first day with a call
 * (within DAYS_KEPT) to today; each consumer of the ledger (and any the daily counts know the
 * ledger does not list yet: its first and last day with a call stand for its first and last
 * call) with its daily calls, most calls first.
 */
export function burndownView(snap: ConsoleSnapshot, o: BurndownOptions): BurndownView {
  const stoppedAfterDays = o.stoppedAfterDays ?? 7;
  const today = Math.floor(o.now / DAY_MS);
  const oldest = today - DAYS_KEPT + 1;
  return {
    ...base(o),
    stoppedAfterDays,
    operations: o.deprecated.map((d) => {
      // Day numbers (days since 1970) to calls, per consumer.
      const perConsumer = new Map<string, Map<number, number>>();
      let first = Infinity;
      for (const entry of snap.daily) {
        if (entry.operation !== d.operation) continue;
        let counts = perConsumer.get(entry.consumer);
        if (counts === undefined) perConsumer.set(entry.consumer, (counts = new Map()));
        for (const [dayMs, count] of entry.days) {
          const day = Math.floor(dayMs / DAY_MS);
          if (day < oldest || day > today || count <= 0) continue;
          counts.set(day, (counts.get(day) ?? 0) + count);
          if (day < first) first = day;
        }
      }
      const days: string[] = [];
      const width = first === Infinity ? 0 : today - first + 1;
      for (let i = 0; i < width; i++) days.push(dayName((first + i) * DAY_MS));
      const total = new Array<number>(width).fill(0);
      const dailyOf = (consumer: string): number[] => {
        const daily = new Array<number>(width).fill(0);
        for (const [day, count] of perConsumer.get(consumer) ?? []) {
          daily[day - first] = count;
          total[day - first]! += count;
        }
        return daily;
      };
      const consumers: BurndownConsumer[] = [];
      const row = (consumer: string, firstSeen: string, lastSeen: string): void => {
        const daily = dailyOf(consumer);
        const calls = daily.reduce((a, b) => a + b, 0);
        const stopped = o.now - Date.parse(lastSeen) > stoppedAfterDays * DAY_MS;
        consumers.push({ consumer, ...o.who(consumer), calls, firstSeen, lastSeen, stopped, daily });
      };
      const listed = new Set<string>();
      for (const u of o.uses) {
        if (u.operation !== d.operation || listed.has(u.consumer)) continue;
        listed.add(u.consumer);
        row(u.consumer, u.firstSeen, u.lastSeen);
      }
      for (const [consumer, counts] of perConsumer) {
        if (listed.has(consumer) || counts.size === 0) continue;
        const called = [...counts.keys()];
        row(consumer, iso(Math.min(...called) * DAY_MS), iso(Math.max(...called) * DAY_MS));
      }
      consumers.sort((a, b) => b.calls - a.calls || byName(a.consumer, b.consumer));
      return { operation: d.operation, sunset: d.sunset ?? null, days, total, consumers };
    }),
  };
}

/** Contract violations by operation and rule, most first, and the newest samples. */
export function violationsView(snap: ConsoleSnapshot, o: ViewScope): ViolationsView {
  const rules = new Map<string, { operation: string; field: string; kind: string; count: number; lastSeenMs: number }>();
  for (const r of snap.violations) {
    const key = JSON.stringify([r.operation, r.field, r.kind]);
    const seen = rules.get(key);
    if (seen === undefined) rules.set(key, { operation: r.operation, field: r.field, kind: r.kind, count: r.count, lastSeenMs: r.lastSeenMs });
    else {
      seen.count += r.count;
      seen.lastSeenMs = Math.max(seen.lastSeenMs, r.lastSeenMs);
    }
  }
  const sorted = [...rules.values()].sort((a, b) => b.count - a.count || byName(a.operation, b.operation) || byName(a.field, b.field) || byName(a.kind, b.kind));
  const samples = [...snap.samples].sort((a, b) => b.atMs - a.atMs || byName(a.requestId, b.requestId)).slice(0, 50);
  return {
    ...base(o),
    total: sorted.reduce((n, r) => n + r.count, 0),
    rules: sorted.map((r) => ({ operation: r.operation, field: r.field, kind: r.kind, count: r.count, lastSeen: iso(r.lastSeenMs) })),
    samples: samples.map((s) => ({ at: iso(s.atMs), operation: s.operation, requestId: s.requestId, status: s.status, problems: s.problems })),
  };
}
