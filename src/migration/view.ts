/**
 * The migration lane as operations see it: the tally the lane records into, the report (this
 * instance's, or the fleet's through `migration.store`), the reset, and the close (the last
 * flush). `openMigrationView` makes one per serving process (the composition root, src/gateway.ts);
 * `migrationGroup` is the `--workers` primary's side, which has no tally of its own and combines
 * its workers' snapshots (or reads the fleet's Redis).
 */
import type { RedisConnectionConfig } from '../stores/connection.js';
import { MigrationFleet, type FleetLog } from './fleet.js';
import { buildReport, type MigrationReport } from './report.js';
import type { MigrationConfig } from './schema.js';
import { mergeSnapshots, MigrationTally, type TallyBounds, type TallySnapshot } from './tally.js';

export interface MigrationLaneView {
  /** The lane's `Recorder`. */
  readonly tally: MigrationTally;
  /** The report: the fleet's with a store (this instance's when Redis cannot be read), else this process's. */
  report(): Promise<MigrationReport>;
  /** This process's counts (flushed to the store first, when there is one): a worker's answer to its primary. */
  snapshot(): Promise<TallySnapshot>;
  /** Counting starts again from zero (the fleet's counts with a store). Rejects when the store cannot be written: nothing was reset. */
  reset(): Promise<void>;
  /** This process's counts start again (a worker, once its primary reset the store: its epoch). */
  resetLocal(epoch?: string): Promise<void>;
  /** The last flush to the store, then its connection is released. */
  close(): Promise<void>;
}

export interface ViewOptions {
  /** The migration section in force (after reloads: modes and percents change); the initial one when absent or null. */
  readonly current?: () => MigrationConfig | null | undefined;
  /** Where `passwordFromEnv` and PETSTORE_REDIS_PREFIX are read (process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly log?: FleetLog | undefined;
  /** Milliseconds since the epoch; Date.now by default. */
  readonly now?: () => number;
  /** How often counts go to the store; default 2000 ms. */
  readonly flushMs?: number;
}

function boundsOf(config: MigrationConfig): TallyBounds {
  return { maxPaths: config.compare.maxPaths, maxSamples: config.compare.maxSamples };
}

function because(err: unknown): string {
  return `Redis could not be read (${err instanceof Error ? err.message : String(err)}): this instance's counts`;
}

/**
 * The view of one serving process. The tally's bounds and the store are the initial config's
 * (they change on a restart); the report's modes, percents and gate are those in force.
 *
 * @example
 *   const view = openMigrationView(config.migration, { current: () => holder.current.config.migration, log });
 *   view.tally.routed('getPet', 'next', 12);
 *   const report = await view.report();
 */
export function openMigrationView(config: MigrationConfig, options: ViewOptions = {}): MigrationLaneView {
  const now = options.now ?? Date.now;
  const bounds = boundsOf(config);
  const tally = new MigrationTally({ ...bounds, now });
  const store: RedisConnectionConfig | null = config.store;
  const fleet = store === null ? undefined : new MigrationFleet(store, tally, { bounds, env: options.env, log: options.log, now, flushMs: options.flushMs });
  const inForce = () => options.current?.() ?? config;
  return {
    tally,
    async report() {
      if (fleet === undefined) return buildReport(tally.snapshot(), inForce(), 'instance', now());
      try {
        return buildReport(await fleet.read(), inForce(), 'fleet', now());
      } catch (err) {
        return buildReport(tally.snapshot(), inForce(), 'instance', now(), because(err));
      }
    },
    async snapshot() {
      await fleet?.flush();
      return tally.snapshot();
    },
    async reset() {
      if (fleet === undefined) tally.reset();
      else await fleet.reset();
    },
    async resetLocal(epoch) {
      if (fleet === undefined) tally.reset();
      else await fleet.resetLocal(epoch);
    },
    async close() {
      await fleet?.close();
    },
  };
}

/** The `--workers` primary's side of the report and the reset. */
export interface MigrationGroup {
  /** The group's report from its workers' snapshots: summed, or the fleet's from Redis with a store. */
  report(snapshots: readonly unknown[]): Promise<MigrationReport>;
  /** Resets the store's counts (with one), before the workers reset theirs: the epoch to hand them. */
  reset(): Promise<string | undefined>;
  close(): Promise<void>;
}

/** A worker's answer, as far as it can be checked: a snapshot has `since` and `operations`. */
function isSnapshot(s: unknown): s is TallySnapshot {
  return typeof s === 'object' && s !== null && typeof (s as { since?: unknown }).since === 'string' && typeof (s as { operations?: unknown }).operations === 'object';
}

/**
 * For the `--workers` primary: the report of the whole group (every worker's counts added), or
 * with `migration.store` the fleet's, read from Redis once (each worker flushed when asked).
 */
export function migrationGroup(config: MigrationConfig, options: ViewOptions = {}): MigrationGroup {
  const now = options.now ?? Date.now;
  const bounds = boundsOf(config);
  const store: RedisConnectionConfig | null = config.store;
  const fleet = store === null ? undefined : new MigrationFleet(store, undefined, { bounds, env: options.env, log: options.log, now });
  const inForce = () => options.current?.() ?? config;
  const merged = (snapshots: readonly unknown[]) => mergeSnapshots(snapshots.filter(isSnapshot), bounds);
  return {
    async report(snapshots) {
      if (fleet === undefined) return buildReport(merged(snapshots), inForce(), 'instance', now());
      try {
        return buildReport(await fleet.read(), inForce(), 'fleet', now());
      } catch (err) {
        return buildReport(merged(snapshots), inForce(), 'instance', now(), because(err));
      }
    },
    async reset() {
      return fleet?.reset();
    },
    async close() {
      await fleet?.close();
    },
  };
}
