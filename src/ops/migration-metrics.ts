/**
 * The migration lane's metrics (docs/migration.md), read from its tally at each scrape, the way
 * the cache's counts are: counters of what was routed, fell back, dropped, compared and failed,
 * per operation. Labels are the operation (bounded by the interface, at most 256) and a value of a
 * fixed list (`side`, `reason`, `result`, `kind`); never a field path or a value, which the
 * report (/migration) holds instead. With --workers the primary's aggregation sums them.
 */
import { Counter, type Registry } from 'prom-client';

/** One operation's counts as the tally gives them (src/migration/tally.ts `metricCounts`). */
export interface MigrationMetricCounts {
  readonly operation: string;
  readonly routed: Readonly<Record<string, number>>;
  readonly comparisons: { readonly equal: number; readonly different: number };
  readonly fallbacks: Readonly<Record<string, number>>;
  readonly dropped: Readonly<Record<string, number>>;
  readonly nextErrors: Readonly<Record<string, number>>;
  readonly violations: number;
}

type Read = (() => readonly MigrationMetricCounts[] | undefined) | undefined;

/** A counter set anew from the tally at each scrape, one series per operation and `label` value. */
function byOperation(registry: Registry, name: string, help: string, label: string | undefined, read: Read, values: (c: MigrationMetricCounts) => Readonly<Record<string, number>> | number): void {
  new Counter({
    name,
    help,
    labelNames: label === undefined ? ['operation'] : ['operation', label],
    registers: [registry],
    collect() {
      this.reset();
      for (const c of read?.() ?? []) {
        const v = values(c);
        if (typeof v === 'number' || label === undefined) this.inc({ operation: c.operation }, typeof v === 'number' ? v : 0);
        else for (const [k, n] of Object.entries(v)) this.inc({ operation: c.operation, [label]: k }, n);
      }
    },
  });
}

/** Registers the six migration counters on `registry`; without a lane (`read` gives nothing) they have no series. */
export function registerMigrationMetrics(registry: Registry, read: Read): void {
  byOperation(registry, 'petstore_gateway_migration_requests_total', 'Requests of an operation in the migration lane, by the side that answered them: legacy or next.', 'side', read, (c) => c.routed);
  byOperation(
    registry,
    'petstore_gateway_migration_fallbacks_total',
    'Requests sent to next (split, next mode) that failed in a way safe to repeat and were answered from legacy, by reason: refused, reset, timeout, invalid_response, tls, contract, open_circuit.',
    'reason',
    read,
    (c) => c.fallbacks,
  );
  byOperation(registry, 'petstore_gateway_migration_shadow_dropped_total', 'Shadow copies not sent to next, by reason: in_flight (past shadow.maxInFlight), body, method, sampled_out.', 'reason', read, (c) => c.dropped);
  byOperation(registry, 'petstore_gateway_migration_comparisons_total', "Shadow copies whose answer was compared with legacy's, by result: equal or different.", 'result', read, (c) => c.comparisons);
  byOperation(registry, 'petstore_gateway_migration_next_errors_total', 'Calls to next (shadow copies and routed requests) that failed, by kind.', 'kind', read, (c) => c.nextErrors);
  byOperation(registry, 'petstore_gateway_migration_next_violations_total', "Answers of next outside the interface (the response contract's rules).", undefined, read, (c) => c.violations);
}
