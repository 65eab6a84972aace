/**
 * The command line: serve, check, hash-key, new-key, backend, schema. Exit codes: 0 ok, 1 runtime
 * failure, 2 bad usage, 78 bad config (EX_CONFIG, sysexits.h).
 *
 * Output: while serving, stdout carries only pino's JSON lines (NDJSON); human text
 * (the banner, the ephemeral key, usage errors, policy problems) goes to stderr.
 */
import cluster from 'node:cluster';
import { existsSync, readFileSync, realpathSync, watch } from 'node:fs';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { pino, type Logger, type LoggerOptions } from 'pino';
import type { ExchangeObserver } from '../core/record.js';
import { type AdminHandle, type AdminOptions, READY, startAdmin } from '../ops/admin.js';
import { primaryOps, serveWorkerOps } from '../ops/cluster.js';
import { exitWhenWritten, processLogger } from '../ops/access-log.js';
import { createOps, type Ops, type Phase } from '../ops/index.js';
import { throttledLogMethod } from '../ops/log-throttle.js';
import { builtinExposureProblem, perClientBoundsNotice, warnAtStart, warnWeakenings } from '../config/security-notices.js';
import { perKeyNotes, perWorkerNotice } from '../policies/rate-limit/index.js';
import { maskUrl } from '../stores/connection-schema.js';
import { closeStores, openDeprecationLedger, setStoreLog } from '../stores/index.js';
import { createBackendServer } from '../backend/server.js';
import { formatOf, formatProblems, parsePolicy, readPolicyText, upstreamUrlWritten, type LoadOptions, type Overrides } from '../config/load.js';
import { policyFileSchema } from '../config/schema.js';
import type { PolicyConfig } from '../config/types.js';
import { compileGateway, GatewayHolder, restartOnlyChanges } from '../gateway.js';
import { buildKeyRing, describeKeys, hashKey, newKey } from '../policies/auth/index.js';
import { probeUpstream } from './probe.js';
import { HEALTH_HELP, healthCommand, HealthUsageError } from './health.js';
import { onReloadSignal, onStopSignal } from './signals.js';
import { DEFAULT_LIMITS, reusePortSupported, superviseWorkers } from './supervisor.js';
import { describeListenerTls, listenerTlsFiles, registerCertificateGauge, reloadListenerTls, tlsProblems, warnIfExpiring } from '../tls/ops.js';
import { adminKeyRoutes, keysCommand, KEYS_HELP, KeysUsageError } from './keys.js';
import { adminProblems, adminTls, adminWatchFiles, reloadAdmin } from './admin.js';
import { closeRegistries, registriesReady, setRegistryLog } from '../registry/index.js';
import { connectionCountsOf, PIPELINE_OVERFLOW } from '../fronts/connections.js';
import { h2CountsOf } from '../tls/h2-streams.js';
import type { OverflowEvent } from '../ops/metrics.js';

export const EXIT = { ok: 0, runtime: 1, usage: 2, config: 78 } as const;

/** The engines `serve --engine` runs (src/engines); the first is the default. */
const ENGINES = ['undici', 'fastify', 'http-proxy-3'];

const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

const SERVE_HELP = `Usage: petstore-gateway serve [--policy FILE] [--upstream URL|builtin] [--host H] [--port N]
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

const CHECK_HELP = `Usage: petstore-gateway check [FILE] [--upstream URL] [--host H] [--port N] [--ephemeral-key]

Validate a policy file exactly as \`serve\` would with the same flags and environment (e.g.
PETSTORE_API_KEYS): every problem in one pass, one line each (FILE: $.path: message).
Without FILE: the file \`serve\` would use. Exit 0 when serve would start, 78 otherwise.
`;

const HASH_KEY_HELP = `Usage: petstore-gateway hash-key [--id NAME]

Read one API key on stdin; print its line for a policy file's auth.keys (only the SHA-256 hash).
  printf %s "$KEY" | petstore-gateway hash-key --id ops
`;

const NEW_KEY_HELP = `Usage: petstore-gateway new-key

Print a new random API key (256 bits, psg_ prefix) on stdout.
`;

const BACKEND_HELP = `Usage: petstore-gateway backend [--host H] [--port N]

Run the reference backend on its own (listPets, createPet, getPet, in memory); its base URL,
ending with /v1, is printed on stdout. Default 127.0.0.1:8081.
`;

const SCHEMA_HELP = `Usage: petstore-gateway schema

Print the JSON Schema of policy files.
`;

const HELP = `petstore-gateway: a policy-enforcing gateway for the pet store interface

Usage:
  petstore-gateway serve [--policy FILE] [--upstream URL|builtin] [--port N] [--ephemeral-key] ...
      Run the gateway.
  petstore-gateway check [FILE]
      Validate a policy file as serve would; print every problem (exit 78 if any).
  petstore-gateway hash-key [--id NAME]
      Read a key on stdin; print the line for a policy file's auth.keys.
  petstore-gateway new-key
      Print a new random API key (256 bits).
  petstore-gateway backend [--host H] [--port N]
      Run the reference backend on its own.
  petstore-gateway keys create|list|rotate|revoke ...
      Manage the keys of the key registry (policies.auth.registry).
  petstore-gateway health [--pid N]
      The container's healthcheck: is the serve or backend process N (default 1) answering?
  petstore-gateway schema
      Print the JSON Schema of policy files.
  petstore-gateway --version

'petstore-gateway <command> --help' for a command's options.

Environment:
  PETSTORE_API_KEYS   API keys, comma-separated (the name is set by auth.keysFromEnv)
  LOG_LEVEL           fatal, error, warn, info (default), debug, trace, silent

Exit codes: 0 ok, 1 runtime failure, 2 bad usage, 78 bad policy file.
`;

const COMMAND_HELP: Readonly<Record<string, string>> = {
  serve: SERVE_HELP,
  check: CHECK_HELP,
  'hash-key': HASH_KEY_HELP,
  'new-key': NEW_KEY_HELP,
  backend: BACKEND_HELP,
  schema: SCHEMA_HELP,
  keys: KEYS_HELP,
  health: HEALTH_HELP,
};

/** Bad usage: one line, then where to read more (never the whole help). */
class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: string,
  ) {
    super(message);
  }
}

/** `--help` on a command: print its help and exit 0. */
class HelpRequested extends Error {
  constructor(readonly command: string) {
    super(command);
  }
}

function defaultPolicyFile(): string {
  const local = join(process.cwd(), 'policies', 'default.yaml');
  return existsSync(local) ? local : join(PACKAGE_ROOT, 'policies', 'default.yaml');
}

function parse(
  command: string,
  args: string[],
  options: ParseArgsConfig['options'],
  positionals = 0,
): { values: Record<string, string | boolean | undefined>; positionals: string[] } {
  let parsed;
  try {
    parsed = parseArgs({ args, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: positionals > 0, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message, command);
  }
  if (parsed.values.help === true) throw new HelpRequested(command);
  if (parsed.positionals.length > positionals) throw new UsageError(`unexpected argument '${parsed.positionals[positionals]}'`, command);
  return { values: parsed.values as Record<string, string | boolean | undefined>, positionals: parsed.positionals };
}

/** A port flag: a whole number from 0 to 65535, else a usage error that names the flag. */
function portFlag(command: string, flag: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const text = String(value);
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65535) throw new UsageError(`${flag} must be a whole number from 0 to 65535, not '${text}'`, command);
  return Number(text);
}

function hostFlag(command: string, flag: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  const text = String(value);
  if (text === '' || /\s/.test(text)) throw new UsageError(`${flag} must be a host name or IP address, not '${text}'`, command);
  return text;
}

/** --upstream: "builtin" or an http(s) URL without query or fragment (the same rule as upstream.url). */
function upstreamFlag(command: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  const text = String(value);
  if (text === 'builtin') return text;
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  // The value is echoed masked: a user or password in it must not reach a terminal log or CI output.
  if (url === undefined || !/^https?:$/.test(url.protocol) || /[\s?#]/.test(text) || !/^https?:\/\//.test(text)) {
    throw new UsageError(`--upstream must be 'builtin' or an http(s) base URL such as http://127.0.0.1:8081/v1, not '${maskUrl(text)}'`, command);
  }
  if (url.username !== '' || url.password !== '') {
    throw new UsageError(`--upstream takes no user or password ('${maskUrl(text)}'): a credential for the upstream goes in policies.auth.upstreamAuthorization`, command);
  }
  return text;
}

const OVERRIDE_OPTIONS = {
  upstream: { type: 'string' },
  host: { type: 'string' },
  port: { type: 'string' },
  'ephemeral-key': { type: 'boolean' },
} as const;

function overridesOf(command: string, values: Record<string, unknown>): Overrides {
  return {
    upstreamUrl: upstreamFlag(command, values.upstream),
    host: hostFlag(command, '--host', values.host),
    port: portFlag(command, '--port', values.port),
    adminHost: hostFlag(command, '--admin-host', values['admin-host']),
    adminPort: portFlag(command, '--admin-port', values['admin-port']),
  };
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** pino options: level from LOG_LEVEL; credentials redacted should any serializer ever reach them. */
function loggerOptions(level = 'info'): LoggerOptions {
  return {
    level: process.env.LOG_LEVEL ?? level,
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: ['req.headers.authorization', 'headers.authorization', 'authorization'], censor: '[redacted]' },
    hooks: { logMethod: throttledLogMethod() },
  };
}

/**
 * The one validation path of `serve`, `check` and a reload: the file with the
 * command line's overrides, then what a running gateway needs (an API key). Only with --ephemeral-key
 * and no key configured is a key made for the run and put in the environment (`env` is changed):
 * a policy with a key registry and no other key starts with no key at all (its keys come from the
 * registry), never with one nobody asked for.
 */
function loadForServe(
  file: string,
  env: Record<string, string | undefined>,
  overrides: Overrides,
  how: { readonly ephemeralKey: boolean; readonly fileGiven: boolean; readonly handed?: string | undefined },
): { ok: true; config: PolicyConfig; text: string; ephemeral: string | undefined } | { ok: false; problems: string } {
  const { ephemeralKey, handed } = how;
  const read = handed === undefined ? readPolicyText(file) : { ok: true as const, text: handed };
  if (!read.ok) return { ok: false, problems: formatProblems(file, read.problems) };
  const load = (keys: LoadOptions['keys']) => parsePolicy(read.text, { env }, overrides, { keys, format: formatOf(file) });
  let loaded = load(ephemeralKey ? 'ephemeral-allowed' : 'required');
  if (!loaded.ok) return { ok: false, problems: formatProblems(file, loaded.problems) };
  // The demo backend on a reachable address only when chosen: by the flag, or by the file given.
  const chosen = overrides.upstreamUrl === 'builtin' || (how.fileGiven && upstreamUrlWritten(read.text, formatOf(file)) === 'builtin');
  const exposed = builtinExposureProblem(loaded.config, chosen);
  if (exposed !== undefined) return { ok: false, problems: formatProblems(file, [exposed]) };
  const tls = tlsProblems(loaded.config);
  if (tls.length > 0) return { ok: false, problems: formatProblems(file, tls) };
  const admin = adminProblems(loaded.config, env);
  if (admin.length > 0) return { ok: false, problems: formatProblems(file, admin) };
  const auth = loaded.config.policies.auth;
  if (!ephemeralKey || buildKeyRing(auth, { env }).size > 0 || auth.keysFromEnv === null) return { ok: true, config: loaded.config, text: read.text, ephemeral: undefined };
  const ephemeral = newKey();
  env[auth.keysFromEnv] = ephemeral;
  loaded = load('required');
  if (!loaded.ok) return { ok: false, problems: formatProblems(file, loaded.problems) };
  return { ok: true, config: loaded.config, text: read.text, ephemeral };
}

/**
 * The variable through which the `--workers` primary hands each worker, replacements included, the
 * policy text in force: a worker never reads the file, which may have been edited since, or left
 * invalid by a refused reload. Internal: taken out of the worker's environment before use.
 */
const WORKER_POLICY_ENV = 'PETSTORE_GATEWAY_WORKER_POLICY';
/**
 * Set by a primary whose workers listen themselves with `reusePort` (supervisor.ts): the port a
 * worker listens on, the one the first worker got when the policy says port 0. Internal, like
 * WORKER_POLICY_ENV.
 */
const WORKER_PORT_ENV = 'PETSTORE_GATEWAY_WORKER_REUSE_PORT';
/** primary -> worker: `{ type, text, reason }`, a reload the primary has validated. */
const POLICY_MESSAGE = 'petstore-gateway:policy';

interface PolicyMessage {
  readonly type: typeof POLICY_MESSAGE;
  readonly text: string;
  readonly reason: string;
}

function isPolicyMessage(m: unknown): m is PolicyMessage {
  return typeof m === 'object' && m !== null && (m as { type?: unknown }).type === POLICY_MESSAGE && typeof (m as { text?: unknown }).text === 'string';
}

/** What `serve` has settled before it starts anything. */
interface ServeSetup {
  readonly file: string;
  /** The policy text in force at start (validated into `config`). */
  readonly text: string;
  readonly config: PolicyConfig;
  readonly env: Record<string, string | undefined>;
  readonly overrides: Overrides;
  readonly engine: string;
  readonly workers: number;
  /** A worker that listens itself, with `reusePort`, on this port (not the policy's). */
  readonly reusePort?: number | undefined;
  readonly watch: boolean;
  readonly ephemeral: string | undefined;
  readonly log: Logger;
}

/** Failed commands of the response cache's store: its Redis store counts them, memory never fails. */
function storeErrorsOf(store: object | undefined): number {
  return store !== undefined && 'errors' in store && typeof store.errors === 'number' ? store.errors : 0;
}

async function serve(args: string[]): Promise<number> {
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
 * Validates a policy text for a reload: as `serve` would, plus what a reload cannot change.
 * Returns the new config, or the problems (then the policy in force stays).
 */
function checkReload(s: ServeSetup, current: PolicyConfig, text: string): { ok: true; config: PolicyConfig } | { ok: false; problems: string[] } {
  const next = parsePolicy(text, { env: s.env }, s.overrides, { keys: 'required', format: formatOf(s.file) });
  const problems = !next.ok ? next.problems : restartOnlyChanges(current, next.config);
  if (next.ok && problems.length === 0) return { ok: true, config: next.config };
  return { ok: false, problems: problems.map((p) => `${p.path}: ${p.message}`) };
}

/**
 * Reads the policy file for a reload; undefined (after its log line) when it cannot be read, or
 * when a file change left the text as it was (an editor's save fires several events: one reload
 * line per change, not per event).
 */
function readForReload(s: ServeSetup, reason: string, last: { text: string }): string | undefined {
  const read = readPolicyText(s.file);
  if (!read.ok) {
    s.log.error({ file: s.file, reason, problems: read.problems.map((p) => p.message) }, 'policy reload refused; the previous policy stays');
    return undefined;
  }
  if (reason === 'file changed' && read.text === last.text) return undefined;
  last.text = read.text;
  return read.text;
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
  const adminConfig = config.server.admin;
  if (adminConfig !== null) {
    const group = primaryOps({
      workers,
      readiness: () => (draining ? { ready: false, reason: 'draining' } : READY),
      deprecated: [{ operation: 'getPet', sunset: config.policies.deprecation.sunset }],
      sharedLedger: config.policies['rate-limit'].store === 'memory' ? undefined : openDeprecationLedger(config.policies['rate-limit'].store),
    });
    const admin = await listenAdmin(adminConfig, { ...group.callbacks, routes: adminKeyRoutes(config, s.env, log) }, log);
    if (admin === undefined) {
      group.close();
      await closeStores();
      await closeRegistries();
      return EXIT.runtime;
    }
  }
  let inForce = { text: s.text, config };
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
    group.stop(signal);
  });
  const reload = (reason: string) => {
    reloadAdmin(reason);
    const text = readForReload(s, reason, last);
    if (text === undefined) return;
    const next = checkReload(s, inForce.config, text);
    if (!next.ok) return void log.error({ file: s.file, reason, problems: next.problems }, 'policy reload refused; the previous policy stays');
    inForce = { text, config: next.config };
    // Each worker applies it and logs its own "policy reloaded" line.
    group.send({ type: POLICY_MESSAGE, text, reason } satisfies PolicyMessage);
  };
  onReloadSignal(reload);
  if (s.watch) watchFiles([s.file], () => reload('file changed'), log);
  if (s.watch) watchFiles(adminWatchFiles(config), () => reloadAdmin('admin file changed'), log);
  // Workers hold the certificate: a renewed file reaches them as a reload of the policy in force.
  if (s.watch) watchFiles(listenerTlsFiles(config), () => group.send({ type: POLICY_MESSAGE, text: inForce.text, reason: 'certificate file changed' } satisfies PolicyMessage), log);
  return -1;
}

/** Where a serving process is in its life, shared by its readiness, its reload and its stop. */
interface ProcessState {
  phase: Phase;
  admin: AdminHandle | undefined;
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
async function serveProcess(s: ServeSetup): Promise<number> {
  const { log, config } = s;
  const state: ProcessState = { phase: 'starting', admin: undefined };
  const holder = new GatewayHolder(compileGateway(config, { env: s.env, log }), { log });
  // The server exists once the engine started; the metric may be scraped before (it reads 0).
  const listening: { server?: Server } = {};
  const overflowCounts = () => overflowsOf(listening.server, holder);
  const ops = createOps(config, { log, breakerOpen: () => holder.breaker?.rejecting === true, current: () => holder.current.config, cacheCounts: () => holder.cache?.counts, cacheStoreErrors: () => storeErrorsOf(holder.cache?.store), overflowCounts });
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
    await running.close().catch(() => undefined);
    await ops.close();
    await closeStores();
    await closeRegistries();
  };
  const adminConfig = config.server.admin;
  if (cluster.isWorker) {
    if (adminConfig !== null) serveWorkerOps({ registry: ops.metrics.registry, readiness: () => ops.readiness(state.phase), ledger: ops.ledger });
  } else if (adminConfig !== null) {
    const metrics = async () => ({ body: await ops.metrics.registry.metrics(), contentType: ops.metrics.registry.contentType });
    const routes = adminKeyRoutes(config, s.env, log);
    state.admin = await listenAdmin(adminConfig, { readiness: () => ops.readiness(state.phase), metrics, deprecations: () => ops.deprecations(), routes }, log);
    if (state.admin === undefined) {
      await release();
      return EXIT.runtime;
    }
  }
  const reload = reloader(s, holder, ops, running.server);
  if (cluster.isWorker) {
    process.on('message', (m: unknown) => {
      if (isPolicyMessage(m)) reload(m.reason, m.text);
    });
    onReloadSignal(() => log.warn({ primaryPid: process.ppid }, 'SIGHUP sent to a worker is ignored: send it to the primary, which reloads every worker'));
  } else {
    onReloadSignal((reason) => reload(reason));
    if (s.watch) watchFiles([s.file], () => reload('file changed'), log);
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
  installStop(config.server, running, ops, state, log);
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
function reloader(s: ServeSetup, holder: GatewayHolder, ops: Ops, server: RunningEngine['server']): (reason: string, text?: string) => void {
  const last = { text: s.text };
  return (reason, handed) => {
    reloadAdmin(reason);
    const text = handed ?? readForReload(s, reason, last);
    if (text === undefined) return;
    const before = holder.current.config;
    const next = checkReload(s, before, text);
    const problems = next.ok ? holder.replace(compileGateway(next.config, { env: s.env, log: s.log }, holder.current.backend)).map((p) => `${p.path}: ${p.message}`) : next.problems;
    ops.metrics.reloaded(problems.length === 0);
    if (problems.length > 0) s.log.error({ file: s.file, reason, problems }, 'policy reload refused; the previous policy stays');
    else {
      s.log.info({ file: s.file, reason }, 'policy reloaded');
      warnWeakenings(before, holder.current.config, s.log);
    }
    // The certificate and key are re-read on every reload (a renewal keeps the same paths).
    reloadListenerTls(server, s.log, reason);
  };
}

/**
 * SIGTERM/SIGINT: /readyz turns 503 `draining` at once; the API listener keeps accepting for
 * `server.drainDelayMs` (a load balancer removes an endpoint some time after it starts stopping:
 * a connection refused meanwhile would be a client's error); then it stops accepting and in-flight
 * requests have `shutdownGraceMs` to finish; exit 0. From the signal on, answers say
 * `Connection: close`, so keep-alive clients move to another instance.
 */
function installStop(server: PolicyConfig['server'], running: RunningEngine, ops: Ops, state: ProcessState, log: Logger): void {
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

/** The human text of a start, on stderr: stdout stays NDJSON. */
function printBanner(banner: string, ephemeral: string | undefined, url: string | undefined): void {
  process.stderr.write(banner + '\n');
  if (ephemeral !== undefined) {
    process.stderr.write(`API key for this run (kept in memory only): ${ephemeral}\n`);
    if (url !== undefined) process.stderr.write(`try: curl -H 'Authorization: Bearer ${ephemeral}' ${url}/v1/pets\n`);
  }
}

/** The admin listener on its own port; undefined (after a clear message) when it cannot listen. */
async function listenAdmin(at: NonNullable<PolicyConfig['server']['admin']>, callbacks: Pick<AdminOptions, 'readiness' | 'metrics' | 'deprecations' | 'routes'>, log: Logger): Promise<AdminHandle | undefined> {
  try {
    const tls = adminTls(at, log);
    const admin = await startAdmin({ host: at.host, port: at.port, allowedHosts: at.allowedHosts, tls: tls?.options, ...callbacks, onError: (err, path) => log.error({ err, path }, 'admin endpoint failed') });
    tls?.attach(admin.server);
    const a = admin.address();
    log.info({ url: `${tls === undefined ? 'http' : 'https'}://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}` }, 'admin listening (/healthz, /readyz, /metrics, /deprecations)');
    return admin;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    process.stderr.write(`petstore-gateway: the admin listener cannot listen on ${at.host}:${at.port}: ${e.code ?? e.message} (set server.admin or --admin-port, or server.admin: null to turn it off)\n`);
    return undefined;
  }
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

/** What a watched file is now: its content through every symlink, or why it cannot be read. */
function snapshotOf(file: string): string {
  try {
    return `${realpathSync(file)}\0${readFileSync(file, 'latin1')}`;
  } catch (err) {
    return `unreadable\0${(err as NodeJS.ErrnoException).code ?? ''}`;
  }
}

/**
 * Calls `onChange` (debounced, once per change) when what one of `files` holds changes: an in-place
 * write, an editor's rename into place, or a Kubernetes ConfigMap or Secret update. The kubelet
 * swaps a symlink (`..data`, through `..data_tmp`) that the file's own symlink goes through, so the
 * events name `..data`, never the file: every event in the file's directory is looked at, and the
 * file's resolved path and content decide whether it changed.
 */
function watchFiles(files: readonly string[], onChange: () => void, log: Logger): void {
  if (files.length === 0) return;
  let last = files.map(snapshotOf).join('\0\0');
  let timer: NodeJS.Timeout | undefined;
  const fire = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const now = files.map(snapshotOf).join('\0\0');
      if (now === last) return;
      last = now;
      onChange();
    }, 100);
  };
  for (const dir of new Set(files.map((f) => dirname(f)))) {
    try {
      // The directory: it sees a rename into place and a symlink swap as well as an in-place write.
      const watcher = watch(dir, fire);
      watcher.on('error', (err) => log.error({ err, dir }, '--watch: the directory can no longer be watched; reload with SIGHUP'));
      watcher.unref();
    } catch (err) {
      log.error({ err, dir }, '--watch: cannot watch the directory; reload with SIGHUP');
    }
  }
}

/** `check`: the validation `serve` runs, with the same flags and environment, nothing started. */
function check(args: string[]): number {
  const { values, positionals } = parse('check', args, OVERRIDE_OPTIONS, 1);
  const file = positionals[0] ?? defaultPolicyFile();
  const overrides = overridesOf('check', values);
  const env: Record<string, string | undefined> = { ...process.env };
  const loaded = loadForServe(file, env, overrides, { ephemeralKey: values['ephemeral-key'] === true, fileGiven: positionals[0] !== undefined });
  if (!loaded.ok) {
    process.stdout.write(loaded.problems + '\n');
    return EXIT.config;
  }
  // Each key's id, expiry and operations, one indented line each (never a hash or a key).
  // An ephemeral key (--ephemeral-key) is made per run: said as such, not as a key of the environment.
  const described = describeKeys(loaded.config.policies.auth, { env: loaded.ephemeral === undefined ? env : process.env });
  if (loaded.ephemeral !== undefined) described.push('(ephemeral): made at each start, all operations');
  const keys = described.map((line) => `  key ${line}\n`);
  const tls = describeListenerTls(loaded.config).map((line) => `  ${line}\n`);
  const notes = perKeyNotes(loaded.config.policies['rate-limit'], loaded.config.policies.auth, { env }).map((line) => `  note: ${line}\n`);
  process.stdout.write(`${file}: ok\n${keys.join('')}${tls.join('')}${notes.join('')}`);
  return EXIT.ok;
}

async function hashKeyCommand(args: string[]): Promise<number> {
  const { values } = parse('hash-key', args, { id: { type: 'string' } });
  const id = (values.id as string | undefined) ?? 'key-1';
  const key = (await readStdin()).replace(/\r?\n$/, '');
  if (key === '' || /\s/.test(key)) throw new UsageError('hash-key reads one key, without spaces, on stdin', 'hash-key');
  process.stdout.write(`- { id: ${JSON.stringify(id)}, hash: "${hashKey(key)}" }\n`);
  return EXIT.ok;
}

async function backend(args: string[]): Promise<number> {
  const { values } = parse('backend', args, { host: { type: 'string' }, port: { type: 'string' } });
  const port = portFlag('backend', '--port', values.port) ?? 8081;
  const host = hostFlag('backend', '--host', values.host) ?? '127.0.0.1';
  const server = createBackendServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const addr = server.address() as AddressInfo;
  process.stdout.write(`petstore-gateway backend listening on http://${addr.address}:${addr.port}/v1\n`);
  const stop = () => server.close(() => process.exit(EXIT.ok));
  // The backend has no file to reload: a SIGHUP (a process manager's reload) leaves it running.
  onReloadSignal(() => process.stderr.write('petstore-gateway backend: SIGHUP ignored: nothing to reload\n'));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  return -1;
}

function version(): string {
  return (JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'serve':
        return await serve(rest);
      case 'check':
        return check(rest);
      case 'hash-key':
        return await hashKeyCommand(rest);
      case 'new-key':
        parse('new-key', rest, {});
        process.stdout.write(newKey() + '\n');
        return EXIT.ok;
      case 'backend':
        return await backend(rest);
      case 'keys':
        if (rest.includes('--help') || rest.includes('-h')) throw new HelpRequested('keys');
        return await keysCommand(rest, PACKAGE_ROOT).catch((err: unknown) => {
          throw err instanceof KeysUsageError ? new UsageError(err.message, 'keys') : err;
        });
      case 'health':
        if (rest.includes('--help') || rest.includes('-h')) throw new HelpRequested('health');
        return await healthCommand(rest, PACKAGE_ROOT).catch((err: unknown) => {
          const parseError = err instanceof TypeError && String((err as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS');
          throw err instanceof HealthUsageError || parseError ? new UsageError((err as Error).message, 'health') : err;
        });
      case 'schema':
        parse('schema', rest, {});
        process.stdout.write(JSON.stringify(policyFileSchema(), null, 2) + '\n');
        return EXIT.ok;
      case '--help':
      case '-h':
      case 'help': {
        const topic = rest[0];
        const text = topic === undefined ? HELP : COMMAND_HELP[topic];
        if (text === undefined) throw new UsageError(`unknown command '${topic}'`);
        process.stdout.write(text);
        return EXIT.ok;
      }
      case '--version':
      case '-V':
      case 'version':
        process.stdout.write(`${version()}\n`);
        return EXIT.ok;
      default:
        throw new UsageError(command === undefined ? 'a command is required' : `unknown command '${command}'`);
    }
  } catch (err) {
    if (err instanceof HelpRequested) {
      process.stdout.write(COMMAND_HELP[err.command] ?? HELP);
      return EXIT.ok;
    }
    if (err instanceof UsageError) {
      const more = err.command === undefined ? `'petstore-gateway --help'` : `'petstore-gateway ${err.command} --help'`;
      process.stderr.write(`petstore-gateway: ${err.message}\nsee ${more}\n`);
      return EXIT.usage;
    }
    process.stderr.write(`petstore-gateway: ${(err as Error).message}\n`);
    return EXIT.runtime;
  }
}
