/**
 * A serving process of `serve`: the only one, or one worker of `--workers`. It starts the chosen
 * engine and the admin listener, reloads (SIGHUP, --watch, the primary's hand-over) and stops
 * gracefully.
 */
import cluster from 'node:cluster';
import type { AddressInfo, Socket } from 'node:net';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { ExchangeObserver } from '../core/record.js';
import type { AdminHandle } from '../ops/admin.js';
import { serveWorkerOps } from '../ops/cluster.js';
import { exitWhenWritten } from '../ops/log-destination.js';
import { createOps, type Ops, type Phase } from '../ops/index.js';
import type { OverflowEvent } from '../ops/metrics.js';
import { warnWeakenings } from '../config/security-notices.js';
import type { PolicyConfig } from '../config/types.js';
import { closeStores } from '../stores/index.js';
import { compileGateway, GatewayHolder } from '../gateway.js';
import { closeRegistries, registriesReady } from '../registry/index.js';
import { connectionCountsOf, PIPELINE_OVERFLOW } from '../fronts/connections.js';
import { h2CountsOf } from '../tls/h2-streams.js';
import { listenerTlsFiles, registerCertificateGauge, reloadListenerTls, warnIfExpiring } from '../tls/ops.js';
import { adminWatchFiles, reloadAdmin } from './admin.js';
import { openConsole, type OpenConsole, workerConsoleFleet } from './console.js';
import { adminKeyRoutes } from './keys.js';
import { servedFor } from './openapi.js';
import { probeUpstream } from './probe.js';
import { checkReload, checkReloadWhole, isPolicyMessage, listenAdmin, printBanner, readForReload, type ServeSetup } from './serve-setup.js';
import { onReloadSignal, onStopSignal } from './signals.js';
import { EXIT, packageVersion } from './usage.js';
import { interfaceFiles, watchFiles } from './watch.js';

/** Failed commands of the response cache's store: its Redis store counts them, memory never fails. */
function storeErrorsOf(store: object | undefined): number {
  return store !== undefined && 'errors' in store && typeof store.errors === 'number' ? store.errors : 0;
}

/** Where a serving process is in its life, shared by its readiness, its reload and its stop. */
interface ProcessState {
  phase: Phase;
  admin: AdminHandle | undefined;
  /** The console's timers and fleet rollup (closed after the drain: its last flush counts every request). */
  console: { close(): Promise<void> } | undefined;
  /** The policy text in force and when a reload last took (the console's heartbeat). */
  policy: { text: string; reloadedAtMs: number | null };
}

/** The connection accounting's and the consumer gate's counts, as the overflow metric labels them. */
function overflowsOf(server: Server | undefined, holder: GatewayHolder): Record<OverflowEvent, number> {
  const c = server === undefined ? undefined : connectionCountsOf(server);
  const g = holder.gate?.counts;
  const h2 = server === undefined ? undefined : h2CountsOf(server);
  return {
    pipeline_closed: c?.pipelineClosed ?? 0,
    overflow_refused: c?.overflowRefused ?? 0,
    address_share_refused: c?.shareRefused ?? 0,
    consumer_queued: g?.queued ?? 0,
    consumer_expired: g?.expired ?? 0,
    h2_stream_stalled: h2?.streamStalled ?? 0,
    h2_session_not_reading: h2?.sessionNotReading ?? 0,
    h2_rapid_reset: h2?.rapidReset ?? 0,
  };
}

/** A gateway process: the only one, or one worker of `--workers`. */
export async function serveProcess(s: ServeSetup): Promise<number> {
  const { log, config } = s;
  const state: ProcessState = { phase: 'starting', admin: undefined, console: undefined, policy: { text: s.text, reloadedAtMs: null } };
  const holder = new GatewayHolder(compileGateway(config, { env: s.env, log }), { log, env: s.env });
  // The server exists once the engine started; the metric may be scraped before (it reads 0).
  const listening: { server?: Server } = {};
  const overflowCounts = () => overflowsOf(listening.server, holder);
  const migration = holder.migration;
  const ops = createOps(config, { log, breakerOpen: () => holder.breaker?.rejecting === true, current: () => holder.current.config, cacheCounts: () => holder.cache?.counts, cacheStoreErrors: () => storeErrorsOf(holder.cache?.store), overflowCounts, migrationCounts: () => migration?.tally.metricCounts(Object.keys(holder.current.config.migration?.operations ?? {})), traceStats: () => holder.traces?.stats() });
  const running = await startEngine(s.engine, holder, log, ops.observer);
  listening.server = running.server;
  registerCertificateGauge(ops.metrics.registry, running.server);
  // Throttled with a count like every warning (src/ops/log-throttle.ts): a flood closes many.
  running.server.on(PIPELINE_OVERFLOW, (socket: Socket) =>
    log.warn({ client: socket.remoteAddress, maxPipelinedPerConnection: config.server.maxPipelinedPerConnection, refuseMs: config.server.pipelineOverflowRefuseMs }, 'closed a connection that pipelined more requests than server.maxPipelinedPerConnection; its address is refused for server.pipelineOverflowRefuseMs'),
  );
  // A start that fails leaves nothing open behind it: the process must end (main.ts), not idle.
  const release = async () => {
    await state.admin?.close();
    await state.console?.close();
    await running.close().catch(() => undefined);
    await ops.close();
    await closeStores();
    await closeRegistries();
  };
  const adminConfig = config.server.admin;
  if (cluster.isWorker) {
    if (adminConfig !== null) serveWorkerOps({ registry: ops.metrics.registry, readiness: () => ops.readiness(state.phase), ledger: ops.ledger, migration, console: ops.console });
    state.console = workerConsoleFleet(config, s.env, log, ops.console);
  } else if (adminConfig !== null) {
    const metrics = async () => ({ body: await ops.metrics.registry.metrics(), contentType: ops.metrics.registry.contentType });
    const consoleOpen = processConsole(s, holder, ops, state);
    state.console = consoleOpen;
    const routes = adminKeyRoutes(config, s.env, log, migration === undefined ? undefined : () => migration.reset(), consoleOpen?.routes);
    // The document of the policy in force, with the port the API listener got (port 0 included).
    const openapi = () => servedFor(holder.current.config, (running.server.address() as AddressInfo | null)?.port);
    const report = migration === undefined ? undefined : () => migration.report();
    state.admin = await listenAdmin(adminConfig, { readiness: () => ops.readiness(state.phase), metrics, deprecations: () => ops.deprecations(), routes, openapi, migration: report }, log);
    if (state.admin === undefined) {
      await release();
      return EXIT.runtime;
    }
  }
  const reload = reloader(s, holder, ops, running.server, state.policy);
  if (cluster.isWorker) {
    process.on('message', (m: unknown) => {
      if (isPolicyMessage(m)) reload(m.reason, m.text);
    });
    onReloadSignal(() => log.warn({ primaryPid: process.ppid }, 'SIGHUP sent to a worker is ignored: send it to the primary, which reloads every worker'));
  } else {
    onReloadSignal((reason) => reload(reason));
    if (s.watch) watchFiles([s.file], () => reload('file changed'), log);
    if (s.watch) watchFiles(interfaceFiles(config), () => reload('interface changed'), log);
    if (s.watch) watchFiles(adminWatchFiles(config), () => reloadAdmin('admin file changed'), log);
    // The listener's certificate files are watched too (one reload when the key and the
    // certificate change together): a renewal needs no policy change.
    if (s.watch) watchFiles(listenerTlsFiles(config), () => reloadListenerTls(running.server, log, 'certificate file changed'), log);
  }
  const { host, port } = config.server;
  // Registry keys authenticate from the first request: the local copy is read before listening
  // (bounded; with Redis away the gateway starts anyway and file keys work).
  await registriesReady(2000);
  try {
    await running.listen(host, s.reusePort ?? port, s.reusePort !== undefined);
  } catch (err) {
    // A worker that cannot listen must exit (main.ts lets its IPC channel go), never stay up silently.
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    process.stderr.write(`petstore-gateway: cannot listen on ${host}:${port}: ${code}${listenHint(code)}\n`);
    await release();
    return EXIT.runtime;
  }
  // The graceful stop from now on; before, a stop ended the start at once (serve's onStopSignal).
  installStop(config.server, running, ops, state, log, holder);
  state.phase = 'serving';
  const addr = running.server.address() as AddressInfo;
  const url = `${config.server.tls === null ? 'http' : 'https'}://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`;
  log.info({ url, engine: s.engine, upstream: config.upstream.url }, 'petstore-gateway listening');
  const banner = `petstore-gateway listening on ${url} (upstream: ${config.upstream.url}, engine: ${s.engine})`;
  // A cluster worker tells the primary, which prints one banner for all.
  if (cluster.isWorker) process.send?.({ type: 'listening', banner, port: addr.port });
  else {
    printBanner(banner, s.ephemeral, url);
    warnIfExpiring(running.server, log);
    void probeUpstream(config, log);
  }
  return -1; // keep running
}

/** The console of a process that serves alone (src/cli/console.ts), when it is on. */
function processConsole(s: ServeSetup, holder: GatewayHolder, ops: Ops, state: ProcessState): OpenConsole | undefined {
  const recorder = ops.console;
  const migration = holder.migration;
  if (recorder === undefined) return undefined;
  return openConsole({
    config: s.config,
    env: s.env,
    log: s.log,
    version: packageVersion(),
    workers: 1,
    current: () => holder.current.config,
    text: () => state.policy.text,
    lastReloadMs: () => state.policy.reloadedAtMs,
    readiness: () => ops.readiness(state.phase),
    local: async () => recorder.snapshot(),
    source: recorder,
    uses: () => ops.ledger.report(),
    deprecated: () => ops.deprecatedNow(),
    migration: migration === undefined ? undefined : () => migration.report(),
  });
}

/** What to change when the listen failed, by its error code. */
function listenHint(code: string): string {
  switch (code) {
    case 'EADDRINUSE':
      return ' (another process listens there: choose another port with --port or server.port, or stop that process)';
    case 'EACCES':
      return ' (not permitted: ports below 1024 need privileges; choose --port 1024 or above, or server.port)';
    case 'EADDRNOTAVAIL':
      return ' (no such address on this machine: set --host or server.host, e.g. 127.0.0.1 or 0.0.0.0)';
    default:
      return ' (check --host/--port or server.host/server.port)';
  }
}

/**
 * The reload of a serving process: the one path SIGHUP, --watch and the `--workers` primary's
 * hand-over go through. `text` is the policy the primary has in force; without it, the file is
 * read. An invalid policy is refused with its problems logged and the old one stays; requests in
 * flight finish under the policy they started with. One log line per reload.
 */
function reloader(s: ServeSetup, holder: GatewayHolder, ops: Ops, server: RunningEngine['server'], inForce: ProcessState['policy']): (reason: string, text?: string) => void {
  const last = { text: s.text };
  // One reload at a time, in the order asked: the interface document's check is asynchronous.
  let reloading = Promise.resolve();
  return (reason, handed) => {
    reloading = reloading.then(() => reloadOnce(reason, handed)).catch((err: unknown) => s.log.error({ err, reason }, 'policy reload failed; the previous policy stays'));
  };
  async function reloadOnce(reason: string, handed: string | undefined): Promise<void> {
    reloadAdmin(reason);
    const text = handed ?? readForReload(s, reason, last);
    if (text === undefined) return;
    const before = holder.current.config;
    // A policy the primary of --workers hands over was checked whole there.
    const next = handed === undefined ? await checkReloadWhole(s, before, text) : checkReload(s, before, text);
    const problems = next.ok ? holder.replace(compileGateway(next.config, { env: s.env, log: s.log }, holder.current.backend)).map((p) => `${p.path}: ${p.message}`) : next.problems;
    ops.metrics.reloaded(problems.length === 0);
    if (problems.length > 0) s.log.error({ file: s.file, reason, problems }, 'policy reload refused; the previous policy stays');
    else {
      inForce.text = text;
      inForce.reloadedAtMs = Date.now();
      s.log.info({ file: s.file, reason }, 'policy reloaded');
      warnWeakenings(before, holder.current.config, s.log);
    }
    // The certificate and key are re-read on every reload (a renewal keeps the same paths).
    reloadListenerTls(server, s.log, reason);
  }
}

/**
 * SIGTERM/SIGINT: /readyz turns 503 `draining` at once; the API listener keeps accepting for
 * `server.drainDelayMs` (a load balancer removes an endpoint some time after it starts stopping:
 * a connection refused meanwhile would be a client's error); then it stops accepting and in-flight
 * requests have `shutdownGraceMs` to finish, the trace exporter's last flush what is left of it;
 * exit 0. From the signal on, answers say
 * `Connection: close`, so keep-alive clients move to another instance.
 */
function installStop(server: PolicyConfig['server'], running: RunningEngine, ops: Ops, state: ProcessState, log: Logger, holder: GatewayHolder): void {
  const { drainDelayMs, shutdownGraceMs } = server;
  let stopping = false;
  const active = new Set<ServerResponse>();
  running.server.on('request', (_req: IncomingMessage, res: ServerResponse) => {
    if (stopping) res.shouldKeepAlive = false;
    active.add(res);
    res.once('close', () => active.delete(res));
  });
  const close = (signal: string, since: number) => {
    for (const res of active) if (!res.headersSent) res.shouldKeepAlive = false;
    // One grace period for the requests in flight and the last trace flush after them.
    holder.graceStarted();
    log.info({ signal, graceMs: shutdownGraceMs, inFlight: active.size }, 'shutting down');
    const force = setTimeout(() => {
      log.warn({ graceMs: shutdownGraceMs }, 'requests still in flight after the grace period; closing their connections');
      running.server.closeAllConnections();
    }, shutdownGraceMs);
    force.unref();
    const exit = (code: number) => {
      log.info({ signal, ms: Math.round(performance.now() - since), exitCode: code }, 'stopped');
      // The destination is asynchronous: exit once everything is written, in order.
      exitWhenWritten(log, code);
    };
    running
      .close()
      .then(async () => {
        // A response's 'close' (which writes its access line) can follow the server's own close
        // by a tick: let those run, so "stopped" is the last line.
        await new Promise((r) => setImmediate(r));
        await ops.close();
        await state.console?.close();
        await closeStores();
        await closeRegistries();
        await state.admin?.close();
      })
      .then(
        () => exit(EXIT.ok),
        (err: unknown) => {
          log.error({ err }, 'error while stopping');
          exit(EXIT.runtime);
        },
      );
  };
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    state.phase = 'draining';
    const since = performance.now();
    for (const res of active) if (!res.headersSent) res.shouldKeepAlive = false;
    if (drainDelayMs === 0) return close(signal, since);
    log.info({ signal, drainDelayMs }, 'draining: /readyz answers 503 while the listener still accepts');
    setTimeout(() => close(signal, since), drainDelayMs);
  };
  onStopSignal(stop);
}

interface RunningEngine {
  readonly server: Server;
  /** `reusePort`: this process binds the port itself (`exclusive`, so not through node:cluster's primary) with SO_REUSEPORT. */
  listen(host: string, port: number, reusePort: boolean): Promise<void>;
  close(): Promise<void>;
}

/**
 * The standalone server of an engine: node:http + undici, Fastify + @fastify/http-proxy, or
 * node:http + http-proxy-3. Each engine's module is imported here, when it is chosen, so a run
 * loads one engine's library, not all three.
 */
async function startEngine(engine: string, holder: GatewayHolder, log: Logger, observer: ExchangeObserver): Promise<RunningEngine> {
  if (engine === 'fastify') {
    const { buildServer } = await import('../engines/fastify.js');
    const app = await buildServer(holder, { loggerInstance: log, log, observer });
    return {
      server: app.server,
      listen: async (host, port, reusePort) => {
        await app.listen({ host, port, ...(reusePort ? { exclusive: true, reusePort: true } : {}) });
      },
      close: () => app.close(),
    };
  }
  const handle =
    engine === 'undici'
      ? (await import('../engines/undici.js')).buildUndiciServer(holder, { log, observer })
      : (await import('../engines/http-proxy-3.js')).buildProxyServer(holder, { log, observer });
  return {
    server: handle.server,
    listen: (host, port, reusePort) =>
      new Promise((resolve, reject) => {
        handle.server.once('error', reject);
        handle.server.listen({ port, host, ...(reusePort ? { exclusive: true, reusePort: true } : {}) }, () => {
          handle.server.off('error', reject);
          resolve();
        });
      }),
    close: () => handle.close(),
  };
}
