/** A DeprecationLedger in a Map, for the operations tests (the real ones live in src/stores). */
import type { DeprecationLedger, DeprecationUse } from '../../src/stores/types.js';

export function fakeLedger(): DeprecationLedger & { fail: boolean } {
  const rows = new Map<string, { operation: string; consumer: string; count: number; first: number; last: number }>();
  const ledger = {
    fail: false,
    record(operation: string, consumer: string, atMs: number): void {
      const key = `${operation}\n${consumer}`;
      const row = rows.get(key);
      if (row === undefined) rows.set(key, { operation, consumer, count: 1, first: atMs, last: atMs });
      else {
        row.count++;
        row.first = Math.min(row.first, atMs);
        row.last = Math.max(row.last, atMs);
      }
    },
    async report(): Promise<DeprecationUse[]> {
      if (ledger.fail) throw new Error('ledger unreachable');
      return [...rows.values()].map((r) => ({ operation: r.operation, consumer: r.consumer, count: r.count, firstSeen: new Date(r.first).toISOString(), lastSeen: new Date(r.last).toISOString() }));
    },
    async close(): Promise<void> {},
  };
  return ledger;
}
