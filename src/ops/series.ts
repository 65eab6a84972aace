/**
 * Series storage for the hot path: a request's metrics are a few additions on objects bound once
 * per label set, and prom-client reads them only when scraped.
 *
 * Why not prom-client's own children (`histogram.labels(...).observe(v)`): a bound child still
 * validates its labels, builds a hash string and a value pair on every call (prom-client 15
 * lib/histogram.js `observe`), a cost per observation and garbage on every request;
 * these series cost an array index and two additions (bench/ops.mjs). The exposition, its format,
 * the registry and the cluster aggregation stay prom-client's:
 * each counter and histogram is registered as a metric object whose `get()` returns prom-client's
 * own values shape (the way prom-client's AggregatorRegistry registers the metrics it aggregates),
 * so Registry.metrics(), getMetricsAsJSON(), resetMetrics() and the cluster aggregation treat them
 * as their own.
 */
import type { Registry } from 'prom-client';

/** One counter series: labels fixed when bound, a number that only grows. */
export class CounterSeries {
  value = 0;
  constructor(readonly labels: Readonly<Record<string, string>>) {}
  inc(): void {
    this.value++;
  }
}

/** A counter metric in a prom-client Registry, fed through CounterSeries. */
export class SeriesCounter {
  private readonly series: CounterSeries[] = [];

  constructor(registry: Registry, name: string, help: string) {
    const series = this.series;
    register(registry, {
      name,
      help,
      type: 'counter',
      aggregator: 'sum',
      get: async () => ({ name, help, type: 'counter', aggregator: 'sum', values: series.map((s) => ({ value: s.value, labels: { ...s.labels } })) }),
      reset: () => {
        for (const s of series) s.value = 0;
      },
    });
  }

  /** A new series (the caller keeps it and never binds the same labels twice). */
  bind(labels: Record<string, string>): CounterSeries {
    const s = new CounterSeries(Object.freeze({ ...labels }));
    this.series.push(s);
    return s;
  }
}

/** One histogram series: per-bucket counts (not cumulative; the last one is +Inf), sum, count. */
export class HistogramSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Readonly<Record<string, string>>,
    private readonly bounds: Float64Array,
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  /** Adds one observation; a value that is not a finite number >= 0 is not one, and is dropped. */
  observe(value: number): void {
    if (!(value >= 0 && value < Number.POSITIVE_INFINITY)) return;
    const bounds = this.bounds;
    let i = 0;
    // Bucket upper bounds are inclusive (le = "less than or equal"), as in Prometheus.
    while (i < bounds.length && value > (bounds[i] as number)) i++;
    this.counts[i] = (this.counts[i] as number) + 1;
    this.sum += value;
    this.count++;
  }
}

type Value = { value: number; labels: Record<string, string | number>; metricName?: string };

interface MetricObject {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'histogram';
  readonly aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: 'counter' | 'histogram'; aggregator: 'sum'; values: Value[] }>;
  reset(): void;
}

/** Registers a metric object of prom-client's shape (name, help, type, aggregator, get); see the module comment. */
function register(registry: Registry, metric: MetricObject): void {
  registry.registerMetric(metric as unknown as Parameters<Registry['registerMetric']>[0]);
}

/** A histogram metric in a prom-client Registry, fed through HistogramSeries. */
export class SeriesHistogram {
  private readonly series: HistogramSeries[] = [];
  private readonly bounds: Float64Array;

  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
    buckets: readonly number[],
  ) {
    this.bounds = Float64Array.from(buckets);
    register(registry, {
      name,
      help,
      type: 'histogram',
      aggregator: 'sum',
      get: async () => ({ name, help, type: 'histogram', aggregator: 'sum', values: this.values() }),
      reset: () => {
        for (const s of this.series) {
          s.counts.fill(0);
          s.sum = 0;
          s.count = 0;
        }
      },
    });
  }

  bind(labels: Record<string, string>): HistogramSeries {
    const s = new HistogramSeries(Object.freeze({ ...labels }), this.bounds);
    this.series.push(s);
    return s;
  }

  /** prom-client's histogram values: cumulative `_bucket` per bound and +Inf, then `_sum`, `_count`. */
  private values(): Value[] {
    const out: Value[] = [];
    for (const s of this.series) {
      let acc = 0;
      for (let i = 0; i <= this.bounds.length; i++) {
        acc += s.counts[i] as number;
        const le = i < this.bounds.length ? (this.bounds[i] as number) : '+Inf';
        out.push({ value: acc, labels: { ...s.labels, le }, metricName: `${this.name}_bucket` });
      }
      out.push({ value: s.sum, labels: { ...s.labels }, metricName: `${this.name}_sum` });
      out.push({ value: s.count, labels: { ...s.labels }, metricName: `${this.name}_count` });
    }
    return out;
  }
}
