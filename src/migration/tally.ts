/**
 * What the migration lane counts in one process (`MigrationTally`, the lane's `Recorder`): per
 * operation, requests routed to each side, fallbacks and dropped shadow copies by reason,
 * comparisons (equal, different, and the differing field paths), next's contract violations by
 * rule and failures by kind, latency per side in fixed log-scale buckets (latency.ts), and the
 * newest differences as samples. Memory is bounded whatever the traffic: at most `maxPaths`
 * distinct paths and as many rules per operation (the rest count under "(other)"), a few dozen
 * kinds and reasons, 256 operations, `maxSamples` samples each, names and values cut short.
 *
 * Recording is a few additions on maps, on the request path; nothing here waits or throws. The
 * snapshot is plain JSON, so snapshots of many processes (the `--workers` group) merge by adding
 * (`mergeSnapshots`), and the fleet's Redis (fleet.ts) keeps the same counts as fields of a hash
 * (`toFields`, `fromFields`).
 */
import { FAILURE_KINDS } from '../core/upstream.js';
import { bucketOf, MAX_BUCKET, type Buckets } from './latency.js';
import type { Comparison, DropReason, FallbackReason, Recorder, Sample, Side } from './types.js';

/** Where counts past a bound go. */
export const OTHER = '(other)';
export const FALLBACK_REASONS: readonly FallbackReason[] = ['refused', 'reset', 'timeout', 'invalid_response', 'tls', 'contract', 'server_error', 'open_circuit'];
export const DROP_REASONS: readonly DropReason[] = ['in_flight', 'body', 'method', 'sampled_out', 'answer_too_large', 'legacy_failed', 'compare_failed'];
/**
 * How `next` fails: the transport's failure kinds, `timeout` (a shadow copy abandoned at
 * shadow.timeoutMs, or a routed call's deadline) and `open_circuit` (its breaker refused the call).
 */
export const NEXT_FAILURE_KINDS: readonly string[] = [...FAILURE_KINDS, 'timeout', 'open_circuit'];
/** Most operations counted; more (not possible with an interface of fewer) count under "(other)". */
export const MAX_OPERATIONS = 256;
/** Most distinct failure kinds and reasons per operation. */
export const MAX_KINDS = 32;
/** A path, rule, kind or operation name is cut to this many characters. */
const MAX_NAME = 256;
/** Sample values are cut to this many characters (compare.ts cuts them already: this is a second bound). */
export const SAMPLE_VALUE_CHARS = 64;

/** A difference kept as a sample, with when it was seen (ISO 8601). */
export interface TallySample extends Sample {
  readonly time: string;
}

/** One operation's counts: plain data, JSON as it is. */
export interface OperationCounts {
  readonly routed: { readonly legacy: number; readonly next: number };
  readonly compared: number;
  readonly equal: number;
  readonly different: number;
  readonly fallbacks: Readonly<Record<string, number>>;
  readonly dropped: Readonly<Record<string, number>>;
  /** Comparisons that differed, by field path (a comparison with two paths counts under each). */
  readonly paths: Readonly<Record<string, number>>;
  readonly violations: Readonly<Record<string, number>>;
  readonly nextErrors: Readonly<Record<string, number>>;
  readonly latency: { readonly legacy: Buckets; readonly next: Buckets };
  /** Newest first. */
  readonly samples: readonly TallySample[];
}

export interface TallySnapshot {
  /** When counting began, or was last reset (ISO 8601). */
  readonly since: string;
  readonly operations: Readonly<Record<string, OperationCounts>>;
}

/** The bounds of a tally (`migration.compare`'s maxPaths and maxSamples). */
export interface TallyBounds {
  readonly maxPaths: number;
  readonly maxSamples: number;
}

/** What the metrics read of one operation (src/ops/migration-metrics.ts): every label value of a fixed list, zeros included. */
export interface OperationMetricCounts {
  readonly operation: string;
  readonly routed: Readonly<Record<Side, number>>;
  readonly comparisons: { readonly equal: number; readonly different: number };
  readonly fallbacks: Readonly<Record<string, number>>;
  readonly dropped: Readonly<Record<string, number>>;
  readonly nextErrors: Readonly<Record<string, number>>;
  readonly violations: number;
}

function cut(text: unknown, max: number): string {
  const s = typeof text === 'string' ? text : String(text);
  return s.length > max ? s.slice(0, max) : s;
}

/** Counts by name, at most `cap` distinct names; later names count under "(other)". */
class Bounded {
  readonly counts = new Map<string, number>();
  private distinct = 0;

  constructor(private readonly cap: number) {}

  add(name: string, n = 1): void {
    const key = cut(name, MAX_NAME);
    const seen = this.counts.get(key);
    if (seen !== undefined) this.counts.set(key, seen + n);
    else if (key === OTHER) this.counts.set(OTHER, n);
    else if (this.distinct < this.cap) {
      this.distinct++;
      this.counts.set(key, n);
    } else this.counts.set(OTHER, (this.counts.get(OTHER) ?? 0) + n);
  }

  record(): Record<string, number> {
    return Object.fromEntries(this.counts);
  }
}

function bump(map: Map<number, number>, bucket: number, n = 1): void {
  map.set(bucket, (map.get(bucket) ?? 0) + n);
}

interface Kept {
  readonly seq: number;
  readonly sample: TallySample;
}

/** One operation's counts as they grow. */
class OperationTally {
  readonly routed = { legacy: 0, next: 0 };
  compared = 0;
  equal = 0;
  different = 0;
  readonly fallbacks = new Bounded(MAX_KINDS);
  readonly dropped = new Bounded(MAX_KINDS);
  readonly nextErrors = new Bounded(MAX_KINDS);
  readonly paths: Bounded;
  readonly violations: Bounded;
  readonly latency = { legacy: new Map<number, number>(), next: new Map<number, number>() };
  /** Oldest first; at most maxSamples. */
  readonly samples: Kept[] = [];

  constructor(maxPaths: number) {
    this.paths = new Bounded(maxPaths);
    this.violations = new Bounded(maxPaths);
  }

  counts(): OperationCounts {
    return {
      routed: { ...this.routed },
      compared: this.compared,
      equal: this.equal,
      different: this.different,
      fallbacks: this.fallbacks.record(),
      dropped: this.dropped.record(),
      paths: this.paths.record(),
      violations: this.violations.record(),
      nextErrors: this.nextErrors.record(),
      latency: { legacy: Object.fromEntries(this.latency.legacy), next: Object.fromEntries(this.latency.next) },
      samples: this.samples.map((k) => k.sample).reverse(),
    };
  }
}

/**
 * Every count of one operation as a field name and a number (`routed:legacy`, `compared`,
 * `path:$.name`, `lat:next:57`...): how the fleet's Redis hash holds them, and how counts are
 * added up. Zero counts are left out.
 */
export function toFields(c: OperationCounts): Map<string, number> {
  const f = new Map<string, number>();
  const put = (name: string, n: number) => {
    if (n > 0 && Number.isFinite(n)) f.set(name, (f.get(name) ?? 0) + n);
  };
  put('routed:legacy', c.routed.legacy);
  put('routed:next', c.routed.next);
  put('compared', c.compared);
  put('equal', c.equal);
  put('different', c.different);
  const each = (prefix: string, r: Readonly<Record<string, number>>) => {
    for (const [k, v] of Object.entries(r)) put(prefix + k, v);
  };
  each('fallback:', c.fallbacks);
  each('dropped:', c.dropped);
  each('path:', c.paths);
  each('violation:', c.violations);
  each('error:', c.nextErrors);
  each('lat:legacy:', c.latency.legacy);
  each('lat:next:', c.latency.next);
  return f;
}

/** Counts from fields (`toFields`), within the bounds (past them, under "(other)"); larger counts are kept first. */
export function fromFields(fields: Iterable<readonly [string, number]>, samples: readonly TallySample[], bounds: TallyBounds): OperationCounts {
  const op = new OperationTally(bounds.maxPaths);
  const sorted = [...fields].filter(([, n]) => n > 0 && Number.isFinite(n)).sort((a, b) => b[1] - a[1]);
  for (const [name, n] of sorted) {
    const colon = name.indexOf(':');
    const kind = colon < 0 ? name : name.slice(0, colon);
    const rest = colon < 0 ? '' : name.slice(colon + 1);
    switch (kind) {
      case 'routed':
        if (rest === 'legacy' || rest === 'next') op.routed[rest] += n;
        break;
      case 'compared':
        op.compared += n;
        break;
      case 'equal':
        op.equal += n;
        break;
      case 'different':
        op.different += n;
        break;
      case 'fallback':
        op.fallbacks.add(rest, n);
        break;
      case 'dropped':
        op.dropped.add(rest, n);
        break;
      case 'path':
        op.paths.add(rest, n);
        break;
      case 'violation':
        op.violations.add(rest, n);
        break;
      case 'error':
        op.nextErrors.add(rest, n);
        break;
      case 'lat': {
        const [side, bucket] = rest.split(':');
        const b = Number(bucket);
        if ((side === 'legacy' || side === 'next') && Number.isInteger(b) && b >= 0 && b <= MAX_BUCKET) bump(op.latency[side], b, n);
        break;
      }
      default:
        break;
    }
  }
  const kept = [...samples].sort((a, b) => (a.time < b.time ? 1 : a.time > b.time ? -1 : 0)).slice(0, bounds.maxSamples);
  return { ...op.counts(), samples: kept };
}

/**
 * Snapshots of several processes as one: counts added, the earliest `since`, the newest samples,
 * bounds applied again (paths with the largest counts keep their name).
 */
export function mergeSnapshots(snapshots: readonly TallySnapshot[], bounds: TallyBounds): TallySnapshot {
  const fields = new Map<string, Map<string, number>>();
  const samples = new Map<string, TallySample[]>();
  let since: string | undefined;
  for (const s of snapshots) {
    if (since === undefined || s.since < since) since = s.since;
    for (const [name, c] of Object.entries(s.operations)) {
      let f = fields.get(name);
      if (f === undefined) fields.set(name, (f = new Map()));
      for (const [k, v] of toFields(c)) f.set(k, (f.get(k) ?? 0) + v);
      let list = samples.get(name);
      if (list === undefined) samples.set(name, (list = []));
      list.push(...c.samples);
    }
  }
  const operations = [...fields.keys()].sort().map((name) => [name, fromFields(fields.get(name) ?? [], samples.get(name) ?? [], bounds)] as const);
  return { since: since ?? new Date(0).toISOString(), operations: Object.fromEntries(operations) };
}

/** A record with every name of `known` (0 when not counted) and the counted ones; a name not known counts as `other`. */
function withKnown(known: readonly string[], counts: Bounded): Record<string, number> {
  const out = new Map<string, number>(known.map((k) => [k, 0]));
  for (const [k, v] of counts.counts) {
    const name = out.has(k) ? k : 'other';
    out.set(name, (out.get(name) ?? 0) + v);
  }
  return Object.fromEntries(out);
}

export interface TallyOptions extends TallyBounds {
  /** Milliseconds since the epoch (sample times, `since`); Date.now by default. */
  readonly now?: () => number;
}

/**
 * The lane's recorder in one process.
 *
 * @example
 *   const tally = new MigrationTally({ maxPaths: 100, maxSamples: 20 });
 *   tally.routed('getPet', 'next', 12.5);
 *   tally.compared('listPets', { equal: false, paths: ['$[*].name'], samples: [{ path: '$[*].name', legacy: '"Rex"', next: '"rex"' }] }, 8, 11);
 *   tally.snapshot().operations.listPets.paths // { '$[*].name': 1 }
 */
export class MigrationTally implements Recorder {
  private operations = new Map<string, OperationTally>();
  private sinceMs: number;
  private seq = 0;
  private resetAt = 0;
  private resets = 0;
  private readonly now: () => number;
  readonly bounds: TallyBounds;

  constructor(options: TallyOptions) {
    this.now = options.now ?? Date.now;
    this.bounds = { maxPaths: Math.max(1, options.maxPaths), maxSamples: Math.max(0, options.maxSamples) };
    this.sinceMs = this.now();
  }

  private op(operation: string): OperationTally {
    const name = cut(operation, MAX_NAME);
    let t = this.operations.get(name);
    if (t === undefined) {
      if (this.operations.size >= MAX_OPERATIONS && name !== OTHER) return this.op(OTHER);
      t = new OperationTally(this.bounds.maxPaths);
      this.operations.set(name, t);
    }
    return t;
  }

  routed(operation: string, side: Side, ms: number | undefined): void {
    if (side !== 'legacy' && side !== 'next') return;
    const t = this.op(operation);
    t.routed[side]++;
    if (ms !== undefined) bump(t.latency[side], bucketOf(ms));
  }

  fallback(operation: string, reason: FallbackReason): void {
    this.op(operation).fallbacks.add(reason);
  }

  dropped(operation: string, reason: DropReason): void {
    this.op(operation).dropped.add(reason);
  }

  /**
   * A shadow copy compared. Its `nextMs` counts in next's latency (a copy is never routed);
   * legacy's latency is that of the requests it answered (`routed`), so `legacyMs` is not counted
   * twice.
   */
  compared(operation: string, comparison: Comparison, _legacyMs: number, nextMs: number): void {
    const t = this.op(operation);
    t.compared++;
    if (comparison.equal) t.equal++;
    else {
      t.different++;
      for (const p of comparison.paths) t.paths.add(p);
    }
    bump(t.latency.next, bucketOf(nextMs));
    const max = this.bounds.maxSamples;
    if (max === 0) return;
    const time = new Date(this.now()).toISOString();
    for (const s of comparison.samples.slice(0, max)) {
      t.samples.push({ seq: ++this.seq, sample: { time, path: cut(s.path, MAX_NAME), legacy: cut(s.legacy, SAMPLE_VALUE_CHARS), next: cut(s.next, SAMPLE_VALUE_CHARS) } });
    }
    if (t.samples.length > max) t.samples.splice(0, t.samples.length - max);
  }

  nextFailed(operation: string, kind: string): void {
    this.op(operation).nextErrors.add(kind);
  }

  nextViolation(operation: string, rule: string): void {
    this.op(operation).violations.add(rule);
  }

  /** Every count, as plain JSON; operations by name. */
  snapshot(): TallySnapshot {
    const names = [...this.operations.keys()].sort();
    return { since: new Date(this.sinceMs).toISOString(), operations: Object.fromEntries(names.map((n) => [n, (this.operations.get(n) as OperationTally).counts()])) };
  }

  /** Starts counting again from zero, now. */
  reset(): void {
    this.operations = new Map();
    this.sinceMs = this.now();
    this.resetAt = this.seq;
    this.resets++;
  }

  /**
   * What the metrics export, per operation (src/ops/migration-metrics.ts): every operation counted,
   * and those of `configured` (zeros until their first request: a rate() needs the series first).
   */
  metricCounts(configured: readonly string[] = []): OperationMetricCounts[] {
    const empty = new OperationTally(1);
    const names = new Set([...this.operations.keys(), ...configured.slice(0, MAX_OPERATIONS).map((n) => cut(n, MAX_NAME))]);
    return [...names]
      .sort()
      .map((operation) => [operation, this.operations.get(operation) ?? empty] as const)
      .map(([operation, t]) => {
        let violations = 0;
        for (const v of t.violations.counts.values()) violations += v;
        return {
          operation,
          routed: { ...t.routed },
          comparisons: { equal: t.equal, different: t.different },
          fallbacks: withKnown(FALLBACK_REASONS, t.fallbacks),
          dropped: withKnown(DROP_REASONS, t.dropped),
          nextErrors: withKnown(NEXT_FAILURE_KINDS, t.nextErrors),
          violations,
        };
      });
  }

  /** How many times it was reset: the fleet's flusher starts over when this changes. */
  get generation(): number {
    return this.resets;
  }

  /** The number of the newest sample, and of the newest one before the last reset. */
  get sampleSeq(): { readonly last: number; readonly atReset: number } {
    return { last: this.seq, atReset: this.resetAt };
  }

  /** The samples numbered after `seq`, oldest first, with their operation. */
  samplesAfter(seq: number): Array<{ readonly operation: string; readonly sample: TallySample }> {
    const out: Array<{ operation: string; sample: TallySample; seq: number }> = [];
    for (const [operation, t] of this.operations) for (const k of t.samples) if (k.seq > seq) out.push({ operation, sample: k.sample, seq: k.seq });
    return out.sort((a, b) => a.seq - b.seq).map(({ operation, sample }) => ({ operation, sample }));
  }
}
