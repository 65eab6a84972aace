/**
 * The command line: serve, check, hash-key, new-key, backend, schema. Exit codes: 0 ok, 1 runtime
 * failure, 2 bad usage, 78 bad config (EX_CONFIG, sysexits.h).
 *
 * Output: while serving, stdout carries only pino's JSON lines (NDJSON, issue 13 item 4); human text
 * (the banner, the ephemeral key, usage errors, policy problems) goes to stderr.
 */
import cluster from 'node:cluster';
import { existsSync, readFileSync, watch } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { pino, type Logger, type LoggerOptions } from 'pino';
import type { ExchangeObserver } from '../core/record.js';
import { type AdminHandle, type AdminOptions, READY, startAdmin } from '../ops/admin.js';
import { primaryOps, serveWorkerOps } from '../ops/cluster.js';
import { exitWhenWritten, logDestination } from '../ops/access-log.js';
import { createOps, type Phase } from '../ops/index.js';
import { perWorkerNotice } from '../policies/rate-limit/index.js';
import { closeStores, openDeprecationLedger, setStoreLog } from '../stores/index.js';
import { createBackendServer } from '../backend/server.js';
import { formatProblems, loadPolicyFile, type LoadOptions, type Overrides } from '../config/load.js';
import { policyFileSchema } from '../config/schema.js';
import type { PolicyConfig } from '../config/types.js';
import { compileGateway, GatewayHolder } from '../gateway.js';
import { buildKeyRing, describeKeys, hashKey, newKey } from '../policies/auth/index.js';
import { probeUpstream } from './probe.js';
import { superviseWorkers } from './supervisor.js';

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
                      /v1 prefix, e.g. http://127.0.0.1:8081/v1
  --host H, --port N  override server.host and server.port (0 picks a free port)
  --admin-host H, --admin-port N
                      where the admin listener binds
  --ephemeral-key     when no API key is configured, make one for this run and print it on stderr
                      (the quickstart; nothing is saved)
  --watch             reload the policy when the file changes (SIGHUP always reloads)
  --engine E          undici (default, fastest), fastify or http-proxy-3: same policies on each
  --workers N         N processes share the port (node:cluster); SIGHUP reloads every one

stdout carries JSON log lines only; the banner and the ephemeral key go to stderr.
At start, the upstream is probed once (GET <upstream>/pets?limit=1, no key) and a warning is logged
when its base path looks wrong. SIGTERM/SIGINT stop gracefully (server.shutdownGraceMs).
Exit codes: 0 stopped by a signal, 1 runtime failure, 2 bad usage, 78 bad policy or no API key.
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
};

/** Bad usage: one line, then where to read more (never the whole help: issue 12, item 9). */
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
  if (url === undefined || !/^https?:$/.test(url.protocol) || /[\s?#]/.test(text) || !/^https?:\/\//.test(text)) {
    throw new UsageError(`--upstream must be 'builtin' or an http(s) base URL such as http://127.0.0.1:8081/v1, not '${text}'`, command);
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
  };
}

/**
 * The one validation path of `serve`, `check` and a reload (issue 12, item 9): the file with the
 * command line's overrides, then what a running gateway needs (an API key). With --ephemeral-key and
 * no key configured, a key is made for the run and put in the environment (`env` is changed).
 */
function loadForServe(
  file: string,
  env: Record<string, string | undefined>,
  overrides: Overrides,
  ephemeralKey: boolean,
): { ok: true; config: PolicyConfig; ephemeral: string | undefined } | { ok: false; problems: string } {
  const keys: LoadOptions['keys'] = ephemeralKey ? 'ephemeral-allowed' : 'required';
  let loaded = loadPolicyFile(file, { env }, overrides, { keys });
  if (!loaded.ok) return { ok: false, problems: formatProblems(file, loaded.problems) };
  const auth = loaded.config.policies.auth;
  if (buildKeyRing(auth, { env }).size > 0 || auth.keysFromEnv === null) return { ok: true, config: loaded.config, ephemeral: undefined };
  const ephemeral = newKey();
  env[auth.keysFromEnv] = ephemeral;
  loaded = loadPolicyFile(file, { env }, overrides, { keys: 'required' });
  if (!loaded.ok) return { ok: false, problems: formatProblems(file, loaded.problems) };
  return { ok: true, config: loaded.config, ephemeral };
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
  const loaded = loadForServe(file, env, overrides, values['ephemeral-key'] === true);
  if (!loaded.ok) {
    process.stderr.write(loaded.problems + '\n');
    return EXIT.config;
  }
  const { ephemeral } = loaded;
  const config = loaded.config;
  // Stdout is NDJSON (operator messages and access lines, one writer); written asynchronously so a
  // slow reader of stdout does not hold the event loop, flushed at exit.
  const log = pino(loggerOptions(config.log.level), logDestination());
  setStoreLog(log);
  const adminConfig = config.server.admin;
  // Where the process is in its life, for /readyz: starting until it listens, draining from SIGTERM.
  let phase: Phase = 'starting';
  if (workers > 1 && cluster.isPrimary) {
    // The primary probes once for all workers; a worker does not.
    void probeUpstream(config, log);
    const notice = perWorkerNotice(config.policies['rate-limit'], workers);
    if (notice !== undefined) log.warn({ workers }, notice);
    if (adminConfig !== null) {
      const group = primaryOps({
        workers,
        readiness: () => (phase === 'draining' ? { ready: false, reason: 'draining' } : READY),
        deprecated: [{ operation: 'getPet', sunset: config.policies.deprecation.sunset }],
        sharedLedger: config.policies['rate-limit'].store === 'memory' ? undefined : openDeprecationLedger(config.policies['rate-limit'].store),
      });
      const admin = await listenAdmin(adminConfig, group.callbacks, log);
      if (admin === undefined) return EXIT.runtime;
      const drain = () => {
        phase = 'draining';
      };
      process.once('SIGTERM', drain);
      process.once('SIGINT', drain);
    }
    return superviseWorkers({ workers, env, log, onListening: (banner) => printBanner(`${banner} with ${workers} workers`, ephemeral, undefined) });
  }
  const holder = new GatewayHolder(compileGateway(config, { env, log }));
  const ops = createOps(config, { log, breakerOpen: () => holder.breaker?.rejecting === true });
  const running = await startEngine(engine, holder, log, ops.observer);
  const { host, port, shutdownGraceMs } = config.server;
  let admin: AdminHandle | undefined;
  if (cluster.isWorker) {
    if (adminConfig !== null) serveWorkerOps({ registry: ops.metrics.registry, readiness: () => ops.readiness(phase), ledger: ops.ledger });
  } else if (adminConfig !== null) {
    admin = await listenAdmin(
      adminConfig,
      {
        readiness: () => ops.readiness(phase),
        metrics: async () => ({ body: await ops.metrics.registry.metrics(), contentType: ops.metrics.registry.contentType }),
        deprecations: () => ops.deprecations(),
      },
      log,
    );
    if (admin === undefined) {
      await running.close().catch(() => undefined);
      return EXIT.runtime;
    }
  }
  // Signal handlers come before listening: a SIGHUP that arrives while starting (a cluster primary
  // forwards it as soon as one worker is up) must reload, not kill the process.
  // Hot reload: re-read the file; an invalid file is refused with its problems logged and the old
  // policy stays; requests in flight finish under the policy they started with.
  const reload = (reason: string) => {
    const next = loadPolicyFile(file, { env }, overrides, { keys: 'required' });
    const problems = !next.ok ? next.problems : holder.replace(compileGateway(next.config, { env, log }, holder.current.backend));
    ops.metrics.reloaded(problems.length === 0);
    if (problems.length > 0) log.error({ file, reason, problems: problems.map((p) => `${p.path}: ${p.message}`) }, 'policy reload refused; the previous policy stays');
    else log.info({ file, reason }, 'policy reloaded');
  };
  process.on('SIGHUP', () => reload('SIGHUP'));
  if (values.watch === true) watchFile(file, () => reload('file changed'));

  // Graceful shutdown: stop accepting, let in-flight requests finish within shutdownGraceMs, exit 0.
  // Answers from then on say `Connection: close`, so a keep-alive client does not hold the process
  // open for the keep-alive timeout, nor send more requests on its connection.
  let stopping = false;
  const active = new Set<ServerResponse>();
  running.server.on('request', (_req: IncomingMessage, res: ServerResponse) => {
    if (stopping) res.shouldKeepAlive = false;
    active.add(res);
    res.once('close', () => active.delete(res));
  });
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    // /readyz turns 503 at once, so a load balancer stops sending before the drain ends.
    phase = 'draining';
    const since = performance.now();
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
        await admin?.close();
      })
      .then(
      () => exit(EXIT.ok),
      (err: unknown) => {
        log.error({ err }, 'error while stopping');
        exit(EXIT.runtime);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  try {
    await running.listen(host, port);
  } catch (err) {
    // A worker that cannot listen must exit (main.ts lets its IPC channel go), never stay up silently.
    const e = err as NodeJS.ErrnoException;
    process.stderr.write(`petstore-gateway: cannot listen on ${host}:${port}: ${e.code ?? e.message}\n`);
    await running.close().catch(() => undefined);
    return EXIT.runtime;
  }
  phase = 'serving';
  const addr = running.server.address() as AddressInfo;
  const url = `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`;
  log.info({ url, engine, upstream: loaded.config.upstream.url }, 'petstore-gateway listening');
  const banner = `petstore-gateway listening on ${url} (upstream: ${loaded.config.upstream.url}, engine: ${engine})`;
  // A cluster worker tells the primary, which prints one banner for all.
  if (cluster.isWorker) process.send?.({ type: 'listening', banner });
  else {
    printBanner(banner, ephemeral, url);
    void probeUpstream(loaded.config, log);
  }
  return -1; // keep running
}

/** The human text of a start, on stderr: stdout stays NDJSON (issue 13, item 4). */
function printBanner(banner: string, ephemeral: string | undefined, url: string | undefined): void {
  process.stderr.write(banner + '\n');
  if (ephemeral !== undefined) {
    process.stderr.write(`API key for this run (kept in memory only): ${ephemeral}\n`);
    if (url !== undefined) process.stderr.write(`try: curl -H 'Authorization: Bearer ${ephemeral}' ${url}/v1/pets\n`);
  }
}

/** The admin listener on its own port; undefined (after a clear message) when it cannot listen. */
async function listenAdmin(at: { host: string; port: number }, callbacks: Pick<AdminOptions, 'readiness' | 'metrics' | 'deprecations'>, log: Logger): Promise<AdminHandle | undefined> {
  try {
    const admin = await startAdmin({ host: at.host, port: at.port, ...callbacks, onError: (err, path) => log.error({ err, path }, 'admin endpoint failed') });
    const a = admin.address();
    log.info({ url: `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}` }, 'admin listening (/healthz, /readyz, /metrics, /deprecations)');
    return admin;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    process.stderr.write(`petstore-gateway: the admin listener cannot listen on ${at.host}:${at.port}: ${e.code ?? e.message} (set server.admin or --admin-port, or server.admin: null to turn it off)\n`);
    return undefined;
  }
}

interface RunningEngine {
  readonly server: Server;
  listen(host: string, port: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * The standalone server of an engine: node:http + undici, Fastify + @fastify/http-proxy, or
 * node:http + http-proxy-3. Each engine's module is imported here, when it is chosen, so a run
 * loads one engine's library, not all three (issue 11, item 5).
 */
async function startEngine(engine: string, holder: GatewayHolder, log: Logger, observer: ExchangeObserver): Promise<RunningEngine> {
  if (engine === 'fastify') {
    const { buildServer } = await import('../engines/fastify.js');
    const app = await buildServer(holder, { loggerInstance: log, log, observer });
    return {
      server: app.server,
      listen: async (host, port) => {
        await app.listen({ host, port });
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
    listen: (host, port) =>
      new Promise((resolve, reject) => {
        handle.server.once('error', reject);
        handle.server.listen(port, host, () => {
          handle.server.off('error', reject);
          resolve();
        });
      }),
    close: () => handle.close(),
  };
}

/** Calls `onChange` (debounced) when the file changes, also when an editor replaces it. */
function watchFile(file: string, onChange: () => void): void {
  let timer: NodeJS.Timeout | undefined;
  const fire = () => {
    clearTimeout(timer);
    timer = setTimeout(onChange, 100);
  };
  const dir = dirname(file);
  const name = basename(file);
  // Watching the directory sees a rename-into-place as well as an in-place write.
  watch(dir, (_event, changed) => {
    if (changed === null || changed === name) fire();
  }).unref();
}

/** `check`: the validation `serve` runs, with the same flags and environment, nothing started. */
function check(args: string[]): number {
  const { values, positionals } = parse('check', args, OVERRIDE_OPTIONS, 1);
  const file = positionals[0] ?? defaultPolicyFile();
  const overrides = overridesOf('check', values);
  const env: Record<string, string | undefined> = { ...process.env };
  const loaded = loadForServe(file, env, overrides, values['ephemeral-key'] === true);
  if (!loaded.ok) {
    process.stdout.write(loaded.problems + '\n');
    return EXIT.config;
  }
  // Issue 14: each key's id, expiry and operations, one indented line each (never a hash or a key).
  // An ephemeral key (--ephemeral-key) is made per run: said as such, not as a key of the environment.
  const described = describeKeys(loaded.config.policies.auth, { env: loaded.ephemeral === undefined ? env : process.env });
  if (loaded.ephemeral !== undefined) described.push('(ephemeral): made at each start, all operations');
  const keys = described.map((line) => `  key ${line}\n`);
  process.stdout.write(`${file}: ok\n${keys.join('')}`);
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
      case 'schema':
        parse('schema', rest, {});
        process.stdout.write(JSON.stringify(policyFileSchema(), null, 2) + '\n');
        return EXIT.ok;
      case '--help':
      case '-h':
      case 'help': {
        const topic = rest[0];
        if (topic !== undefined && COMMAND_HELP[topic] === undefined) throw new UsageError(`unknown command '${topic}'`);
        process.stdout.write(topic === undefined ? HELP : COMMAND_HELP[topic]!);
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
