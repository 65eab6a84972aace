/**
 * The console's data for one admin listener (`ConsoleData`, docs/console.md): the views of
 * views.ts over the counts of this process (or of a `--workers` primary's workers), or of the
 * whole fleet when the counts are rolled up in Redis (fleet.ts). A fleet view that cannot be read
 * falls back to this instance's counts and says so (`degraded`): the page still shows something
 * true, and says what.
 */
import type { DeprecatedOperation } from '../deprecations.js';
import type { DeprecationUse } from '../../stores/types.js';
import type { ConsoleFleet } from './fleet.js';
import { burndownView, trafficView, violationsView } from './views.js';
import type { BurndownView, ConsoleData, ConsoleSnapshot, FleetView, InstanceBeat, KeysView, MigrationView, TrafficView, ViolationsView, WhoToTell } from './types.js';

/** A heartbeat older than this many intervals is stale (the instance stopped or cannot reach Redis). */
const STALE_BEATS = 3;
/** A consumer with no call of a deprecated operation for this many days has stopped. */
export const STOPPED_AFTER_DAYS = 7;

export interface ConsoleOptions {
  /** This instance's counts: its recorder's snapshot, or its workers' merged. */
  readonly local: () => Promise<ConsoleSnapshot>;
  /** The fleet's rollup in Redis, when the shared store is Redis. */
  readonly fleet?: ConsoleFleet | undefined;
  /** The deprecation ledger's rows (exact counts, first and last call; shared when the ledger is). */
  readonly uses: () => Promise<DeprecationUse[]>;
  /** The deprecated operations of the policy in force, with their sunsets. */
  readonly deprecated: () => readonly DeprecatedOperation[];
  /** Who to tell per consumer, from the keys in force. */
  readonly who: () => Promise<(consumer: string) => WhoToTell>;
  /** The keys view, given the consumers' last requests as the counts show them. */
  readonly keys: (query: { unusedDays?: number; expiringDays?: number }, snapshot: ConsoleSnapshot, scope: 'fleet' | 'instance', degraded: string | undefined) => Promise<KeysView>;
  /** The migration report (src/migration/report.ts), when the lane is on. */
  readonly migration?: (() => Promise<object>) | undefined;
  /** This instance's heartbeat as it would write it now. */
  readonly self: () => InstanceBeat;
  /** The heartbeat's interval (ms), to tell a stale instance. */
  readonly beatMs: number;
  readonly now?: () => number;
}

interface Counted {
  readonly snapshot: ConsoleSnapshot;
  readonly scope: 'fleet' | 'instance';
  readonly degraded: string | undefined;
}

/** The migration report's fields the console reads (src/migration/report.ts `OperationReport`). */
interface MigrationOperation {
  readonly operation: string;
  readonly compared: number;
  readonly equal: number;
  readonly different: number;
  readonly differentRatio: number | null;
  readonly fallbacks: Readonly<Record<string, number>>;
  readonly violations: ReadonlyArray<{ readonly count: number }>;
}

function sum(values: Iterable<number>): number {
  let n = 0;
  for (const v of values) n += v;
  return n;
}

/** The most common fingerprint among live instances (ties: the smallest, so every instance agrees). */
function majority(beats: readonly InstanceBeat[]): string | null {
  const counts = new Map<string, number>();
  for (const b of beats) counts.set(b.policyFingerprint, (counts.get(b.policyFingerprint) ?? 0) + 1);
  let best: string | null = null;
  let most = 0;
  for (const [fp, n] of [...counts].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    if (n > most) {
      best = fp;
      most = n;
    }
  }
  return best;
}

/**
 * The deprecation ledger's rows, or none when its store (Redis) cannot be read: they only add the
 * exact first and last calls, so the counts alone draw the burn-down, which says it is degraded.
 */
async function ledgerRows(uses: () => Promise<DeprecationUse[]>): Promise<{ rows: DeprecationUse[]; away: boolean }> {
  try {
    return { rows: await uses(), away: false };
  } catch {
    return { rows: [], away: true };
  }
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** Every instance's heartbeat (this one as it is now), the majority fingerprint, who differs, who is stale. */
async function fleetView(options: ConsoleOptions, t: number): Promise<FleetView> {
  const self = options.self();
  let beats: InstanceBeat[] = [self];
  let scope: 'fleet' | 'instance' = 'instance';
  let degraded: string | undefined;
  if (options.fleet !== undefined) {
    try {
      // This instance as it is now, whatever its last beat said.
      beats = [self, ...(await options.fleet.instances()).filter((b) => b.id !== self.id)];
      scope = 'fleet';
    } catch {
      degraded = 'store unreachable';
    }
  }
  const live = beats.filter((b) => t - b.atMs <= STALE_BEATS * options.beatMs || b.id === self.id);
  const common = majority(live);
  const instances = beats
    .map((b) => ({
      id: b.id,
      host: b.host,
      pid: b.pid,
      version: b.version,
      policyFingerprint: b.policyFingerprint,
      policyDiffers: common !== null && b.policyFingerprint !== common,
      ready: b.ready,
      reason: b.reason,
      startedAt: new Date(b.startedAtMs).toISOString(),
      lastReload: iso(b.lastReloadMs),
      lastHeartbeat: new Date(b.atMs).toISOString(),
      stale: b.id !== self.id && t - b.atMs > STALE_BEATS * options.beatMs,
      self: b.id === self.id,
      workers: b.workers,
    }))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { generatedAt: new Date(t).toISOString(), scope, ...(degraded === undefined ? {} : { degraded }), majorityFingerprint: common, instances };
}

export function consoleData(options: ConsoleOptions): ConsoleData {
  const now = options.now ?? Date.now;
  const generatedAt = () => new Date(now()).toISOString();

  async function counted(scope: 'instance' | undefined): Promise<Counted> {
    const fleet = options.fleet;
    if (fleet === undefined || scope === 'instance') return { snapshot: await options.local(), scope: 'instance', degraded: undefined };
    try {
      return { snapshot: await fleet.read(), scope: 'fleet', degraded: undefined };
    } catch {
      return { snapshot: await options.local(), scope: 'instance', degraded: 'store unreachable' };
    }
  }

  return {
    async traffic(window, scope): Promise<TrafficView> {
      const c = await counted(scope);
      return trafficView(c.snapshot, window, { now: now(), who: await options.who(), scope: c.scope, degraded: c.degraded });
    },
    async deprecations(scope): Promise<BurndownView> {
      // Read beside the counts: one deadline bounds both.
      const [c, ledger] = await Promise.all([counted(scope), ledgerRows(options.uses)]);
      const degraded = c.degraded ?? (ledger.away ? 'store unreachable' : undefined);
      return burndownView(c.snapshot, { deprecated: [...options.deprecated()], uses: ledger.rows, who: await options.who(), now: now(), stoppedAfterDays: STOPPED_AFTER_DAYS, scope: c.scope, degraded });
    },
    async violations(scope): Promise<ViolationsView> {
      const c = await counted(scope);
      return violationsView(c.snapshot, { now: now(), scope: c.scope, degraded: c.degraded });
    },
    async keys(query): Promise<KeysView> {
      const c = await counted(undefined);
      return options.keys(query, c.snapshot, c.scope, c.degraded);
    },
    fleet: () => fleetView(options, now()),
    async migration(): Promise<MigrationView> {
      if (options.migration === undefined) return { generatedAt: generatedAt(), scope: 'instance', enabled: false, operations: [] };
      const report = (await options.migration()) as { scope?: 'instance' | 'fleet'; operations?: readonly MigrationOperation[] };
      return {
        generatedAt: generatedAt(),
        scope: report.scope ?? 'instance',
        enabled: true,
        operations: (report.operations ?? []).map((o) => ({
          operation: o.operation,
          compared: o.compared,
          equal: o.equal,
          different: o.different,
          divergence: o.differentRatio,
          fallbacks: sum(Object.values(o.fallbacks)),
          nextViolations: sum(o.violations.map((v) => v.count)),
        })),
      };
    },
  };
}
