/**
 * The operator console's data (docs/console.md): what the recorder keeps, what travels between
 * processes (a `--workers` primary asks its workers; instances share Redis), and the JSON the
 * admin listener's `/console/api/*` endpoints answer, which the page draws and other tools read.
 *
 * Every name a series carries is bounded: an operation is an operationId of the interface (or
 * `-`, no operation), a consumer is a key id that authenticated (or `-`, none): nothing a client
 * can invent. Past `maxConsumers` distinct ids a process counts the rest under `_OTHER`.
 */

/** The consumer of a request no key authenticated, and the operation of a path outside the interface. */
export const NOBODY = '-';
/** Where consumers past the bound are counted. */
export const OTHER_CONSUMER = '_OTHER';

/**
 * What one slot of a series counts, in this order, then the latency histogram:
 * - `requests`: every finished request;
 * - `client`: 4xx answers, rate limits excepted (the client's doing);
 * - `gateway`: 5xx the gateway caused (internal_error, a draining 503, not_implemented, store_full...);
 * - `upstream`: 5xx the upstream caused (a failed call, a 5xx it answered, 502 upstream_*, 504,
 *   the breaker's 503);
 * - `rateLimited`: 429 answers (rate_limited, too_many_in_flight, too_many_requests, too_many_auth_failures);
 * - `aborted`: the client left before any status (status 0).
 */
export const COUNTERS = ['requests', 'client', 'gateway', 'upstream', 'rateLimited', 'aborted'] as const;
export type CounterName = (typeof COUNTERS)[number];

/**
 * Upper bounds (ms) of the latency histogram's buckets, then one bucket for anything longer.
 * p50 and p99 are read from it as the upper bound of the bucket holding the rank (as Prometheus'
 * histogram_quantile reads `le` buckets, without interpolation: "p99 <= 30 ms"); a rank in the
 * last bucket reads as the last bound (10000: "10 s or more").
 */
export const LATENCY_BOUNDS_MS: readonly number[] = Object.freeze([1, 2, 3, 5, 7.5, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500, 10000]);

/** Numbers in one slot: the counters, then LATENCY_BOUNDS_MS.length + 1 histogram buckets. */
export const SLOT_WIDTH = COUNTERS.length + LATENCY_BOUNDS_MS.length + 1;

/** Minute slots kept (the last hour) and hour slots (the last day). */
export const MINUTES_KEPT = 60;
export const HOURS_KEPT = 24;
/** Days of deprecated-operation calls kept per consumer (the burn-down's reach). */
export const DAYS_KEPT = 400;

/** A slot: its start (epoch ms, a whole minute or hour) and its SLOT_WIDTH numbers. */
export type Slot = readonly [startMs: number, values: readonly number[]];

/** One operation and consumer's series. */
export interface CellSnapshot {
  readonly operation: string;
  readonly consumer: string;
  /** Minute slots with anything counted, oldest first, within the last MINUTES_KEPT minutes. */
  readonly minutes: readonly Slot[];
  /** Hour slots likewise, within the last HOURS_KEPT hours. */
  readonly hours: readonly Slot[];
}

/** Calls of a deprecated operation by one consumer per UTC day (day = epoch ms of its 00:00). */
export interface DailySnapshot {
  readonly operation: string;
  readonly consumer: string;
  readonly days: ReadonlyArray<readonly [dayMs: number, count: number]>;
}

/** An upstream contract violation's rule: the field (a JSON pointer, array indexes as `*`) and the kind. */
export interface ViolationRule {
  readonly operation: string;
  /** `/*\/id`, `/` (the whole body), or `(status)`, `(content-type)`, `(content-encoding)`, `(body)`. */
  readonly field: string;
  /** What is wrong: `must be integer`, `must have required property 'name'`, `status 500 where the interface says 200`... */
  readonly kind: string;
  readonly count: number;
  readonly lastSeenMs: number;
}

/** A redacted sample: the problems as the scanner words them (paths and rules, never a value of the body). */
export interface ViolationSample {
  readonly atMs: number;
  readonly operation: string;
  readonly requestId: string;
  /** The upstream's status. */
  readonly status: number | null;
  /** At most 5, each at most 200 characters. */
  readonly problems: readonly string[];
}

/**
 * Everything one process (or, read from Redis, the fleet) counted: serialisable as JSON, so a
 * worker can answer its primary with it and snapshots merge by addition.
 */
export interface ConsoleSnapshot {
  /** When it was taken (epoch ms). */
  readonly atMs: number;
  readonly cells: readonly CellSnapshot[];
  readonly daily: readonly DailySnapshot[];
  /** Each consumer's first and last request (epoch ms), any operation, any status. */
  readonly seen: ReadonlyArray<readonly [consumer: string, firstMs: number, lastMs: number]>;
  readonly violations: readonly ViolationRule[];
  /** Newest first, at most 50. */
  readonly samples: readonly ViolationSample[];
}

// ---------------------------------------------------------------------------------------------
// The JSON endpoints (GET /console/api/<name>): every answer has `generatedAt` (ISO 8601) and
// `scope`: `fleet` (read from Redis: every instance sharing it) or `instance` (this process, or
// its workers), with `degraded` saying why a fleet view fell back to the instance's.

export interface ViewBase {
  readonly generatedAt: string;
  readonly scope: 'fleet' | 'instance';
  /** Why the view is not the fleet's although Redis is configured (`store unreachable`). */
  readonly degraded?: string;
}

/** Owner and contact of a consumer, as its key says (docs/keys.md); null when the key gives none. */
export interface WhoToTell {
  readonly owner: string | null;
  readonly contact: string | null;
}

/** One row of the traffic table. Quantiles are null with no request. */
export interface TrafficRow {
  readonly requests: number;
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
  readonly errors: { readonly client: number; readonly gateway: number; readonly upstream: number };
  readonly rateLimited: number;
  readonly aborted: number;
}

/** GET /console/api/traffic?window=hour|day */
export interface TrafficView extends ViewBase {
  readonly window: 'hour' | 'day';
  /** The window's start and end, ISO 8601 (end: now). */
  readonly from: string;
  readonly to: string;
  /** Width of a point of `series`: 60 (hour) or 3600 (day). */
  readonly stepSeconds: number;
  /** Per operation (`-`: paths outside the interface), most requests first. */
  readonly operations: ReadonlyArray<TrafficRow & { readonly operation: string }>;
  /** Per consumer (`-`: no key), most requests first; owner and contact from its key. */
  readonly consumers: ReadonlyArray<TrafficRow & WhoToTell & { readonly consumer: string }>;
  /** Per operation and consumer, most requests first. */
  readonly cells: ReadonlyArray<TrafficRow & { readonly operation: string; readonly consumer: string }>;
  /** The chart: point starts (epoch seconds) and, per operation, requests and errors (client + gateway + upstream) per point. */
  readonly series: {
    readonly t: readonly number[];
    readonly operations: ReadonlyArray<{ readonly operation: string; readonly requests: readonly number[]; readonly errors: readonly number[] }>;
  };
}

/** GET /console/api/deprecations */
export interface BurndownView extends ViewBase {
  /** A consumer with no call for this many days is `stopped`. */
  readonly stoppedAfterDays: number;
  readonly operations: ReadonlyArray<{
    readonly operation: string;
    /** ISO 8601, or null when the operation has no sunset. */
    readonly sunset: string | null;
    /** UTC days (YYYY-MM-DD) from the first call seen (at most DAYS_KEPT ago) to today; empty with no call. */
    readonly days: readonly string[];
    /** Calls per day, all consumers, aligned with `days`. */
    readonly total: readonly number[];
    /** Most calls first. */
    readonly consumers: ReadonlyArray<
      WhoToTell & {
        readonly consumer: string;
        /** Calls within the days kept. */
        readonly calls: number;
        readonly firstSeen: string;
        readonly lastSeen: string;
        readonly stopped: boolean;
        /** Aligned with `days`. */
        readonly daily: readonly number[];
      }
    >;
  }>;
}

/** GET /console/api/violations */
export interface ViolationsView extends ViewBase {
  readonly total: number;
  /** Per operation and rule, most first. */
  readonly rules: ReadonlyArray<{ readonly operation: string; readonly field: string; readonly kind: string; readonly count: number; readonly lastSeen: string }>;
  /** Newest first. */
  readonly samples: ReadonlyArray<{ readonly at: string; readonly operation: string; readonly requestId: string; readonly status: number | null; readonly problems: readonly string[] }>;
}

/** Where a key comes from. */
export type KeySource = 'file' | 'env' | 'registry';

/** GET /console/api/keys?unusedDays=N&expiringDays=N (defaults 30 and 14) */
export interface KeysView extends ViewBase {
  readonly unusedDays: number;
  readonly expiringDays: number;
  /** Every key in force, by id. */
  readonly keys: ReadonlyArray<
    WhoToTell & {
      readonly id: string;
      readonly source: KeySource;
      readonly expires: string | null;
      /** Until when a rotated key's previous secret still works; null: no overlap. */
      readonly overlapUntil: string | null;
      /** The last request it made (the registry's lastUsed, or the console's count), null: none seen. */
      readonly lastUsed: string | null;
      /** Expires within expiringDays (not yet expired). */
      readonly expiringSoon: boolean;
      readonly expired: boolean;
      /** No request for unusedDays (or never, when the console has counted for that long). */
      readonly unused: boolean;
    }
  >;
  /** Registry keys revoked, newest first (the registry keeps the last 100). */
  readonly revoked: ReadonlyArray<WhoToTell & { readonly id: string; readonly revokedAt: string; readonly by: string | null }>;
}

/** GET /console/api/fleet */
export interface FleetView extends ViewBase {
  /** The fingerprint most live instances have; null with none. */
  readonly majorityFingerprint: string | null;
  readonly instances: ReadonlyArray<{
    /** host:pid:random, stable for the process's life. */
    readonly id: string;
    readonly host: string;
    readonly pid: number;
    readonly version: string;
    /** SHA-256 of the policy in force (its canonical JSON), first 16 hex digits. */
    readonly policyFingerprint: string;
    /** Differs from majorityFingerprint. */
    readonly policyDiffers: boolean;
    readonly ready: boolean;
    readonly reason: string | null;
    readonly startedAt: string;
    /** The last reload that took (null: none since start). */
    readonly lastReload: string | null;
    readonly lastHeartbeat: string;
    /** No heartbeat for 3 intervals: gone (kept listed for an hour). */
    readonly stale: boolean;
    /** This instance (the one answering). */
    readonly self: boolean;
    readonly workers: number;
  }>;
}

/** GET /console/api/migration: the migration report's divergence per operation; `enabled: false` without a lane. */
export interface MigrationView extends ViewBase {
  readonly enabled: boolean;
  readonly operations: ReadonlyArray<{ readonly operation: string; readonly compared: number; readonly equal: number; readonly different: number; readonly divergence: number | null; readonly fallbacks: number; readonly nextViolations: number }>;
}

/** What the console's routes read (src/ops/console/index.ts builds it for a process). */
export interface ConsoleData {
  traffic(window: 'hour' | 'day', scope?: 'instance'): Promise<TrafficView>;
  deprecations(scope?: 'instance'): Promise<BurndownView>;
  violations(scope?: 'instance'): Promise<ViolationsView>;
  keys(query: { unusedDays?: number; expiringDays?: number }): Promise<KeysView>;
  fleet(): Promise<FleetView>;
  migration(): Promise<MigrationView>;
}

/** Who the recorder counts into; the fleet's Redis rollup takes what changed since its last flush. */
export interface SnapshotSource {
  /** Everything kept now (bounded windows: older slots are left out). */
  snapshot(nowMs?: number): ConsoleSnapshot;
  /**
   * What was counted since the last call (slot values are increments; `seen` and a violation's
   * lastSeenMs are the latest values; samples are the new ones), or undefined when nothing was.
   * Only kept when the recorder was made with `trackDelta: true`.
   */
  takeDelta(nowMs?: number): ConsoleSnapshot | undefined;
}

/** What an instance says of itself in its heartbeat (the fleet view's rows, before `stale`, `self`, `policyDiffers`). */
export interface InstanceBeat {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly version: string;
  readonly policyFingerprint: string;
  readonly ready: boolean;
  readonly reason: string | null;
  readonly startedAtMs: number;
  readonly lastReloadMs: number | null;
  readonly workers: number;
  /** When the beat was written (epoch ms). */
  readonly atMs: number;
}
