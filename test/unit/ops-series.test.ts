/**
 * SeriesHistogram (src/ops/series.ts) against prom-client's own Histogram: the same observations
 * fed to both, each in its own Registry, give the same exposition byte for byte (text and
 * OpenMetrics, with and without default labels), the same getMetricsAsJSON(), the same after
 * resetMetrics() (a bound series stays at 0, as the gateway's Histogram kept it with `zero()`),
 * and the same cluster aggregation (AggregatorRegistry.aggregate over two registries' JSON).
 */
import { AggregatorRegistry, Histogram, Registry, type RegistryContentType } from 'prom-client';
import t from 'tap';
import type { TapTest as Test } from '../helpers/assert.js';
import { OTEL_DURATION_BUCKETS } from '../../src/ops/metrics.js';
import { SeriesHistogram, type HistogramSeries } from '../../src/ops/series.js';

const NAME = 'http_server_request_duration_seconds';
const HELP = 'Duration of requests, with a \\ backslash and a\nnewline in its help.';
const LABEL_NAMES = ['http_request_method', 'http_route', 'http_response_status_code', 'error_type'];
/** Label sets as the gateway binds them (not in labelNames' order), and values that need escaping. */
const LABEL_SETS: ReadonlyArray<Record<string, string>> = [
  { http_request_method: 'GET', http_route: '/v1/pets', http_response_status_code: '200' },
  { http_route: '/v1/pets/{petId}', http_request_method: 'GET', http_response_status_code: '404' },
  { http_request_method: 'POST', http_route: 'a "quoted" \\ back\nslash', error_type: '_OTHER' },
  { http_request_method: 'DELETE', http_route: 'unknown', http_response_status_code: '5xx' }, // never observed
];

/** Observations: every bound exactly, 0, past the last bound, and a spread between (a fixed sequence). */
function observations(seed: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  OTEL_DURATION_BUCKETS.forEach((b, i) => out.push([i % 3, b]));
  out.push([0, 0], [1, 11], [2, 20_000], [0, 1e-9]);
  let x = seed;
  for (let i = 0; i < 500; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out.push([i % 3, (x % 12_000) / 1000]);
  }
  return out;
}

interface Pair {
  theirs: Registry<RegistryContentType>;
  ours: Registry<RegistryContentType>;
  /** Feeds one observation to series `i` of both. */
  observe(i: number, v: number): void;
  /** resetMetrics() on both; prom-client's forgets its series, so they are zeroed again as bound. */
  reset(): void;
}

function pair(options: { contentType?: RegistryContentType; defaultLabels?: Record<string, string> } = {}): Pair {
  const theirs = new Registry<RegistryContentType>();
  const ours = new Registry<RegistryContentType>();
  if (options.contentType !== undefined) {
    theirs.setContentType(options.contentType);
    ours.setContentType(options.contentType);
  }
  if (options.defaultLabels !== undefined) {
    theirs.setDefaultLabels(options.defaultLabels);
    ours.setDefaultLabels(options.defaultLabels);
  }
  const histogram = new Histogram({ name: NAME, help: HELP, buckets: [...OTEL_DURATION_BUCKETS], labelNames: LABEL_NAMES, registers: [theirs] });
  const series = new SeriesHistogram(ours, NAME, HELP, OTEL_DURATION_BUCKETS, LABEL_NAMES);
  const children = LABEL_SETS.map((labels) => {
    histogram.zero(labels);
    return histogram.labels(labels);
  });
  const bound: HistogramSeries[] = LABEL_SETS.map((labels) => series.bind(labels));
  return {
    theirs,
    ours,
    observe(i, v) {
      children[i]?.observe(v);
      bound[i]?.observe(v);
    },
    reset() {
      theirs.resetMetrics();
      for (const labels of LABEL_SETS) histogram.zero(labels);
      ours.resetMetrics();
    },
  };
}

async function same(t: Test, p: Pair, what: string): Promise<void> {
  const theirs = await p.theirs.metrics();
  t.equal(await p.ours.metrics(), theirs, `${what}: the exposition`);
  t.strictSame(await p.ours.getMetricsAsJSON(), await p.theirs.getMetricsAsJSON(), `${what}: getMetricsAsJSON()`);
}

t.test("the exposition is prom-client's Histogram's, byte for byte", async (t) => {
  const p = pair();
  await same(t, p, 'bound, nothing observed');
  for (const [i, v] of observations(7)) p.observe(i, v);
  const text = await p.ours.metrics();
  t.match(text, /^http_server_request_duration_seconds_bucket\{le="0\.005",http_request_method="GET",http_route="\/v1\/pets",http_response_status_code="200"\} \d+$/m, 'le first, then the labels as bound');
  t.match(text, /le="\+Inf",http_request_method="POST",http_route="a \\"quoted\\" \\\\ back\\nslash",error_type="_OTHER"\} \d+$/m, 'escaped label values');
  t.match(text, /^# HELP http_server_request_duration_seconds Duration of requests, with a \\\\ backslash and a\\nnewline in its help\.$/m, 'escaped help');
  await same(t, p, 'after observations');
  p.reset();
  await same(t, p, 'after resetMetrics()');
  t.match(await p.ours.metrics(), /^http_server_request_duration_seconds_count\{http_request_method="DELETE",http_route="unknown",http_response_status_code="5xx"\} 0$/m, 'a bound series stays, at 0');
  for (const [i, v] of observations(11)) p.observe(i, v);
  await same(t, p, 'observations after the reset');
});

t.test('the same with default labels and on an OpenMetrics registry', async (t) => {
  const withDefaults = pair({ defaultLabels: { instance: 'gw-1', http_route: 'default route' } });
  const openMetrics = pair({ contentType: Registry.OPENMETRICS_CONTENT_TYPE });
  for (const [i, v] of observations(3)) {
    withDefaults.observe(i, v);
    openMetrics.observe(i, v);
  }
  await same(t, withDefaults, 'default labels');
  await same(t, openMetrics, 'OpenMetrics');
});

t.test('the cluster aggregation of two registries is the same', async (t) => {
  const one = pair();
  const two = pair();
  for (const [i, v] of observations(5)) one.observe(i, v);
  for (const [i, v] of observations(9)) two.observe((i + 1) % 3, v);
  const theirs = AggregatorRegistry.aggregate([await one.theirs.getMetricsAsJSON(), await two.theirs.getMetricsAsJSON()]);
  const ours = AggregatorRegistry.aggregate([await one.ours.getMetricsAsJSON(), await two.ours.getMetricsAsJSON()]);
  const text = await ours.metrics();
  t.equal(text, await theirs.metrics(), 'the aggregated exposition');
  const observed = observations(5).length + observations(9).length;
  const counts = [...text.matchAll(/^http_server_request_duration_seconds_count\{.*\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
  t.equal(counts, observed, 'counts summed over both');
});

t.test('a value that is not a finite number >= 0 is not an observation', async (t) => {
  const r = new Registry();
  const s = new SeriesHistogram(r, NAME, HELP, [0.1, 1], ['route']).bind({ route: 'a' });
  for (const v of [Number.NaN, -1, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 0.5]) s.observe(v);
  const text = await r.metrics();
  t.match(text, /^http_server_request_duration_seconds_count\{route="a"\} 1$/m);
  t.match(text, /^http_server_request_duration_seconds_sum\{route="a"\} 0\.5$/m);
  t.match(text, /^http_server_request_duration_seconds_bucket\{le="0\.1",route="a"\} 0$/m);
  t.match(text, /^http_server_request_duration_seconds_bucket\{le="1",route="a"\} 1$/m);
});

t.test("prom-client's checks: names, the reserved le, undeclared labels, one metric per name", async (t) => {
  const r = new Registry();
  t.throws(() => new SeriesHistogram(r, 'bad-name', HELP, [1], []), /Invalid metric name/);
  t.throws(() => new SeriesHistogram(r, NAME, HELP, [1], ['le']), /le is a reserved label keyword/);
  const h = new SeriesHistogram(r, NAME, HELP, [1], ['route']);
  t.throws(() => h.bind({ route: 'a', other: 'b' }), /Added label "other" is not included/);
  t.throws(() => new SeriesHistogram(r, NAME, HELP, [1], ['route']), /already been registered/);
});
