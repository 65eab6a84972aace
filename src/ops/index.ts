/**
 * Operations, assembled for one process: the observers every finished request feeds (metrics, the
 * access log, the deprecation report), and what the admin listener reads (readiness, metrics, the
 * report). The CLI builds this once; an embedder may build it too and pass `ops.observer` to an
 * engine or the Fastify plugin.
 */
import { connect } from 'node:net';
import type { Logger } from 'pino';
import type { ExchangeObserver, ExchangeRecord } from '../core/record.js';
import { openDeprecationLedger, openStores } from '../stores/index.js';
import type { DeprecationLedger, StoreConfig } from '../stores/types.js';
import { AccessLog, type ConsumerInfo, type LogConfig } from './access-log.js';
import { droppedLogLines } from './log-destination.js';
import { READY, type Readiness } from './admin.js';
import { shippedApi } from '../api/index.js';
import { deprecatedOperations, type LifecycleOverrides } from '../api/lifecycle.js';
import type { ApiOperation } from '../api/model.js';
import { type DeprecatedOperation, DeprecationRecorder, deprecationReport, type DeprecationReport } from './deprecations.js';
import { GatewayMetrics, routeLabelsOf, type GatewayMetricsOptions } from './metrics.js';
import { openRegistries, type RegistryStatus } from '../registry/index.js';
import { ConsoleRecorder } from './console/series.js';

/** Runs every observer; one that throws does not keep the others from their record. */
export class Observers implements ExchangeObserver {
  constructor(private readonly list: ReadonlyArray<ExchangeObserver>) {}

  onEnd(record: ExchangeRecord): void {
    for (const o of this.list) {
      try {
        o.onEnd(record);
      } catch {
        // An observer's fault must not fail the request or the other observers.
      }
    }
  }
}

/** Where an unreachable upstream is re-checked: its TCP address and how long a connect may take. */
export interface UpstreamAddress {
  readonly host: string;
  readonly port: number;
  readonly timeoutMs: number;
}

/** The TCP address of an upstream URL (`builtin` has none: it is in process and always reachable). */
export function upstreamAddress(url: string, connectMs: number): UpstreamAddress | undefined {
  if (url === 'builtin') return undefined;
  const u = new URL(url);
  const port = u.port === '' ? (u.protocol === 'https:' ? 443 : 80) : Number(u.port);
  // URL keeps the brackets of an IPv6 literal; net.connect wants the bare address.
  const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
  // Bounded by 1 s as well: a Kubernetes probe gives up after 1 s by default (timeoutSeconds).
  return { host, port, timeoutMs: Math.min(connectMs, 1000) };
}

/** Whether a TCP connection to the address opens within its timeout (it is closed at once). */
export function canConnect(at: UpstreamAddress): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: at.host, port: at.port });
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), at.timeoutMs);
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * Whether the upstream answers, as the traffic shows it: unreachable from a call whose connection
 * was refused (or timed out connecting) until the next call that got an answer. (With a circuit
 * breaker, its state says more.)
 *
 * Traffic alone cannot bring it back: once /readyz says 503, a load balancer sends this gateway no
 * more requests, so no call would ever succeed again and the gateway would stay out of rotation
 * after the upstream is back (with every instance seeing the same outage, the whole service would).
 * So while unreachable, each readiness check (`recheck`) also tries one TCP connection to the
 * upstream, the same test the failure was (refused, connect timeout): when it opens, the upstream
 * is reachable again.
 */
export class UpstreamHealth implements ExchangeObserver {
  reachable = true;
  private checking: Promise<void> | undefined = undefined;

  constructor(
    private readonly address?: UpstreamAddress,
    private readonly tryConnect: (at: UpstreamAddress) => Promise<boolean> = canConnect,
  ) {}

  onEnd(record: ExchangeRecord): void {
    if (record.upstreamStatus !== undefined) this.reachable = true;
    else if (record.upstreamFailure === 'refused' || record.upstreamFailure === 'connect_timeout') this.reachable = false;
  }

  /** Whether the upstream is reachable; when it was not, after one connection attempt (shared by concurrent checks). */
  async recheck(): Promise<boolean> {
    const address = this.address;
    if (this.reachable || address === undefined) return this.reachable;
    this.checking ??= this.tryConnect(address).then(
      (ok) => {
        this.checking = undefined;
        if (ok) this.reachable = true;
      },
      () => {
        this.checking = undefined;
      },
    );
    await this.checking;
    return this.reachable;
  }
}

/** Where the process is in its life, for /readyz. */
export type Phase = 'starting' | 'serving' | 'draining';

export interface Ops {
  readonly observer: ExchangeObserver;
  readonly metrics: GatewayMetrics;
  readonly accessLog: AccessLog | undefined;
  readonly ledger: DeprecationLedger;
  readonly health: UpstreamHealth;
  readonly deprecated: ReadonlyArray<DeprecatedOperation>;
  /** The console's counts (src/ops/console), unless `server.admin.console` is false or the admin listener is off. */
  readonly console: ConsoleRecorder | undefined;
  /** The deprecated operations of the policy in force, with their sunsets (a reload may change them). */
  deprecatedNow(): DeprecatedOperation[];
  /**
   * Ready, or why not, with what it looked at in `detail` (the upstream; the key registry, when a
   * policy names one). While the upstream is marked unreachable, after one connection attempt to
   * it. The upstream (breaker open, unreachable) makes the gateway not ready only with
   * `server.admin.readiness.upstream: true`: every replica shares one upstream, and a 503 on all of
   * them takes the whole service out of rotation, so clients get refused connections instead of
   * the Error shape.
   */
  readiness(phase: Phase): Promise<Readiness>;
  deprecations(): Promise<DeprecationReport>;
  /** Flushes the access log (after the drain). */
  close(): Promise<void>;
}

export interface OpsOptions {
  /** The process's root logger: access lines share its destination (one writer on stdout). */
  readonly log: Logger;
  /** Whether the circuit breaker is open now. */
  readonly breakerOpen: () => boolean;
  /** The response cache's counts, when there is a cache. */
  readonly cacheCounts?: () => Readonly<Partial<Record<'hit' | 'miss' | 'stale' | 'coalesced' | 'bypass', number>>> | undefined;
  /** Failed commands of the response cache's Redis store, when there is one. */
  readonly cacheStoreErrors?: () => number;
  /** The migration lane's counts, when it is on (the petstore_gateway_migration_* metrics). */
  readonly migrationCounts?: GatewayMetricsOptions['migrationCounts'];
  /** The trace exporter's counts, when tracing is on (the petstore_gateway_trace_* metrics). */
  readonly traceStats?: GatewayMetricsOptions['traceStats'];
  /** The connection and consumer bounds' counts (petstore_gateway_overflows_total). */
  readonly overflowCounts?: GatewayMetricsOptions['overflowCounts'];
  /** Prometheus default process metrics; off in tests that start many gateways. */
  readonly defaultMetrics?: boolean;
  /**
   * The policy in force now (after reloads); absent, the one given to `createOps`. Readiness (the
   * rate limit's `onStoreError`), the access line's consumer details and the deprecation report's
   * sunset read it at each use, so a reload changes them as it changes the chain.
   */
  readonly current?: () => OpsConfig;
}

/**
 * What operations read of a validated policy file, written out here so that ops depends on no
 * policy module and not on the config folder (which composes ops' own schemas): a `PolicyConfig`
 * fits it as it is.
 */
export interface OpsConfig {
  readonly upstream: { readonly url: string; readonly timeouts: { readonly connectMs: number } };
  /** `server.admin.readiness.upstream`: whether the upstream's state decides readiness (default no). */
  readonly server?: { readonly admin?: { readonly readiness?: { readonly upstream?: boolean }; readonly console?: boolean } | null };
  readonly log: LogConfig;
  readonly policies: {
    readonly auth: { readonly keys: ReadonlyArray<{ readonly id: string; readonly expires?: string; readonly operations?: ReadonlyArray<string> }> };
    readonly 'rate-limit': { readonly store: StoreConfig; readonly onStoreError: 'open' | 'closed' };
    readonly deprecation: LifecycleOverrides;
  };
  /** The compiled interface (the loader sets it); the shipped one when absent. */
  readonly api?: { readonly operations: readonly ApiOperation[] };
}

/** The key registry's part of /readyz's detail (docs/keys.md); never a key or a hash. */
function registryDetail(s: RegistryStatus): Record<string, unknown> {
  return {
    connected: s.connected,
    confirmedAgeSeconds: s.confirmedAgeSeconds === null ? null : Math.round(s.confirmedAgeSeconds * 10) / 10,
    fresh: s.fresh,
    keys: s.keys,
    dataLoss: s.dataLoss,
  };
}

/** Each consumer's expiry and scopes as a policy gives them, for the access line. */
function consumersOf(config: OpsConfig): Map<string, ConsumerInfo> {
  const consumers = new Map<string, ConsumerInfo>();
  for (const k of config.policies.auth.keys) {
    if (k.expires !== undefined || k.operations !== undefined) consumers.set(k.id, { ...(k.expires === undefined ? {} : { expires: k.expires }), ...(k.operations === undefined ? {} : { scopes: [...k.operations] }) });
  }
  return consumers;
}

/**
 * The console's counts (src/ops/console/series.ts), unless the admin listener is off or
 * `server.admin.console` is false; deltas are kept for the fleet's rollup when the shared store is Redis.
 */
function consoleRecorder(config: OpsConfig, current: () => OpsConfig, deprecatedNow: () => DeprecatedOperation[]): ConsoleRecorder | undefined {
  const admin = config.server?.admin;
  if (admin == null || admin.console === false) return undefined;
  // The deprecated set of the policy in force, recomputed only when a reload replaced it.
  let deprecatedFor: OpsConfig | undefined;
  let deprecatedIds: ReadonlySet<string> = new Set();
  const deprecatedOperations = () => {
    const c = current();
    if (c !== deprecatedFor) {
      deprecatedIds = new Set(deprecatedNow().map((d) => d.operation));
      deprecatedFor = c;
    }
    return deprecatedIds;
  };
  return new ConsoleRecorder({ deprecatedOperations, trackDelta: config.policies['rate-limit'].store !== 'memory' });
}

export function createOps(config: OpsConfig, options: OpsOptions): Ops {
  const storeConfig = config.policies['rate-limit'].store;
  const ledger = openDeprecationLedger(storeConfig);
  const current = options.current ?? (() => config);
  // Computed once per policy object (a reload makes a new one), not once per request.
  let consumersFor: OpsConfig | undefined;
  let consumers = new Map<string, ConsumerInfo>();
  const consumerInfo = (id: string): ConsumerInfo | undefined => {
    const now = current();
    if (now !== consumersFor) {
      consumers = consumersOf(now);
      consumersFor = now;
    }
    return consumers.get(id);
  };
  const deprecatedNow = (): DeprecatedOperation[] => {
    const c = current();
    return deprecatedOperations((c.api ?? shippedApi()).operations, c.policies.deprecation);
  };
  const deprecated = deprecatedNow();
  const health = new UpstreamHealth(upstreamAddress(config.upstream.url, config.upstream.timeouts.connectMs));
  // The registry the policy in force names: the newest opened (a reload may open another).
  const registryStatus = () => openRegistries().at(-1)?.status();
  const metrics = new GatewayMetrics({
    upstreamReachable: () => health.reachable,
    registry: registryStatus,
    breakerOpen: options.breakerOpen,
    cacheCounts: options.cacheCounts,
    cacheStoreErrors: options.cacheStoreErrors,
    overflowCounts: options.overflowCounts,
    migrationCounts: options.migrationCounts,
    traceStats: options.traceStats,
    storeErrors: () => openStores().reduce((n, s) => n + s.errors, 0),
    logDropped: droppedLogLines,
    defaultMetrics: options.defaultMetrics ?? true,
    deprecatedOperations: deprecated.map((d) => d.operation),
    routes: routeLabelsOf((config.api ?? shippedApi()).operations),
  });
  const accessLog = config.log.access ? new AccessLog({ logger: options.log, consumerInfo }) : undefined;
  const list: ExchangeObserver[] = [metrics, new DeprecationRecorder(ledger, deprecated.map((d) => d.operation)), health];
  if (accessLog !== undefined) list.push(accessLog);
  const consoleCounts = consoleRecorder(config, current, deprecatedNow);
  if (consoleCounts !== undefined) list.push(consoleCounts);
  return {
    observer: new Observers(list),
    metrics,
    accessLog,
    ledger,
    health,
    deprecated,
    console: consoleCounts,
    deprecatedNow,
    async readiness(phase: Phase): Promise<Readiness> {
      if (phase !== 'serving') return { ready: false, reason: phase };
      const now = current();
      const tied = now.server?.admin?.readiness?.upstream === true;
      const breakerOpen = options.breakerOpen();
      const reachable = await health.recheck();
      const upstream = { reachable, circuitBreaker: breakerOpen ? 'open' : 'closed', decidesReadiness: tied };
      const reg = registryStatus();
      const detail = reg === undefined ? { upstream } : { upstream, keyRegistry: registryDetail(reg) };
      if (tied && breakerOpen) return { ready: false, reason: 'circuit breaker open', detail };
      if (tied && !reachable) return { ready: false, reason: 'upstream unreachable', detail };
      // A store that is away matters to readiness only when requests fail without it: the mode of
      // the policy in force, not the one the process started with.
      const failClosed = now.policies['rate-limit'].onStoreError === 'closed';
      if (failClosed && openStores().some((s) => !s.healthy)) return { ready: false, reason: 'store down', detail };
      return { ...READY, detail };
    },
    deprecations: async () => deprecationReport(await ledger.report(), deprecatedNow()),
    close: async () => {
      await accessLog?.close();
    },
  };
}
