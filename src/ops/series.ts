/**
 * Series for the hot path, bound once per label set so a request builds no label object, all in
 * the gateway's own prom-client Registry: the registry, the exposition, `resetMetrics()`,
 * `getMetricsAsJSON()` and the cluster aggregation are prom-client's own.
 *
 * - A counter is a prom-client `Counter`; a series counts in a plain number that the Counter's
 *   `collect()` hook (called at each scrape) publishes.
 * - A histogram is not a prom-client `Histogram`: in prom-client 15 a bound child still validates
 *   and hashes its labels and keys its buckets by number on every observation. A series here is
 *   plain per-bucket counts, a sum and a count, and the metric is registered as an object of
 *   prom-client's metric shape whose `get()` returns what prom-client's Histogram returns for the
 *   same observations (the way prom-client's AggregatorRegistry registers what it aggregates);
 *   test/unit/ops-series.test.ts compares the two expositions byte for byte.
 */
import { Counter, validateMetricName, type Histogram, type Registry, type RegistryContentType } from 'prom-client';

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

/**
 * One histogram series: per-bucket counts (not cumulative; the last one counts the observations
 * past the largest bound), the sum and the count.
 */
class CountedHistogramSeries implements HistogramSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Readonly<Record<string, string>>,
    private readonly bounds: Float64Array,
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    // Not an observation (prom-client throws on a value that is not finite); a record never
    // carries one, but a metric must not fail a request.
    if (!(value >= 0 && value < Number.POSITIVE_INFINITY)) return;
    const bounds = this.bounds;
    let i = 0;
    // A bucket's bound is inclusive (`le`, "less than or equal"), as in Prometheus.
    while (i < bounds.length && value > (bounds[i] as number)) i++;
    this.counts[i] = (this.counts[i] as number) + 1;
    this.sum += value;
    this.count++;
  }

  reset(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }
}

/**
 * One value of prom-client's histogram shape: `get()` returns bucket values with `le` first among
 * the labels and the series' labels after it; the exposition reads the series' labels from
 * `sharedLabels` (formatted once per label object).
 */
interface HistogramValue {
  value: number;
  labels: Record<string, string | number>;
  sharedLabels?: Readonly<Record<string, string>>;
  metricName: string;
  exemplar?: null;
}

interface HistogramData {
  name: string;
  help: string;
  type: 'histogram';
  values: HistogramValue[];
  aggregator: 'sum';
}

/**
 * A histogram metric in a prom-client Registry (cumulative `_bucket` per bound and +Inf, `_sum`,
 * `_count`), in plain counts: prom-client's own Histogram `observe` costs a route more than the 3%
 * allowed a library's public API (docs/choices.md, "Libraries").
 */
export class SeriesHistogram {
  private readonly series: CountedHistogramSeries[] = [];
  private readonly bounds: Float64Array;
  /** The bounds as given: `le` is written from these numbers, as prom-client writes it. */
  private readonly upperBounds: readonly number[];
  private readonly labelNames: ReadonlySet<string>;

  constructor(
    registry: Registry<RegistryContentType>,
    readonly name: string,
    readonly help: string,
    buckets: readonly number[],
    labelNames: readonly string[],
  ) {
    // The checks prom-client's Histogram makes when it is created.
    if (!validateMetricName(name)) throw new Error('Invalid metric name');
    if (labelNames.includes('le')) throw new Error('le is a reserved label keyword');
    this.upperBounds = Object.freeze([...buckets]);
    this.bounds = Float64Array.from(buckets);
    this.labelNames = new Set(labelNames);
    const metric = {
      name,
      help,
      type: 'histogram' as const,
      aggregator: 'sum' as const,
      // The Registry formats the exposition through this when a metric has it, as it does
      // prom-client's Histogram, so default labels fall where they fall for a Histogram.
      getForPromString: async (): Promise<HistogramData> => this.data(),
      get: async (): Promise<HistogramData> => {
        const data = this.data();
        data.values = data.values.map(splay);
        return data;
      },
      reset: (): void => {
        for (const s of this.series) s.reset();
      },
    };
    // prom-client's types name only its own metric classes, while its Registry takes any object
    // of this shape (its AggregatorRegistry registers plain objects: lib/cluster.js).
    registry.registerMetric(metric as unknown as Histogram);
  }

  /** A new series, exported (count 0) from now on (the caller never binds the same labels twice). */
  bind(labels: Record<string, string>): HistogramSeries {
    // As prom-client's `labels()`: a label the metric does not declare is a programming error.
    for (const n of Object.keys(labels)) {
      if (!this.labelNames.has(n)) throw new Error(`Added label "${n}" is not included in initial labelset: ${[...this.labelNames].join(', ')}`);
    }
    const s = new CountedHistogramSeries(Object.freeze({ ...labels }), this.bounds);
    this.series.push(s);
    return s;
  }

  /** The values as prom-client's Histogram builds them for the exposition (`getForPromString`). */
  private data(): HistogramData {
    const values: HistogramValue[] = [];
    const bounds = this.upperBounds;
    const bucket = `${this.name}_bucket`;
    for (const s of this.series) {
      let acc = 0;
      for (let i = 0; i < bounds.length; i++) {
        acc += s.counts[i] as number;
        values.push({ labels: { le: bounds[i] as number }, sharedLabels: s.labels, value: acc, metricName: bucket, exemplar: null });
      }
      values.push(
        { labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: bucket, exemplar: null },
        { labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${this.name}_sum`, exemplar: undefined },
        { labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${this.name}_count`, exemplar: undefined },
      );
    }
    return { name: this.name, help: this.help, type: 'histogram', values, aggregator: 'sum' };
  }
}

/** A value as `get()` returns it: the series' labels after `le`, in one object. */
function splay({ sharedLabels, labels, ...rest }: HistogramValue): HistogramValue {
  return { ...rest, labels: { ...labels, ...sharedLabels } };
}
