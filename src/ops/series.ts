/**
 * Series for the hot path, through prom-client's public API: each counter and histogram is a
 * prom-client `Counter` / `Histogram` in the gateway's own Registry, and a series is its bound
 * child (`metric.labels(...)`), bound once per label set so a request builds no label object.
 * The registry, the exposition, `resetMetrics()` and the cluster aggregation are prom-client's own.
 *
 * Cost: a bound child still validates and hashes its labels on every call (prom-client 15);
 * bench/ops.mjs measures it against plain numbers at well under 3% of a route's CPU per request
 * (BENCHMARKS.md, "Libraries").
 */
import { Counter, Histogram, type Registry } from 'prom-client';

/** One counter series: labels fixed when bound, a count that only grows. */
export interface CounterSeries {
  inc(): void;
}

/** One histogram series: labels fixed when bound. */
export interface HistogramSeries {
  /** Adds one observation; a value that is not a finite number >= 0 is not one, and is dropped. */
  observe(value: number): void;
}

/**
 * A prom-client Counter whose bound series stay exported (at 0) after `Registry.resetMetrics()`:
 * prom-client's reset forgets every labelled series, and a `rate()` needs the series to exist
 * before its first increment.
 */
class KeptCounter extends Counter {
  // Not initialised here: prom-client's constructor calls reset() before subclass fields exist.
  private bound: Array<Record<string, string>> | undefined;

  keep(labels: Record<string, string>): void {
    (this.bound ??= []).push(labels);
    this.inc(labels, 0);
  }

  override reset(): void {
    super.reset();
    for (const labels of this.bound ?? []) this.inc(labels, 0);
  }
}

/** A counter metric in a prom-client Registry; see KeptCounter for what a reset keeps. */
export class SeriesCounter {
  private readonly counter: KeptCounter;

  constructor(registry: Registry, name: string, help: string, labelNames: readonly string[]) {
    this.counter = new KeptCounter({ name, help, labelNames, registers: [registry] });
  }

  /** A new series, exported at 0 from now on (the caller keeps it and never binds the same labels twice). */
  bind(labels: Record<string, string>): CounterSeries {
    const fixed = Object.freeze({ ...labels });
    this.counter.keep(fixed);
    const child = this.counter.labels(fixed);
    return { inc: () => child.inc() };
  }
}

/** A prom-client Histogram whose bound series stay exported (at 0) after a reset, as KeptCounter. */
class KeptHistogram extends Histogram {
  private bound: Array<Record<string, string>> | undefined;

  keep(labels: Record<string, string>): void {
    (this.bound ??= []).push(labels);
    this.zero(labels);
  }

  override reset(): void {
    super.reset();
    for (const labels of this.bound ?? []) this.zero(labels);
  }
}

/** A histogram metric in a prom-client Registry (cumulative `_bucket` per bound and +Inf, `_sum`, `_count`). */
export class SeriesHistogram {
  private readonly histogram: KeptHistogram;

  constructor(registry: Registry, name: string, help: string, buckets: readonly number[], labelNames: readonly string[]) {
    this.histogram = new KeptHistogram({ name, help, buckets: [...buckets], labelNames, registers: [registry] });
  }

  /** A new series, exported (count 0) from now on. */
  bind(labels: Record<string, string>): HistogramSeries {
    const fixed = Object.freeze({ ...labels });
    this.histogram.keep(fixed);
    const child = this.histogram.labels(fixed);
    return {
      observe(value: number): void {
        // prom-client throws on a value that is not finite; a record never carries one, but a
        // metric must not fail a request.
        if (value >= 0 && value < Number.POSITIVE_INFINITY) child.observe(value);
      },
    };
  }
}
