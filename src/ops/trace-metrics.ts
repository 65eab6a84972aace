/**
 * Tracing's metrics (docs/operations.md, "Traces"), read from the exporter's counts at each
 * scrape, the way the cache's are: what became of each kept span, what each export request did,
 * and how many spans wait. Label values are fixed lists. With --workers the primary's aggregation
 * sums them.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { TraceStats } from '../telemetry/open.js';

type Read = (() => TraceStats | undefined) | undefined;

export const SPAN_OUTCOMES = ['exported', 'dropped', 'failed', 'tail_limited'] as const;
export const EXPORT_RESULTS = ['ok', 'retried', 'failed'] as const;

export function registerTraceMetrics(registry: Registry, read: Read): void {
  new Counter({
    name: 'petstore_gateway_trace_spans_total',
    help: 'Spans of kept traces by outcome: exported (the collector took them), dropped (the queue was full: telemetry.traces.batch.maxQueueSpans), failed (the collector refused them, or did not answer within the retries), tail_limited (kept by their outcome alone past telemetry.traces.maxTailPerSecond: not queued).',
    labelNames: ['outcome'],
    registers: [registry],
    collect() {
      const s = read?.();
      this.reset();
      for (const outcome of SPAN_OUTCOMES) this.inc({ outcome }, (outcome === 'tail_limited' ? s?.tailLimited : s?.[outcome]) ?? 0);
    },
  });
  new Counter({
    name: 'petstore_gateway_trace_exports_total',
    help: 'Export requests to the collector by result: ok, retried (a retryable failure: 429, 502, 503, 504, a timeout or a broken connection, sent again after a backoff), failed (given up).',
    labelNames: ['result'],
    registers: [registry],
    collect() {
      const s = read?.();
      this.reset();
      for (const result of EXPORT_RESULTS) this.inc({ result }, s?.exports[result] ?? 0);
    },
  });
  new Gauge({
    name: 'petstore_gateway_trace_queue_spans',
    help: 'Spans waiting for export now.',
    registers: [registry],
    collect() {
      this.set(read?.()?.queued ?? 0);
    },
  });
}
