/**
 * Series for the hot path, through prom-client's public API: each counter and histogram is a
 * prom-client `Counter` / `Histogram` in the gateway's own Registry, bound once per label set so a
 * request builds no label object. The registry, the exposition, `resetMetrics()` and the cluster
 * aggregation are prom-client's own.
 *
 * Cost: a histogram series is a bound child (`histogram.labels(...)`), which still validates and
 * hashes its labels on every observation (prom-client 15); a counter series is a plain number
 * handed to prom-client at each scrape (its `collect()` hook). bench/ops.mjs measures both against
 * the plain numbers they replace (BENCHMARKS.md, "Libraries").
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

/** One counter series as a plain number, published into the prom-client Counter at each scrape. */
class CountedSeries implements CounterSeries {
  value = 0;
  /** How much of `value` the prom-client Counter holds already. */
  published = 0;
  constructor(readonly labels: Readonly<Record<string, string>>) {}
  inc(): void {
    this.value++;
  }
}

/**
 * A counter metric in a prom-client Registry. A series counts in a plain number and prom-client's
 * `collect()` hook (called at each scrape) adds what was counted since the last one: a bound
 * Counter child validates and hashes its labels on every `inc()`, which a request would pay.
 * Bound series stay exported (at 0) after `Registry.resetMetrics()`: prom-client's reset forgets
 * every labelled series, and a `rate()` needs the series to exist before its first increment.
 */
export class SeriesCounter {
  private readonly series: CountedSeries[] = [];

  constructor(registry: Registry, name: string, help: string, labelNames: readonly string[]) {
    const series = this.series;
    new (class extends Counter {
      override reset(): void {
        super.reset();
        // Called by prom-client's constructor too, before `series` holds anything.
        for (const s of series) {
          s.value = 0;
          s.published = 0;
          this.inc(s.labels, 0);
        }
      }
    })({
      name,
      help,
      labelNames,
      registers: [registry],
      collect() {
        for (const s of series) {
          const value = s.value;
          this.inc(s.labels, value - s.published);
          s.published = value;
        }
      },
    });
  }

  /** A new series, exported at 0 from now on (the caller keeps it and never binds the same labels twice). */
  bind(labels: Record<string, string>): CounterSeries {
    const s = new CountedSeries(Object.freeze({ ...labels }));
    this.series.push(s);
    return s;
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
