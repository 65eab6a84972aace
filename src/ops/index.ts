/**
 * Operations, assembled for one process: the observers every finished request feeds (metrics, the
 * access log, the deprecation report), and what the admin listener reads (readiness, metrics, the
 * report). The CLI builds this once; an embedder may build it too and pass `ops.observer` to an
 * engine or the Fastify plugin.
 */
import type { Logger } from 'pino';
import type { PolicyConfig } from '../config/types.js';
import type { ExchangeObserver, ExchangeRecord } from '../core/record.js';
import { openDeprecationLedger, openStores } from '../stores/index.js';
import type { DeprecationLedger } from '../stores/types.js';
import { AccessLog, type ConsumerInfo } from './access-log.js';
import { READY, type Readiness } from './admin.js';
import { type DeprecatedOperation, DeprecationRecorder, deprecationReport, type DeprecationReport } from './deprecations.js';
import { GatewayMetrics } from './metrics.js';

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

/**
 * Whether the upstream answers, as the traffic shows it: unreachable from a call whose connection
 * was refused until the next call that got an answer. (With a circuit breaker, its state says more.)
 */
export class UpstreamHealth implements ExchangeObserver {
  reachable = true;

  onEnd(record: ExchangeRecord): void {
    if (record.upstreamStatus !== undefined) this.reachable = true;
    else if (record.upstreamFailure === 'refused' || record.upstreamFailure === 'connect_timeout') this.reachable = false;
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
  readiness(phase: Phase): Readiness;
  deprecations(): Promise<DeprecationReport>;
  /** Flushes the access log (after the drain). */
  close(): Promise<void>;
}

export interface OpsOptions {
  /** The process's root logger: access lines share its destination (one writer on stdout). */
  readonly log: Logger;
  /** Whether the circuit breaker is open now. */
  readonly breakerOpen: () => boolean;
  /** Prometheus default process metrics; off in tests that start many gateways. */
  readonly defaultMetrics?: boolean;
}

export function createOps(config: PolicyConfig, options: OpsOptions): Ops {
  const storeConfig = config.policies['rate-limit'].store;
  const ledger = openDeprecationLedger(storeConfig);
  const deprecated: DeprecatedOperation[] = [{ operation: 'getPet', sunset: config.policies.deprecation.sunset }];
  const metrics = new GatewayMetrics({
    breakerOpen: options.breakerOpen,
    storeErrors: () => openStores().reduce((n, s) => n + s.errors, 0),
    defaultMetrics: options.defaultMetrics ?? true,
  });
  // The access line names each consumer's expiry and scopes as the policy file gives them (issue 14).
  const consumers = new Map<string, ConsumerInfo>();
  for (const k of config.policies.auth.keys) {
    if (k.expires !== undefined || k.operations !== undefined) consumers.set(k.id, { ...(k.expires === undefined ? {} : { expires: k.expires }), ...(k.operations === undefined ? {} : { scopes: [...k.operations] }) });
  }
  const accessLog = config.log.access ? new AccessLog({ logger: options.log, consumerInfo: (id) => consumers.get(id) }) : undefined;
  const health = new UpstreamHealth();
  const list: ExchangeObserver[] = [metrics, new DeprecationRecorder(ledger), health];
  if (accessLog !== undefined) list.push(accessLog);
  const failClosed = config.policies['rate-limit'].onStoreError === 'closed';
  return {
    observer: new Observers(list),
    metrics,
    accessLog,
    ledger,
    health,
    deprecated,
    readiness(phase: Phase): Readiness {
      if (phase !== 'serving') return { ready: false, reason: phase };
      if (options.breakerOpen()) return { ready: false, reason: 'circuit breaker open' };
      if (!health.reachable) return { ready: false, reason: 'upstream unreachable' };
      // A store that is away matters to readiness only when requests fail without it.
      if (failClosed && openStores().some((s) => !s.healthy)) return { ready: false, reason: 'store down' };
      return READY;
    },
    deprecations: async () => deprecationReport(await ledger.report(), deprecated),
    close: async () => {
      await accessLog?.close();
    },
  };
}
