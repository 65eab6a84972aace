/**
 * The composition root: a validated policy config becomes a running chain of policies, plus what
 * the exchange needs to forward (the upstream, the body limit, the built-in backend).
 */
import { createHash } from 'node:crypto';
import { shippedApi } from './api/index.js';
import { ReferenceBackend } from './backend/service.js';
import type { PolicyConfig, UpstreamConfig } from './config/types.js';
import { Chain } from './core/chain.js';
import { CircuitBreaker } from './core/breaker.js';
import { ConsumerGate } from './core/consumer-gate.js';
import type { ForwardSettings } from './core/exchange.js';
import type { SendWrapper } from './core/forward/index.js';
import type { Policy, PolicyEnv, PolicyModule, Problem } from './core/policy.js';
import { gatewayPolicyEnv, POLICY_MODULES, type PolicyName } from './policies/index.js';
import { compileHeaderRules, type HeaderRules } from './core/headers.js';
import { redactForLog, SecretSet } from './core/redact.js';
import { compileMigration, type MigrationRules } from './migration/rules.js';
import { openMigration, type NextView, type OpenedMigration } from './migration/open.js';
import type { MigrationLaneView } from './migration/view.js';
import { undiciUpstream } from './upstreams/undici.js';
import { openTracing, type OpenedTracing } from './telemetry/open.js';
import { TRACE_DEFAULTS } from './telemetry/schema.js';
import type { Tracing } from './core/tracing.js';
import { openResponseCache, responseCache, type ResponseCache } from './policies/cache/open.js';
import { upstreamAuthOf } from './policies/auth/index.js';

export interface Gateway {
  readonly config: PolicyConfig;
  readonly chain: Chain;
  /** Which header fields cross the gateway, compiled once. */
  readonly headerRules: HeaderRules;
  /** The secrets the gateway holds in plaintext, masked in whatever upstream text it logs. */
  readonly secrets: SecretSet;
  /** Largest request body in bytes (the `new-pet` policy's maxBytes). */
  readonly bodyLimit: number;
  readonly upstream: UpstreamConfig;
  /** For a URL upstream: its origin (`http://host:port`) and base path (`/v1`, no trailing slash). */
  readonly upstreamOrigin: string | undefined;
  readonly upstreamBasePath: string;
  /** The in-process reference backend, when `upstream.url` is `builtin`. */
  readonly backend: ReferenceBackend | undefined;
  /** A fingerprint of what turns an upstream answer into the client's (`answerRulesOf`). */
  readonly answerRules: string;
  /** The migration lane's rules (`migration:`): what a reload may change of it; none without the section. */
  readonly migrationRules: MigrationRules | undefined;
}

/**
 * A fingerprint of the sections that shape what a client gets of an upstream answer: every policy
 * but the cache, and the header rules. The response cache stores answers after the response phase
 * and keys them by it, so an answer made under other rules (before a reload, or by an instance
 * sharing the Redis store with another policy file) is never served. Hashed, and short: it is
 * part of every key, and says nothing of the config it came from.
 */
export function answerRulesOf(config: PolicyConfig): string {
  const { cache: _cache, ...policies } = config.policies;
  return createHash('sha256').update(JSON.stringify({ headers: config.headers, policies })).digest('base64url').slice(0, 8);
}

/**
 * One module's policy, made from its own section of the config. Generic in the module's name so that
 * `config.policies[m.name]` is exactly the config `m.create` takes; called with the union
 * `AnyPolicyModule`, K is inferred as the union of names, which each module fits because `create` is
 * a method (bivariant parameters).
 */
function createPolicy<K extends PolicyName>(m: PolicyModule<PolicyConfig['policies'][K], K>, config: PolicyConfig, env: PolicyEnv): Policy {
  return m.create(config.policies[m.name], env);
}

/**
 * Compiles a validated config once: the policies, the header rules, the secrets to mask, the
 * upstream. The library's `createGateway` (src/engines/index.ts) wraps this in what serves it.
 */
export function compileGateway(config: PolicyConfig, env: PolicyEnv, backend?: ReferenceBackend): Gateway {
  const api = config.api ?? shippedApi();
  const penv = { ...gatewayPolicyEnv(config, env), api };
  const policies = POLICY_MODULES.map((m) => createPolicy(m, config, penv));
  const builtin = config.upstream.url === 'builtin';
  const url = builtin ? undefined : new URL(config.upstream.url);
  return {
    config,
    chain: new Chain(policies, api.router),
    headerRules: compileHeaderRules(config),
    secrets: penv.secrets ?? SecretSet.EMPTY,
    bodyLimit: config.policies['new-pet'].maxBytes,
    upstream: config.upstream,
    upstreamOrigin: url?.origin,
    upstreamBasePath: url === undefined ? '' : url.pathname.replace(/\/+$/, ''),
    backend: builtin ? (backend ?? new ReferenceBackend()) : undefined,
    answerRules: answerRulesOf(config),
    migrationRules: config.migration == null ? undefined : compileMigration(config.migration, api, (text) => redactForLog(text, 64, penv.secrets ?? SecretSet.EMPTY)),
  };
}

/** @deprecated The former name of `compileGateway`, kept for one release. */
export const createGateway = compileGateway;

/** What the exchange needs of the upstream section, fixed for the life of a server. */
export function forwardSettings(gw: Gateway): ForwardSettings {
  const { timeouts, maxBufferedBytes, retryIdempotent } = gw.upstream;
  return { basePath: gw.upstreamBasePath, headersMs: timeouts.headersMs, bodyMs: timeouts.bodyMs, totalMs: timeouts.totalMs, maxBufferedBytes, retryIdempotent };
}

/**
 * The gateway in force, swapped whole on a reload (SIGHUP, --watch). Each request keeps the gateway
 * it started with, so in-flight requests finish under their policy. What the forwarding layer was
 * built from (the upstream, the listening socket) cannot change without a restart: a reload that
 * changes them is refused, and the old gateway stays. The circuit breaker and the response cache
 * belong to the upstream and outlive reloads (a reload that changes `policies.cache` is refused).
 */
/**
 * What a reload cannot change: the sections read once at start (the listening socket, the upstream
 * pool). The `--workers` primary checks a reload with this too, before handing it to its workers.
 */
export function restartOnlyChanges(current: PolicyConfig, next: PolicyConfig): Problem[] {
  const problems: Problem[] = [];
  for (const section of ['upstream', 'server'] as const) {
    if (JSON.stringify(next[section]) !== JSON.stringify(current[section])) {
      problems.push({ path: `$.${section}`, message: 'changed: this section takes effect only on a restart' });
    }
  }
  // The migration lane's second upstream and its store are opened once, as `upstream` is; its
  // modes, percents, bounds and comparison are reloadable.
  const [was, is] = [current.migration ?? null, next.migration ?? null];
  if ((was === null) !== (is === null)) problems.push({ path: '$.migration', message: `${was === null ? 'added' : 'removed'}: the migration lane starts and stops only on a restart` });
  else if (was !== null && is !== null) {
    for (const part of ['next', 'store'] as const) {
      if (JSON.stringify(was[part]) !== JSON.stringify(is[part])) problems.push({ path: `$.migration.${part}`, message: 'changed: takes effect only on a restart' });
    }
    // The tally is made once with these bounds: a reload could not apply them.
    for (const bound of ['maxPaths', 'maxSamples'] as const) {
      if (was.compare[bound] !== is.compare[bound]) problems.push({ path: `$.migration.compare.${bound}`, message: 'changed: the tally keeps its bounds until a restart' });
    }
  }
  // Tracing's exporter is opened once: a reload may change only the ratio and the keep classes.
  // `retry` is read with its schema defaults: the loader fills them in a section it finds, so a
  // section added with only `sampleRatio` (the endpoint in OTEL_*) changes nothing else.
  const traces = (c: PolicyConfig) => {
    const { sampleRatio: _ratio, keep: _keep, maxTailPerSecond: _tail, retry, ...rest } = c.telemetry?.traces ?? {};
    return JSON.stringify({ ...rest, retry: { ...TRACE_DEFAULTS.retry, ...retry } });
  };
  if (traces(next) !== traces(current)) problems.push({ path: '$.telemetry.traces', message: 'changed: only sampleRatio, keep and maxTailPerSecond take effect on a reload; the rest on a restart' });
  // The cache (its store, its bound) is built once and outlives reloads, as the breaker does.
  if (JSON.stringify(next.policies.cache) !== JSON.stringify(current.policies.cache)) {
    problems.push({ path: '$.policies.cache', message: 'changed: the cache takes effect only on a restart' });
  }
  return problems;
}

export class GatewayHolder {
  private gw: Gateway;
  readonly breaker: CircuitBreaker | undefined;
  /** The response cache in front of a URL upstream; none for the built-in backend (nothing to shield). */
  readonly cache: ResponseCache | undefined;
  /** The cache as the exchange gets it: a wrapper of the composed send (src/policies/cache/layer.ts). */
  readonly sendWrapper: SendWrapper | undefined;
  /**
   * The per-consumer in-flight bound (`server.maxInFlightPerConsumer`), shared by every server of
   * this holder; like the `server` section, it changes only on a restart.
   */
  readonly gate: ConsumerGate | undefined;
  /** The migration lane's tally and report (`migration:`), for the admin port and the metrics; none without the section. */
  readonly migration: MigrationLaneView | undefined;
  private readonly lane: OpenedMigration | undefined;
  /** Tracing (`telemetry.traces` and the OTEL_* environment), when it is on; it outlives reloads. */
  readonly traces: OpenedTracing | undefined;

  /** `now`: the clock of the response cache and the circuit breaker's open window (tests move it by hand); Date.now by default. `log`: where the cache's Redis store warns. */
  constructor(
    initial: Gateway,
    options: {
      readonly now?: () => number;
      readonly log?: { warn(fields: Record<string, unknown>, message: string): void };
      /** Where the OpenTelemetry variables are read (OTEL_*); process.env by default. */
      readonly env?: Readonly<Record<string, string | undefined>>;
    } = {},
  ) {
    this.gw = initial;
    const cb = initial.upstream.circuitBreaker;
    this.breaker = cb === null || initial.backend !== undefined ? undefined : new CircuitBreaker(cb, options.now);
    const policies = initial.config.policies;
    this.cache =
      initial.backend !== undefined
        ? undefined
        : openResponseCache(policies.cache, { sharedCredential: upstreamAuthOf(policies.auth).credential === 'gateway', maxEntryBytes: initial.upstream.maxBufferedBytes, ...(options.now === undefined ? {} : { now: options.now }), log: options.log });
    const cached = this.cache === undefined ? undefined : responseCache(this.cache);
    this.traces = openTracing(initial.config.telemetry?.traces, { env: options.env ?? process.env, trustedProxies: initial.config.server.trustedProxies, upstreamOrigin: initial.upstreamOrigin, log: options.log });
    this.lane = openLane(initial, () => this.gw.migrationRules, options, this.traces?.tracer);
    this.migration = this.lane?.view;
    this.sendWrapper = this.lane === undefined ? cached : this.lane.wrapper(cached);
    const { maxInFlightPerConsumer, consumerQueueMs } = initial.config.server;
    this.gate = maxInFlightPerConsumer === null ? undefined : new ConsumerGate({ maxInFlight: maxInFlightPerConsumer, queueMs: consumerQueueMs });
  }

  /** The tracer the exchange is handed (GatewaySource.tracing). */
  get tracing(): Tracing | undefined {
    return this.traces?.tracer;
  }

  /** When a stop's grace period began (performance.now()), once `graceStarted` said so. */
  private graceFrom: number | undefined;

  /** A stop's grace period (`server.shutdownGraceMs`) begins now: the requests in flight and the last trace flush share it. */
  graceStarted(): void {
    this.graceFrom ??= performance.now();
  }

  /**
   * Closes what the holder opened (the cache's Redis connections, the trace exporter after a last
   * flush within what is left of `server.shutdownGraceMs`), once the server has stopped.
   */
  async close(): Promise<void> {
    const grace = this.gw.config.server.shutdownGraceMs;
    const left = this.graceFrom === undefined ? grace : Math.max(0, grace - (performance.now() - this.graceFrom));
    await Promise.all([this.cache?.store.close(), this.lane?.close(), this.traces?.close(left)]);
  }

  get current(): Gateway {
    return this.gw;
  }

  /** Swaps in `next`; returns the problems that prevent it (then nothing changes). */
  replace(next: Gateway): Problem[] {
    const problems = restartOnlyChanges(this.gw.config, next.config);
    if (problems.length === 0) {
      this.gw = next;
      this.traces?.reconfigure(next.config.telemetry?.traces);
    }
    return problems;
  }
}

/**
 * The migration lane of a gateway with a `migration:` section and a URL upstream: `next` is reached
 * with an undici Pool whatever the engine (http-proxy-3 and reply-from work through the client's
 * own request, which legacy's call uses).
 */
function openLane(gw: Gateway, rules: () => MigrationRules | undefined, options: { readonly now?: () => number; readonly log?: { warn(fields: Record<string, unknown>, message: string): void } }, tracing: Tracing | undefined): OpenedMigration | undefined {
  const config = gw.config.migration;
  if (config == null || gw.backend !== undefined) return undefined;
  const next = config.next as unknown as UpstreamConfig & NextView;
  return openMigration({
    config,
    next,
    upstream: undiciUpstream(new URL(next.url).origin, next),
    legacyBasePath: gw.upstreamBasePath,
    rules,
    // The report's modes and percents: those in force (a reload changes them).
    current: () => rules()?.config,
    env: process.env,
    log: options.log,
    attempts: tracing === undefined ? undefined : (send) => tracing.wrapSend(send, new URL(next.url).origin),
    ...(options.now === undefined ? {} : { now: options.now }),
  });
}
