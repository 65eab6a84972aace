/**
 * The migration report (`GET /migration`, `petstore-gateway migration report`): per operation its
 * mode, what was routed where, the comparisons (equal, different, by field path), next's contract
 * violations, failures and fallbacks, dropped shadow copies, latency beside legacy's and the newest
 * samples; and `verdict`, the gate: is an operation ready to move on (to split, to next, to retire
 * the legacy backend)? Both are pure: the counts come from a tally's snapshot (tally.ts), this
 * instance's or the fleet's (fleet.ts).
 */
import { bucketCount, quantile } from './latency.js';
import type { MigrationConfig, Mode } from './schema.js';
import type { OperationCounts, TallySample, TallySnapshot } from './tally.js';

export interface LatencyFigures {
  /** Durations counted. */
  readonly count: number;
  /** null when none was counted. */
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
}

/** The thresholds of the verdict (`migration.gate`, overridden by the report command's flags). */
export interface Gate {
  readonly minComparisons: number;
  readonly maxDifferentRatio: number;
  readonly maxViolations: number;
}

export interface OperationReport {
  readonly operation: string;
  readonly mode: Mode;
  /** The share of consumers `next` answers: split's percent, 100 in next mode, 0 in legacy and shadow. */
  readonly percent: number;
  readonly routed: { readonly legacy: number; readonly next: number };
  readonly compared: number;
  readonly equal: number;
  readonly different: number;
  /** different / compared; null before any comparison. */
  readonly differentRatio: number | null;
  /** Differing field paths, most first. */
  readonly paths: ReadonlyArray<{ readonly path: string; readonly count: number }>;
  /** next's answers outside the interface, by rule, most first. */
  readonly violations: ReadonlyArray<{ readonly rule: string; readonly count: number }>;
  readonly nextErrors: Readonly<Record<string, number>>;
  readonly fallbacks: Readonly<Record<string, number>>;
  readonly dropped: Readonly<Record<string, number>>;
  /** legacy: requests it answered; next: requests it answered and shadow copies' calls. */
  readonly latency: { readonly legacy: LatencyFigures; readonly next: LatencyFigures };
  /** The newest differences, newest first; values redacted and cut to 64 characters. */
  readonly samples: readonly TallySample[];
}

export interface MigrationReport {
  readonly generatedAt: string;
  /** `fleet`: every instance's counts, from the Redis of `migration.store`; `instance`: this one's (every worker's with --workers). */
  readonly scope: 'instance' | 'fleet';
  /** When counting began, or was last reset. */
  readonly since: string;
  readonly gate: Gate;
  readonly operations: readonly OperationReport[];
  /** With `migration.store`, why the report is this instance's: Redis could not be read. */
  readonly storeError?: string;
}

const EMPTY: OperationCounts = {
  routed: { legacy: 0, next: 0 },
  compared: 0,
  equal: 0,
  different: 0,
  fallbacks: {},
  dropped: {},
  paths: {},
  violations: {},
  nextErrors: {},
  latency: { legacy: {}, next: {} },
  samples: [],
};

function figures(buckets: Readonly<Record<string, number>>): LatencyFigures {
  return { count: bucketCount(buckets), p50Ms: quantile(buckets, 0.5), p99Ms: quantile(buckets, 0.99) };
}

/** Entries by count, most first, then by name. */
function ranked(record: Readonly<Record<string, number>>): Array<[string, number]> {
  return Object.entries(record)
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

function nonZero(record: Readonly<Record<string, number>>): Record<string, number> {
  return Object.fromEntries(ranked(record));
}

function percentOf(mode: Mode, percent: number | undefined): number {
  if (mode === 'split') return percent ?? 0;
  return mode === 'next' ? 100 : 0;
}

/** The gate of a migration config, its defaults filled. */
export function gateOf(config: { readonly gate?: Partial<Gate> } | null | undefined): Gate {
  const g: Partial<Gate> = config?.gate ?? {};
  return { minComparisons: g.minComparisons ?? 10000, maxDifferentRatio: g.maxDifferentRatio ?? 0.001, maxViolations: g.maxViolations ?? 0 };
}

/**
 * The report of a snapshot under a config: every operation the config names or the snapshot
 * counted, by name, with the mode and percent in force.
 */
export function buildReport(snapshot: TallySnapshot, config: Pick<MigrationConfig, 'operations' | 'gate'>, scope: 'instance' | 'fleet', now: number = Date.now(), storeError?: string): MigrationReport {
  const configured = config.operations ?? {};
  const names = [...new Set([...Object.keys(configured), ...Object.keys(snapshot.operations)])].sort();
  const operations = names.map((operation): OperationReport => {
    const c = Object.hasOwn(snapshot.operations, operation) ? (snapshot.operations[operation] ?? EMPTY) : EMPTY;
    const own = Object.hasOwn(configured, operation) ? configured[operation] : undefined;
    const mode = own?.mode ?? 'legacy';
    return {
      operation,
      mode,
      percent: percentOf(mode, own?.percent),
      routed: { legacy: c.routed.legacy, next: c.routed.next },
      compared: c.compared,
      equal: c.equal,
      different: c.different,
      differentRatio: c.compared === 0 ? null : c.different / c.compared,
      paths: ranked(c.paths).map(([path, count]) => ({ path, count })),
      violations: ranked(c.violations).map(([rule, count]) => ({ rule, count })),
      nextErrors: nonZero(c.nextErrors),
      fallbacks: nonZero(c.fallbacks),
      dropped: nonZero(c.dropped),
      latency: { legacy: figures(c.latency.legacy), next: figures(c.latency.next) },
      samples: c.samples,
    };
  });
  return {
    generatedAt: new Date(now).toISOString(),
    scope,
    since: snapshot.since,
    gate: gateOf(config),
    operations,
    ...(storeError === undefined ? {} : { storeError }),
  };
}

export interface OperationVerdict {
  readonly operation: string;
  readonly mode: Mode;
  readonly ready: boolean;
  /** Why not, one short sentence each; empty when ready. */
  readonly reasons: readonly string[];
}

export interface Verdict {
  readonly ready: boolean;
  /** Every operation being migrated (not in legacy mode, or with comparisons or requests to next). */
  readonly operations: readonly OperationVerdict[];
  /** Why the whole is not ready when no operation is being migrated. */
  readonly reasons: readonly string[];
}

function sum(record: Readonly<Record<string, number>>): number {
  let n = 0;
  for (const v of Object.values(record)) n += v;
  return n;
}

/** `0.12%`: a ratio as a percentage, without trailing zeros. */
export function percentText(ratio: number): string {
  return `${Number((ratio * 100).toPrecision(3))}%`;
}

function byKind(record: Readonly<Record<string, number>>): string {
  return ranked(record)
    .map(([k, n]) => `${k}: ${n}`)
    .join(', ');
}

/**
 * Whether each operation being migrated is ready, against `gate`: at least minComparisons
 * comparisons, a different ratio not above maxDifferentRatio, no more than maxViolations contract
 * violations by next; and in split and next mode, no failure of next and no fallback to legacy.
 * The whole is ready when every such operation is, and there is at least one.
 *
 * @example
 *   const v = verdict(report, { ...report.gate, minComparisons: 1000 });
 *   if (!v.ready) console.log(v.operations.flatMap((o) => o.reasons));
 */
export function verdict(report: Pick<MigrationReport, 'operations' | 'gate'>, gate: Gate = report.gate): Verdict {
  const judged = report.operations.filter((o) => o.mode !== 'legacy' || o.compared > 0 || o.routed.next > 0);
  const operations = judged.map((o): OperationVerdict => {
    const reasons: string[] = [];
    const routing = o.mode === 'split' || o.mode === 'next';
    // Shadow is judged by its comparisons; split and next by the requests next answered.
    if (!routing && o.compared < gate.minComparisons) reasons.push(`${o.compared} comparisons, fewer than ${gate.minComparisons}`);
    if (routing && o.routed.next < gate.minComparisons) reasons.push(`${o.routed.next} requests answered by next, fewer than ${gate.minComparisons}`);
    if (o.differentRatio !== null && o.differentRatio > gate.maxDifferentRatio) reasons.push(`${percentText(o.differentRatio)} different, above ${percentText(gate.maxDifferentRatio)}`);
    const violations = o.violations.reduce((n, v) => n + v.count, 0);
    if (violations > gate.maxViolations) reasons.push(`${violations} contract violations by next, more than ${gate.maxViolations}`);
    if (routing) {
      // next's failures (a read answered by legacy instead, a write that failed) against the
      // same share as the differences: a rare transient failure does not block the gate forever.
      const fallbacks = sum(o.fallbacks);
      const failed = Math.max(fallbacks, sum(o.nextErrors));
      const share = failed / Math.max(failed, o.routed.next + fallbacks);
      if (failed > 0 && share > gate.maxDifferentRatio) reasons.push(`next failed ${failed === 1 ? 'once' : `${failed} times`} (${percentText(share)}, above ${percentText(gate.maxDifferentRatio)}; ${byKind(fallbacks > 0 ? o.fallbacks : o.nextErrors)})`);
    }
    return { operation: o.operation, mode: o.mode, ready: reasons.length === 0, reasons };
  });
  const reasons = judged.length === 0 ? ['no operation is shadowed, split or sent to next'] : [];
  return { ready: judged.length > 0 && operations.every((o) => o.ready), operations, reasons };
}
