/**
 * Who still calls a deprecated operation (`GET /deprecations`): the report an operator
 * sends to the teams that must move before the sunset (getPet: 5 December 2030). The counts live
 * in a DeprecationLedger (src/stores: in memory, or in Redis shared by every instance); this module
 * feeds it from finished requests and shapes its rows into the report.
 */
import type { ExchangeObserver, ExchangeRecord } from '../core/record.js';
import type { DeprecationLedger, DeprecationUse } from '../stores/types.js';

/** A deprecated operation and its sunset (ISO 8601), as the deprecation policy knows them. */
export interface DeprecatedOperation {
  readonly operation: string;
  /** Undefined when neither the document nor the policy gives one. */
  readonly sunset: string | undefined;
}

export interface DeprecationReport {
  /** When the report was made, ISO 8601. */
  readonly generatedAt: string;
  readonly operations: ReadonlyArray<{
    readonly operation: string;
    /** null when the operation has no sunset yet. */
    readonly sunset: string | null;
    /** Every consumer (API key id) that called it, most calls first. */
    readonly consumers: ReadonlyArray<{ readonly consumer: string; readonly count: number; readonly firstSeen: string; readonly lastSeen: string }>;
  }>;
}

/**
 * Records each call of a deprecated operation by an authenticated consumer in the ledger, at the
 * time the request arrived. Calls without a consumer (refused by auth) have no one to tell.
 * Every call counts, whatever its status: a 404 or a 410 during a brownout still means the caller
 * has not moved.
 */
export class DeprecationRecorder implements ExchangeObserver {
  private readonly operations: ReadonlySet<string>;

  constructor(
    private readonly ledger: DeprecationLedger,
    operations: readonly string[] = ['getPet'],
  ) {
    this.operations = new Set(operations);
  }

  onEnd(r: ExchangeRecord): void {
    if (r.operation === undefined || r.consumer === undefined || !this.operations.has(r.operation)) return;
    try {
      this.ledger.record(r.operation, r.consumer, r.startedAt);
    } catch {
      // The ledger promises not to throw; if one does, the request is not the place to find out.
    }
  }
}

/**
 * Merges ledger rows from several processes (cluster workers with a memory ledger each): one row
 * per operation and consumer, counts added, the earliest first sighting and the latest last one.
 */
export function mergeUses(lists: ReadonlyArray<ReadonlyArray<DeprecationUse>>): DeprecationUse[] {
  const merged = new Map<string, DeprecationUse>();
  for (const list of lists) {
    for (const u of list) {
      const key = `${u.operation}\n${u.consumer}`;
      const seen = merged.get(key);
      if (seen === undefined) {
        merged.set(key, { operation: u.operation, consumer: u.consumer, count: u.count, firstSeen: u.firstSeen, lastSeen: u.lastSeen });
      } else {
        merged.set(key, {
          operation: u.operation,
          consumer: u.consumer,
          count: seen.count + u.count,
          firstSeen: Date.parse(u.firstSeen) < Date.parse(seen.firstSeen) ? u.firstSeen : seen.firstSeen,
          lastSeen: Date.parse(u.lastSeen) > Date.parse(seen.lastSeen) ? u.lastSeen : seen.lastSeen,
        });
      }
    }
  }
  return [...merged.values()];
}

/**
 * The report: every deprecated operation (with no consumer yet: an empty list), its sunset, and
 * its consumers by most calls, then by consumer id. Rows of operations not listed are left out.
 */
export function deprecationReport(uses: ReadonlyArray<DeprecationUse>, deprecated: ReadonlyArray<DeprecatedOperation>, now: number = Date.now()): DeprecationReport {
  return {
    generatedAt: new Date(now).toISOString(),
    operations: deprecated.map((d) => ({
      operation: d.operation,
      sunset: d.sunset ?? null,
      consumers: uses
        .filter((u) => u.operation === d.operation)
        .sort((a, b) => b.count - a.count || (a.consumer < b.consumer ? -1 : a.consumer > b.consumer ? 1 : 0))
        .map((u) => ({ consumer: u.consumer, count: u.count, firstSeen: u.firstSeen, lastSeen: u.lastSeen })),
    })),
  };
}
