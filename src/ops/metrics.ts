/**
 * The gateway's metrics, named after the OpenTelemetry HTTP semantic conventions in their
 * Prometheus form (`http.server.request.duration` -> `http_server_request_duration_seconds`, the
 * attribute `http.request.method` -> label `http_request_method`, ...), plus the gateway's own
 * `petstore_gateway_*` counters.
 *
 * The registry is this object's own, never prom-client's global one, so two gateways in one process
 * (the tests) never share series and the cluster primary can aggregate exactly what workers expose.
 *
 * Label sets are bounded, whatever a client sends (a flood of random paths, methods or keys creates
 * no series):
 * - `http_request_method`: the nine methods of RFC 9110 and PATCH (RFC 5789), case-sensitive; any
 *   other value is `_OTHER` (OpenTelemetry's rule for http.request.method);
 * - `http_route`: the record's RouteLabel (the interface's path templates, two in the shipped one, and `unknown`);
 * - `http_response_status_code`: a status of KNOWN_STATUSES, or its class (`4xx`, `5xx`...) for
 *   any other status 100..599; else the series carries `error_type` instead (`aborted` when the
 *   client went away before any status, `_OTHER` otherwise);
 * - `network_protocol_version` (server durations only): the HTTP version the client spoke, `1.0`,
 *   `1.1` or `2` (OpenTelemetry's network.protocol.version: HTTP/2 is `2`), any other value `_OTHER`;
 * - `consumer`: a configured key id (bounded by the config), capped anyway at `maxConsumers`
 *   (past it, `_OTHER`), as is every other label that comes from a record (`policy`, `code`).
 *
 * Envoy fixes its stat names and tags when the config loads so that the hot path only increments;
 * likewise every series is bound once, the first time its label set is seen, and kept in a Map
 * under a number computed from small indices, so recording a request builds no label object and no
 * key string, and costs a few additions on plain counts (src/ops/series.ts).
 */
import type { RegistryStatus } from '../registry/index.js';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { ExchangeObserver, ExchangeRecord } from '../core/record.js';
import { shippedApi } from '../api/index.js';
import { CATALOGUE } from '../core/errors.js';
import { UNKNOWN_ROUTE } from '../core/operations.js';
import { FAILURE_KINDS, type FailureKind } from '../core/upstream.js';
import { registerMigrationMetrics, type MigrationMetricCounts } from './migration-metrics.js';
import { SeriesCounter, SeriesHistogram, type CounterSeries, type HistogramSeries } from './series.js';
import { registerTraceMetrics } from './trace-metrics.js';
import type { TraceStats } from '../telemetry/open.js';

/**
 * OpenTelemetry's advised explicit bucket boundaries for http.server.request.duration and
 * http.client.request.duration, in seconds (semantic conventions, "HTTP metrics").
 */
export const OTEL_DURATION_BUCKETS: readonly number[] = Object.freeze([0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]);

/** The methods OpenTelemetry knows by default (RFC 9110 section 9 and PATCH); others are `_OTHER`. */
export const KNOWN_METHODS: readonly string[] = Object.freeze(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE']);

/** OpenTelemetry's value for a method, or an error type, outside the known set. */
export const OTHER = '_OTHER';

const METHOD_INDEX = new Map<string, number>(KNOWN_METHODS.map((m, i) => [m, i]));
const METHOD_NAMES = [...KNOWN_METHODS, OTHER];
const OTHER_METHOD = KNOWN_METHODS.length;
/**
 * The client's protocol, as OpenTelemetry's network.protocol.version writes it (`2`, not node's
 * `2.0`); index 3 is `_OTHER`. A label of four values at most: the record's version comes from
 * node's parser, but a fourth value must not grow the series whatever it is.
 */
const PROTOCOLS = ['1.1', '2', '1.0', OTHER] as const;
const PROTOCOL_INDEX = new Map<string | undefined, number>([['1.1', 0], ['2.0', 1], ['1.0', 2]]);
/** Status slots 0..599 are statuses; these two are the error types of a request without one. */
const SLOT_ABORTED = 600;
const SLOT_OTHER = 601;
/** Slots 602..606: the classes 1xx..5xx, for a status outside KNOWN_STATUSES. */
const SLOT_CLASS = 601;
const SLOTS = 1024;
/** Every label a duration series may carry (`bind` below sets a subset); prom-client checks them. */
const DURATION_LABELS: readonly string[] = ['http_request_method', 'http_route', 'http_response_status_code', 'error_type'];
/** The server histogram's labels: the client's protocol besides (prom-client refuses an undeclared label). */
const SERVER_DURATION_LABELS: readonly string[] = [...DURATION_LABELS, 'network_protocol_version'];

/**
 * The status codes that keep their own label value: the interface's successes (200, 201), every
 * status the gateway's error catalogue answers with, and the few an HTTP exchange commonly carries.
 * Any other status (an upstream may answer anything from 100 to 599) is folded into its class,
 * `1xx`..`5xx`, so an upstream cannot grow /metrics by varying its statuses.
 */
export const KNOWN_STATUSES: ReadonlySet<number> = new Set([
  100, 101, 200, 201, 202, 204, 206, 301, 302, 303, 304, 307, 308,
  ...Object.values(CATALOGUE).map((e) => e.status),
  400, 401, 403, 404, 405, 406, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 421, 422, 425, 426, 428, 429, 431,
  500, 501, 502, 503, 504, 505,
]);

function methodIndex(method: string): number {
  return METHOD_INDEX.get(method) ?? OTHER_METHOD;
}

/** The route labels' indexes in a series key: one per label, the last (`unknown`) for any other. */
function routeTable(routes: readonly string[]): { routes: readonly string[]; routeIndex: ReadonlyMap<string, number>; methodRoutes: number } {
  return { routes, routeIndex: new Map(routes.map((r, i) => [r, i])), methodRoutes: (KNOWN_METHODS.length + 1) * routes.length };
}

/** The route labels of an interface: its operations' path templates, then `unknown` (bounded by the document). */
export function routeLabelsOf(operations: readonly { readonly label: string }[]): readonly string[] {
  return [...new Set(operations.map((o) => o.label)), UNKNOWN_ROUTE];
}

function statusSlot(status: number): number {
  if (status === 0) return SLOT_ABORTED;
  if (!Number.isInteger(status) || status < 100 || status > 599) return SLOT_OTHER;
  return KNOWN_STATUSES.has(status) ? status : SLOT_CLASS + Math.floor(status / 100);
}

/**
 * A counter whose count is kept elsewhere (the store's failed commands, the log's dropped lines),
 * read at each scrape: the metric only reports it (a count that only grows). Absent: 0.
 */
function countedElsewhere(registry: Registry, name: string, help: string, read: (() => number) | undefined): void {
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read?.() ?? 0);
    },
  });
}

/**
 * The key registry's state (docs/keys.md), so that an instance cut off from Redis, or one whose
 * Redis lost the registry's data, is seen before keys fail. Labelled by the registry's Redis, so
 * that without a registry there is no series at all (not a misleading 0). With --workers each
 * worker has its own copy: the group's value is the worst one.
 */
function registryGauges(registry: Registry, read: (() => RegistryGauges | undefined) | undefined, upstreamReachable: (() => boolean) | undefined): void {
  // Beside them, the upstream's state, which readiness no longer follows by default.
  new Gauge({
    name: 'petstore_gateway_upstream_reachable',
    help: '1 while the upstream is reachable (no refused or timed-out connection since its last answer, or a connection opened again), else 0; readiness follows it only with server.admin.readiness.upstream (with --workers: the lowest).',
    registers: [registry],
    aggregator: 'min',
    collect() {
      this.set(upstreamReachable?.() === false ? 0 : 1);
    },
  });
  const gauge = (name: string, help: string, aggregator: 'min' | 'max', value: (s: RegistryGauges) => number | null) =>
    new Gauge({
      name,
      help,
      labelNames: ['redis'],
      registers: [registry],
      aggregator,
      collect() {
        this.reset();
        const s = read?.();
        const v = s === undefined ? null : value(s);
        if (s !== undefined && v !== null) this.set({ redis: s.redis }, v);
      },
    });
  gauge('petstore_gateway_key_registry_connected', '1 while the connection to the key registry\'s Redis is up, else 0 (with --workers: the lowest).', 'min', (s) => (s.connected ? 1 : 0));
  gauge(
    'petstore_gateway_key_registry_confirmed_age_seconds',
    "Seconds since the key registry's local copy was last confirmed current with Redis (a periodic check every syncIntervalMs); past maxStaleSeconds registry keys are refused. No value before the first read (with --workers: the highest).",
    'max',
    (s) => s.confirmedAgeSeconds,
  );
  gauge('petstore_gateway_key_registry_fresh', "1 while the key registry's local copy may answer (confirmed within maxStaleSeconds), else 0 (with --workers: the lowest).", 'min', (s) => (s.fresh ? 1 : 0));
  gauge('petstore_gateway_key_registry_keys', "Key ids in the key registry's local copy (with --workers: the highest).", 'max', (s) => s.keys);
  gauge(
    'petstore_gateway_key_registry_data_loss',
    "1 while Redis has lost the key registry's data and this process keeps its own copy until an operator runs keys import or keys reset-epoch, else 0 (with --workers: the highest).",
    'max',
    (s) => (s.dataLoss ? 1 : 0),
  );
  new Counter({
    name: 'petstore_gateway_key_registry_data_loss_total',
    help: "Times this process found that Redis lost the key registry's data (restart without persistence, FLUSHALL, failover to an empty replica).",
    labelNames: ['redis'],
    registers: [registry],
    collect() {
      this.reset();
      const s = read?.();
      if (s !== undefined) this.inc({ redis: s.redis }, s.dataLossDetected);
    },
  });
}

/**
 * What the overflow counter counts (its `event` label, a fixed list): connections closed past
 * server.maxPipelinedPerConnection, connections refused at the socket while their client is refused
 * after that (server.pipelineOverflowRefuseMs), or past server.maxConnectionsPerAddress; requests
 * that waited for a place of their consumer (server.maxInFlightPerConsumer), and those of them
 * answered 429 too_many_in_flight. No address and no consumer is a label: a flood creates no series.
 */
export const OVERFLOW_EVENTS = ['pipeline_closed', 'overflow_refused', 'address_share_refused', 'consumer_queued', 'consumer_expired', 'h2_stream_stalled', 'h2_session_not_reading', 'h2_rapid_reset'] as const;
export type OverflowEvent = (typeof OVERFLOW_EVENTS)[number];

/** What the key registry's gauges read (`KeyRegistry.status()`), at each scrape. */
export type RegistryGauges = RegistryStatus;

export interface GatewayMetricsOptions {
  /** Whether the upstream is reachable, as the traffic and readiness re-checks show it; read at each scrape. */
  readonly upstreamReachable?: () => boolean;
  /** The key registry's state, when a policy configures one; read at each scrape. Absent: no registry series. */
  readonly registry?: () => RegistryGauges | undefined;
  /** Whether the circuit breaker is open now; read at each scrape. Absent: the gauge reads 0. */
  readonly breakerOpen?: () => boolean;
  /** How many store commands failed so far (Redis away, ...); read at each scrape. */
  readonly storeErrors?: () => number;
  /** The response cache's counts of hits, misses, stale answers, coalesced and bypassing requests; read at each scrape. */
  readonly cacheCounts?: () => Readonly<Partial<Record<'hit' | 'miss' | 'stale' | 'coalesced' | 'bypass', number>>> | undefined;
  /** The connection and consumer bounds' counts (OVERFLOW_EVENTS); read at each scrape. */
  readonly overflowCounts?: () => Readonly<Partial<Record<OverflowEvent, number>>> | undefined;
  /** The migration lane's counts per operation, when it is on; read at each scrape. */
  readonly migrationCounts?: () => readonly MigrationMetricCounts[] | undefined;
  /** The trace exporter's counts, when tracing is on (the petstore_gateway_trace_* metrics). */
  readonly traceStats?: () => TraceStats | undefined;
  /** How many log lines were dropped so far (a log destination that could not keep up); read at each scrape. */
  readonly logDropped?: () => number;
  /** How many commands of the response cache's Redis store failed so far; read at each scrape. */
  readonly cacheStoreErrors?: () => number;
  /** Operations whose calls are counted per consumer (default: getPet, deprecated by the interface). */
  readonly deprecatedOperations?: readonly string[];
  /** The route labels (`routeLabelsOf(api.operations)`); the shipped interface's by default. */
  readonly routes?: readonly string[];
  /** Most distinct values of a label taken from a record (consumer, policy, code); past it `_OTHER`. Default 1000. */
  readonly maxLabelValues?: number;
  /** prom-client's process and Node metrics (default true). */
  readonly defaultMetrics?: boolean;
  /** A prefix for the default metrics only (prom-client's `prefix`); default none. */
  readonly defaultMetricsPrefix?: string;
}

type HistogramChild = HistogramSeries;
type CounterChild = CounterSeries;

/**
 * Children of one counter keyed by label values from records, at most `cap` distinct values per
 * label; later values fold into `_OTHER` (the guard behind "bounded by config").
 */
class CappedChildren {
  private readonly children = new Map<string, Map<string, CounterChild>>();
  private firstValues = 0;
  private readonly secondValues = new Set<string>();

  constructor(
    private readonly counter: SeriesCounter,
    private readonly names: readonly [string, string],
    private readonly cap: number,
  ) {}

  child(first: string, second: string): CounterChild {
    let inner = this.children.get(first);
    if (inner === undefined) {
      // `_OTHER` itself is always let in: without `first !== OTHER` the fold would call itself
      // for ever once the cap is reached (a stack overflow, and the record's later metrics lost).
      if (this.firstValues >= this.cap && first !== OTHER) return this.child(OTHER, second);
      this.firstValues++;
      inner = new Map();
      this.children.set(first, inner);
    }
    let c = inner.get(second);
    if (c === undefined) {
      if (!this.secondValues.has(second)) {
        if (this.secondValues.size >= this.cap && second !== OTHER) return this.child(first, OTHER);
        this.secondValues.add(second);
      }
      c = this.counter.bind({ [this.names[0]]: first, [this.names[1]]: second });
      inner.set(second, c);
    }
    return c;
  }
}

/**
 * The metrics of one gateway process: an ExchangeObserver (the exchange calls `onEnd` once per
 * finished request) owning its own prom-client Registry.
 *
 * @example
 *   const metrics = new GatewayMetrics({ breakerOpen: () => breaker.isOpen });
 *   exchange.observers.push(metrics);
 *   adminListener({ metrics: () => metrics.registry.metrics(), contentType: metrics.registry.contentType, ... });
 */
export class GatewayMetrics implements ExchangeObserver {
  readonly registry: Registry;
  private readonly serverDuration: SeriesHistogram;
  private readonly clientDuration: SeriesHistogram;
  private readonly serverChildren = new Map<number, HistogramChild>();
  private readonly clientChildren = new Map<number, HistogramChild>();
  private readonly clientFailureChildren = new Map<number, HistogramChild>();
  private readonly rejections: CappedChildren;
  private readonly deprecated: CappedChildren;
  private readonly deprecatedOps: ReadonlySet<string>;
  /** The route labels (the last is `unknown`) and each one's index in a series key. */
  private readonly routes: readonly string[];
  private readonly routeIndex: ReadonlyMap<string, number>;
  /** Method × route pairs: the protocol index multiplies this in a server series' key. */
  private readonly methodRoutes: number;
  private readonly failures: Readonly<Record<FailureKind, CounterChild>>;
  private readonly reloads: { readonly success: CounterChild; readonly failure: CounterChild };

  constructor(options: GatewayMetricsOptions = {}) {
    const registry = new Registry();
    this.registry = registry;
    const cap = options.maxLabelValues ?? 1000;
    this.deprecatedOps = new Set(options.deprecatedOperations ?? ['getPet']);
    ({ routes: this.routes, routeIndex: this.routeIndex, methodRoutes: this.methodRoutes } = routeTable(options.routes ?? routeLabelsOf(shippedApi().operations)));

    this.serverDuration = new SeriesHistogram(
      registry,
      'http_server_request_duration_seconds',
      'Duration of HTTP server requests, from arrival to the last byte written (OpenTelemetry http.server.request.duration).',
      OTEL_DURATION_BUCKETS,
      SERVER_DURATION_LABELS,
    );
    this.clientDuration = new SeriesHistogram(
      registry,
      'http_client_request_duration_seconds',
      'Duration of upstream requests, from sending to the end of the answer or the failure (OpenTelemetry http.client.request.duration).',
      OTEL_DURATION_BUCKETS,
      DURATION_LABELS,
    );
    const rejections = new SeriesCounter(registry, 'petstore_gateway_rejections_total', 'Requests a policy answered itself with an error, by policy and catalogue code.', ['policy', 'code']);
    this.rejections = new CappedChildren(rejections, ['policy', 'code'], cap);
    const deprecated = new SeriesCounter(registry, 'petstore_gateway_deprecated_requests_total', 'Calls of a deprecated operation (getPet, sunset 2030-12-05) by consumer (API key id).', ['operation', 'consumer']);
    this.deprecated = new CappedChildren(deprecated, ['operation', 'consumer'], cap);
    const failures = new SeriesCounter(registry, 'petstore_gateway_upstream_failures_total', 'Upstream calls that failed without an answer, by failure kind.', ['kind']);
    // Every kind is bound (and so exported as 0) from the start: a rate() needs the series before its first failure.
    this.failures = Object.fromEntries(FAILURE_KINDS.map((k) => [k, failures.bind({ kind: k })])) as Record<FailureKind, CounterChild>;

    const breakerOpen = options.breakerOpen;
    new Gauge({
      name: 'petstore_gateway_circuit_breaker_open',
      help: '1 while the circuit breaker in front of the upstream is open, else 0 (with --workers: 1 when open in any worker).',
      registers: [registry],
      // Workers each have their own breaker: the group's value is the largest (prom-client's cluster aggregation).
      aggregator: 'max',
      collect() {
        this.set(breakerOpen?.() === true ? 1 : 0);
      },
    });
    registryGauges(registry, options.registry, options.upstreamReachable);
    const reloads = new SeriesCounter(registry, 'petstore_gateway_policy_reloads_total', 'Policy file reloads (SIGHUP or file change), by result.', ['result']);
    this.reloads = { success: reloads.bind({ result: 'success' }), failure: reloads.bind({ result: 'failure' }) };

    countedElsewhere(registry, 'petstore_gateway_store_errors_total', 'Commands of the shared store (rate limits, deprecation ledger) that failed.', options.storeErrors);
    countedElsewhere(
      registry,
      'petstore_gateway_log_dropped_lines_total',
      'Log lines (access lines and operator messages) dropped because the log destination held its most unwritten bytes (64 MiB) or its reader went away.',
      options.logDropped,
    );

    countedElsewhere(
      registry,
      'petstore_gateway_cache_store_errors_total',
      "Commands of the response cache's Redis store that failed (Redis away or slower than 250 ms); each such request was answered from the upstream.",
      options.cacheStoreErrors,
    );

    const cacheCounts = options.cacheCounts;
    new Counter({
      name: 'petstore_gateway_cache_requests_total',
      help: 'Cacheable requests by what the response cache did: hit, miss (one upstream call), stale (a stale copy answered for a failing upstream), coalesced (waited for an identical miss), bypass (a request the cache does not keep: createPet, or an operation with a TTL of 0).',
      labelNames: ['result'],
      registers: [registry],
      collect() {
        const counts = cacheCounts?.();
        this.reset();
        for (const result of ['hit', 'miss', 'stale', 'coalesced', 'bypass'] as const) this.inc({ result }, counts?.[result] ?? 0);
      },
    });

    const overflowCounts = options.overflowCounts;
    new Counter({
      name: 'petstore_gateway_overflows_total',
      help: 'What the connection and consumer bounds did, by event: pipeline_closed (a connection closed past server.maxPipelinedPerConnection), overflow_refused (a connection refused during server.pipelineOverflowRefuseMs), address_share_refused (past server.maxConnectionsPerAddress), consumer_queued (a request waited for a place of its consumer, server.maxInFlightPerConsumer), consumer_expired (it waited server.consumerQueueMs and got 429), h2_stream_stalled (an HTTP/2 stream reset after server.streamStallTimeoutMs without progress), h2_session_not_reading (an HTTP/2 session ended for answers its client does not read), h2_rapid_reset (an HTTP/2 session ended for resetting too many streams).',
      labelNames: ['event'],
      registers: [registry],
      collect() {
        const counts = overflowCounts?.();
        this.reset();
        for (const event of OVERFLOW_EVENTS) this.inc({ event }, counts?.[event] ?? 0);
      },
    });

    registerMigrationMetrics(registry, options.migrationCounts);
    registerTraceMetrics(registry, options.traceStats);
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry, ...(options.defaultMetricsPrefix === undefined ? {} : { prefix: options.defaultMetricsPrefix }) });
  }

  /** Records one finished request. Never throws: a metrics fault must not fail a request. */
  onEnd(record: ExchangeRecord): void {
    try {
      this.record(record);
    } catch {
      // Unreachable by construction (values are finite, label sets bounded); the request matters more.
    }
  }

  /** Counts one policy reload (SIGHUP, file change): `ok` false when the new file was refused. */
  reloaded(ok: boolean): void {
    (ok ? this.reloads.success : this.reloads.failure).inc();
  }

  private record(r: ExchangeRecord): void {
    const m = methodIndex(r.method);
    const ri = this.routeIndex.get(r.route) ?? this.routes.length - 1;
    const mr = m * this.routes.length + ri;
    const p = PROTOCOL_INDEX.get(r.protocol) ?? 3;
    const key = (p * this.methodRoutes + mr) * SLOTS + statusSlot(r.status);
    let server = this.serverChildren.get(key);
    if (server === undefined) {
      server = this.bind(this.serverDuration, m, ri, statusSlot(r.status), undefined, PROTOCOLS[p]);
      this.serverChildren.set(key, server);
    }
    server.observe(r.durationMs / 1000);

    if (r.upstreamMs !== undefined) {
      let client: HistogramChild | undefined;
      if (r.upstreamStatus !== undefined) {
        const ck = mr * SLOTS + statusSlot(r.upstreamStatus);
        client = this.clientChildren.get(ck);
        if (client === undefined) {
          client = this.bind(this.clientDuration, m, ri, statusSlot(r.upstreamStatus), undefined);
          this.clientChildren.set(ck, client);
        }
      } else {
        // Failure kinds are a fixed list: index + 1, 0 for a call that ended without kind (the client left).
        const fi = r.upstreamFailure === undefined ? 0 : FAILURE_KINDS.indexOf(r.upstreamFailure) + 1;
        const fk = mr * 16 + fi;
        client = this.clientFailureChildren.get(fk);
        if (client === undefined) {
          client = this.bind(this.clientDuration, m, ri, -1, fi === 0 ? OTHER : (FAILURE_KINDS[fi - 1] ?? OTHER));
          this.clientFailureChildren.set(fk, client);
        }
      }
      client.observe(r.upstreamMs / 1000);
    }
    if (r.upstreamFailure !== undefined) this.failures[r.upstreamFailure]?.inc();
    if (r.rejectedBy !== undefined) this.rejections.child(r.rejectedBy, r.errorCode ?? OTHER).inc();
    if (r.operation !== undefined && r.consumer !== undefined && this.deprecatedOps.has(r.operation)) {
      this.deprecated.child(r.operation, r.consumer).inc();
    }
  }

  /** Binds one child, the only place label objects are built (once per series). */
  private bind(h: SeriesHistogram, method: number, route: number, slot: number, errorType: string | undefined, protocol?: string): HistogramChild {
    const labels: Record<string, string> = { http_request_method: METHOD_NAMES[method] ?? OTHER, http_route: this.routes[route] ?? UNKNOWN_ROUTE };
    if (protocol !== undefined) labels.network_protocol_version = protocol;
    if (errorType !== undefined) labels.error_type = errorType;
    else if (slot === SLOT_ABORTED) labels.error_type = 'aborted';
    else if (slot === SLOT_OTHER) labels.error_type = OTHER;
    else if (slot > SLOT_CLASS) labels.http_response_status_code = `${slot - SLOT_CLASS}xx`;
    else labels.http_response_status_code = String(slot);
    return h.bind(labels);
  }
}

/** The route label values of the shipped interface, for tests and dashboards. */
export const ROUTE_LABELS: readonly string[] = routeLabelsOf(shippedApi().operations);
