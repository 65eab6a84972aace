/**
 * `petstore-gateway serve`: the flags, the policy, the logger; then one serving process
 * (serve-process.ts), or with `--workers N` the primary that supervises N of them.
 *
 * Output: while serving, stdout carries only pino's JSON lines (NDJSON); human text
 * (the banner, the ephemeral key, usage errors, policy problems) goes to stderr.
 */
import cluster from 'node:cluster';
import { createServer as createNetServer } from 'node:net';
import { pino, type LoggerOptions } from 'pino';
import { READY } from '../ops/admin.js';
import { primaryOps } from '../ops/cluster.js';
import { exitWhenWritten, processLogger } from '../ops/log-destination.js';
import { throttledLogMethod } from '../ops/log-throttle.js';
import { perClientBoundsNotice, warnAtStart } from '../config/security-notices.js';
import { perWorkerNotice } from '../policies/rate-limit/index.js';
import { shippedApi } from '../api/index.js';
import { deprecatedOperations } from '../api/lifecycle.js';
import { closeStores, openDeprecationLedger, setStoreLog } from '../stores/index.js';
import { closeRegistries, setRegistryLog } from '../registry/index.js';
import { migrationGroup } from '../migration/view.js';
import { listenerTlsFiles } from '../tls/ops.js';
import { adminWatchFiles, reloadAdmin } from './admin.js';
import { openConsole, type OpenConsole } from './console.js';
import { adminKeyRoutes } from './keys.js';
import { mergeSnapshots } from '../ops/console/merge.js';
import type { ConsoleSnapshot } from '../ops/console/types.js';
import { interfaceStructure, loadForServe } from './policy-load.js';
import { formatProblems } from '../config/load.js';
import { probeUpstream } from './probe.js';
import { serveProcess } from './serve-process.js';
import { checkReloadWhole, listenAdmin, POLICY_MESSAGE, type PolicyMessage, printBanner, readForReload, type ServeSetup, WORKER_POLICY_ENV, WORKER_PORT_ENV } from './serve-setup.js';
import { servedFor } from './openapi.js';
import { onReloadSignal, onStopSignal } from './signals.js';
import { DEFAULT_LIMITS, reusePortSupported, superviseWorkers } from './supervisor.js';
import { defaultPolicyFile, EXIT, OVERRIDE_OPTIONS, overridesOf, packageVersion, parse, UsageError } from './usage.js';
import { interfaceFiles, watchFiles } from './watch.js';

/** The engines `serve --engine` runs (src/engines); the first is the default. */
const ENGINES = ['undici', 'fastify', 'http-proxy-3'];

export const SERVE_HELP = `Usage: petstore-gateway serve [--policy FILE] [--upstream URL|builtin] [--host H] [--port N]
                             [--admin-host H] [--admin-port N] [--ephemeral-key] [--watch]
                             [--engine undici|fastify|http-proxy-3] [--workers N]

Run the gateway.
  --policy FILE       the policy file (default: ./policies/default.yaml, else the packaged one)
  --upstream URL      override upstream.url: "builtin" or the upstream's base URL ending with its
                      /v1 prefix, e.g. http://127.0.0.1:8081/v1 (on a non-loopback host, builtin
                      runs only when chosen: this flag or upstream.url in the --policy file)
  --host H, --port N  override server.host and server.port (0 picks a free port)
  --admin-host H, --admin-port N
                      where the admin listener binds
  --ephemeral-key     when no API key is configured, make one for this run and print it on stderr
                      (the quickstart; nothing is saved)
  --watch             reload the policy when the file changes, and the TLS certificate when its
                      files change, a Kubernetes ConfigMap/Secret update too (SIGHUP always
                      reloads both)
  --engine E          undici (default, fastest), fastify or http-proxy-3: same policies on each
  --workers N         N processes share the port (reusePort, else node:cluster); SIGHUP reloads every one

stdout carries JSON log lines only; the banner and the ephemeral key go to stderr.
At start, the upstream is probed once (GET <upstream>/pets?limit=1, no key) and a warning is logged
when its base path looks wrong. SIGTERM/SIGINT stop gracefully (server.shutdownGraceMs); before
the gateway serves, at once.
Exit codes: 0 stopped by a signal, 1 runtime failure, 2 bad usage, 78 bad policy, no API key, or
the built-in backend on a non-loopback host without being chosen.
`;

/** pino options: level from LOG_LEVEL; credentials redacted should any serializer ever reach them. */
function loggerOptions(level = 'info'): LoggerOptions {
  return {
    level: process.env.LOG_LEVEL ?? level,
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: ['req.headers.authorization', 'headers.authorization', 'authorization'], censor: '[redacted]' },
    hooks: { logMethod: throttledLogMethod() },
  };
}

export async function serve(args: string[]): Promise<number> {
  const { values } = parse('serve', args, {
    ...OVERRIDE_OPTIONS,
    policy: { type: 'string' },
    'admin-host': { type: 'string' },
    'admin-port': { type: 'string' },
    watch: { type: 'boolean' },
    engine: { type: 'string' },
    workers: { type: 'string' },
  });
  const engine = (values.engine as string | undefined) ?? 'undici';
  const workersText = (values.workers as string | undefined) ?? '1';
  if (!/^[1-9][0-9]{0,2}$/.test(workersText)) throw new UsageError(`--workers must be a whole number from 1 to 999, not '${workersText}'`, 'serve');
  const workers = Number(workersText);
  if (!ENGINES.includes(engine)) throw new UsageError(`--engine must be one of ${ENGINES.join(', ')}, not '${engine}'`, 'serve');
  const overrides = overridesOf('serve', values);
  const file = (values.policy as string | undefined) ?? defaultPolicyFile();
  const env: Record<string, string | undefined> = { ...process.env };
  const handed = cluster.isWorker ? env[WORKER_POLICY_ENV] : undefined;
  const reusePort = cluster.isWorker ? env[WORKER_PORT_ENV] : undefined;
  delete env[WORKER_POLICY_ENV];
  delete env[WORKER_PORT_ENV];
  const loaded = loadForServe(file, env, overrides, { ephemeralKey: values['ephemeral-key'] === true, fileGiven: values.policy !== undefined, handed });
  if (!loaded.ok) {
    process.stderr.write(loaded.problems + '\n');
    return EXIT.config;
  }
  // A worker was handed a policy its primary checked whole.
  const structure = handed === undefined ? await interfaceStructure(loaded.config) : [];
  if (structure.length > 0) {
    process.stderr.write(formatProblems(file, structure) + '\n');
    return EXIT.config;
  }
  // Stdout is NDJSON (operator messages and access lines, one writer); written asynchronously so a
  // slow reader of stdout does not hold the event loop, flushed at exit.
  const log = processLogger(loggerOptions(loaded.config.log.level));
  setStoreLog(log);
  // Until the gateway serves, a stop ends the process at once, with its line (then installStop, or
  // the supervisor of --workers, takes the signal over).
  onStopSignal((signal) => {
    log.info({ signal, exitCode: EXIT.ok }, 'stopped before serving');
    exitWhenWritten(log, EXIT.ok);
  });
  const setup: ServeSetup = {
    file,
    text: loaded.text,
    config: loaded.config,
    env,
    overrides,
    engine,
    workers,
    watch: values.watch === true,
    ephemeral: loaded.ephemeral,
    log,
    reusePort: reusePort === undefined ? undefined : Number(reusePort),
  };
  if (!cluster.isWorker) warnAtStart(loaded.config, log);
  setRegistryLog(log);
  return workers > 1 && cluster.isPrimary ? servePrimary(setup) : serveProcess(setup);
}

/**
 * `--workers N`: the primary. It alone reads the policy file, on SIGHUP or --watch, validates it
 * and hands the workers the text in force, so every worker (a replacement too) runs the same
 * policy, and a refused reload leaves nothing behind for a worker to trip over.
 */
async function servePrimary(s: ServeSetup): Promise<number> {
  const { log, config, workers } = s;
  // The primary probes once for all workers; a worker does not.
  void probeUpstream(config, log);
  const notice = perWorkerNotice(config.policies['rate-limit'], workers);
  if (notice !== undefined) log.warn({ workers }, notice);
  const perClient = perClientBoundsNotice(config, workers);
  if (perClient !== undefined) log.warn({ workers }, perClient);
  if (config.upstream.url === 'builtin') {
    const line = `the built-in backend keeps its pets per process: with --workers ${workers} each worker has its own (ids repeat, a pet created through one worker is unknown to the others); run \`petstore-gateway backend\` and point --upstream at it, or use one worker`;
    log.warn({ workers }, line);
    process.stderr.write(`petstore-gateway: warning: ${line}\n`);
  }
  let draining = false;
  let inForce = { text: s.text, config };
  let reloadedAtMs: number | null = null;
  let consoleOpen: OpenConsole | undefined;
  const adminConfig = config.server.admin;
  if (adminConfig !== null) {
    // The lane's report of the whole group; the policy in force gives its modes (a reload changes them).
    const lane = config.migration == null ? undefined : migrationGroup(config.migration, { current: () => inForce.config.migration, env: s.env, log });
    const group = primaryOps({
      workers,
      readiness: () => (draining ? { ready: false, reason: 'draining' } : READY),
      deprecated: deprecatedOperations((config.api ?? shippedApi()).operations, config.policies.deprecation),
      sharedLedger: config.policies['rate-limit'].store === 'memory' ? undefined : openDeprecationLedger(config.policies['rate-limit'].store),
      migration: lane,
    });
    // The policy in force (a reload replaces `inForce`); its port, unless 0 (then each worker's own, unknown here).
    const openapi = () => servedFor(inForce.config);
    consoleOpen = primaryConsole(s, group, () => inForce, () => reloadedAtMs);
    const admin = await listenAdmin(adminConfig, { ...group.callbacks, routes: adminKeyRoutes(config, s.env, log, group.migrationReset, consoleOpen?.routes), openapi }, log);
    if (admin === undefined) {
      await consoleOpen?.close();
      group.close();
      await lane?.close();
      await closeStores();
      await closeRegistries();
      return EXIT.runtime;
    }
  }
  const last = { text: s.text };
  const { server } = config;
  const reusePort = reusePortSupported() && (await portIsFree(server.host, server.port));
  if (reusePort) log.info({ workers, port: server.port }, 'each worker listens itself (reusePort): the kernel balances connections');
  const group = superviseWorkers({
    workers,
    staggered: reusePort && server.port === 0,
    env: (port) => ({ ...s.env, [WORKER_POLICY_ENV]: inForce.text, ...(reusePort ? { [WORKER_PORT_ENV]: String(port ?? server.port) } : {}) }),
    log,
    limits: { ...DEFAULT_LIMITS, stopTimeoutMs: server.drainDelayMs + server.shutdownGraceMs + 5000 },
    onListening: (banner) => printBanner(`${banner} with ${workers} workers`, s.ephemeral, undefined),
    onWorkerListening: (worker, forkedWith) => {
      if (forkedWith[WORKER_POLICY_ENV] === inForce.text) return;
      worker.send({ type: POLICY_MESSAGE, text: inForce.text, reason: 'reloaded while the worker started' } satisfies PolicyMessage, undefined, () => {});
    },
  });
  // From now on a stop drains every worker (each stops gracefully), and /readyz says so at once.
  onStopSignal((signal) => {
    draining = true;
    void consoleOpen?.close();
    group.stop(signal);
  });
  // One reload at a time, in the order asked: the interface document's check is asynchronous.
  let reloading = Promise.resolve();
  const reload = (reason: string) => {
    reloading = reloading.then(() => reloadOnce(reason)).catch((err: unknown) => log.error({ err, reason }, 'policy reload failed; the previous policy stays'));
  };
  const reloadOnce = async (reason: string) => {
    reloadAdmin(reason);
    const text = readForReload(s, reason, last);
    if (text === undefined) return;
    const next = await checkReloadWhole(s, inForce.config, text);
    if (!next.ok) return void log.error({ file: s.file, reason, problems: next.problems }, 'policy reload refused; the previous policy stays');
    inForce = { text, config: next.config };
    reloadedAtMs = Date.now();
    // Each worker applies it and logs its own "policy reloaded" line.
    group.send({ type: POLICY_MESSAGE, text, reason } satisfies PolicyMessage);
  };
  onReloadSignal(reload);
  if (s.watch) watchFiles([s.file], () => reload('file changed'), log);
  if (s.watch) watchFiles(interfaceFiles(config), () => reload('interface changed'), log);
  if (s.watch) watchFiles(adminWatchFiles(config), () => reloadAdmin('admin file changed'), log);
  // Workers hold the certificate: a renewed file reaches them as a reload of the policy in force.
  if (s.watch) watchFiles(listenerTlsFiles(config), () => group.send({ type: POLICY_MESSAGE, text: inForce.text, reason: 'certificate file changed' } satisfies PolicyMessage), log);
  return -1;
}

/** The console of a `--workers` group: its workers' counts over IPC (or the fleet's in Redis), one heartbeat. */
function primaryConsole(s: ServeSetup, group: ReturnType<typeof primaryOps>, inForce: () => { text: string; config: ServeSetup['config'] }, reloadedAtMs: () => number | null): OpenConsole | undefined {
  const { deprecations, readiness, migration } = group.callbacks;
  return openConsole({
    config: s.config,
    env: s.env,
    log: s.log,
    version: packageVersion(),
    workers: s.workers,
    current: () => inForce().config,
    text: () => inForce().text,
    lastReloadMs: reloadedAtMs,
    readiness: async () => readiness(),
    local: async () => mergeSnapshots((await group.consoleSnapshots()) as ConsoleSnapshot[], Date.now()),
    uses: async () => (await deprecations()).operations.flatMap((o) => o.consumers.map((c) => ({ operation: o.operation, ...c }))),
    deprecated: () => deprecatedOperations((inForce().config.api ?? shippedApi()).operations, inForce().config.policies.deprecation),
    migration,
  });
}

/**
 * Whether nothing listens on host:port now. SO_REUSEPORT lets a second gateway of the same user
 * bind a port the first already serves, and the two would then split its connections silently;
 * a socket bound without the option is refused by any listener there, so the workers listen with
 * reusePort only when this probe could bind (else node:cluster's shared socket, and its
 * EADDRINUSE). Port 0 is always free.
 */
function portIsFree(host: string, port: number): Promise<boolean> {
  if (port === 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const probe = createNetServer();
    probe.once('error', () => resolve(false));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}
