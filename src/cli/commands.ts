/**
 * The command line: serve, check, hash-key, new-key, backend, schema. Exit codes: 0 ok, 1 runtime
 * failure, 2 bad usage, 78 bad config (EX_CONFIG, sysexits.h).
 */
import cluster from 'node:cluster';
import { existsSync, readFileSync, watch } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { pino, type Logger, type LoggerOptions } from 'pino';
import { buildServer } from '../engines/fastify.js';
import { buildProxyServer } from '../engines/http-proxy-3.js';
import type { NodeServerHandle } from '../fronts/node-server.js';
import { buildUndiciServer } from '../engines/undici.js';
import { createBackendServer } from '../backend/server.js';
import { formatProblems, loadPolicyFile } from '../config/load.js';
import { policyFileSchema } from '../config/schema.js';
import { createGateway, GatewayHolder } from '../gateway.js';
import { buildKeyRing, hashKey, newKey } from '../policies/auth/index.js';

export const EXIT = { ok: 0, runtime: 1, usage: 2, config: 78 } as const;

/** The adapters `serve --engine` runs; the first is the default. */
const ENGINES = ['undici', 'fastify', 'http-proxy-3'];

const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

const HELP = `petstore-gateway: a policy-enforcing gateway for the pet store interface

Usage:
  petstore-gateway serve [--policy FILE] [--upstream URL|builtin] [--host H] [--port N] [--ephemeral-key] [--watch]
                         [--engine undici|fastify|http-proxy-3] [--workers N]
      Run the gateway. Without --policy: policies/default.yaml. --upstream, --host and --port
      override the file. --ephemeral-key: when no API key is configured, make one for this run
      and print it (the quickstart; nothing is saved). SIGHUP (and, with --watch, a change of
      the file) reloads the policy; SIGTERM/SIGINT stop gracefully. --engine: the adapter
      (undici, the default and fastest; fastify; or http-proxy-3); all enforce the same
      policies. --workers N: N
      processes share the port (node:cluster); SIGHUP reloads every one. With the built-in
      backend each worker has its own in-memory store.
  petstore-gateway check FILE
      Validate a policy file; print every problem (exit 78 if any).
  petstore-gateway hash-key [--id NAME]
      Read a key on stdin; print the line for a policy file's auth.keys.
  petstore-gateway new-key
      Print a new random API key (256 bits).
  petstore-gateway backend [--host H] [--port N]
      Run the reference backend on its own (listPets, createPet, getPet, in memory).
  petstore-gateway schema
      Print the JSON Schema of policy files.
  petstore-gateway --help

Environment:
  PETSTORE_API_KEYS   more API keys, comma-separated (the name is set by auth.keysFromEnv)
  LOG_LEVEL           fatal, error, warn, info (default), debug, trace, silent

Exit codes: 0 ok, 1 runtime failure, 2 bad usage, 78 bad policy file.
`;

class UsageError extends Error {}

function defaultPolicyFile(): string {
  const local = join(process.cwd(), 'policies', 'default.yaml');
  return existsSync(local) ? local : join(PACKAGE_ROOT, 'policies', 'default.yaml');
}

function parse(args: string[], options: ParseArgsConfig['options'], positionals = 0) {
  let parsed;
  try {
    parsed = parseArgs({ args, options: options ?? {}, allowPositionals: positionals > 0, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (parsed.positionals.length > positionals) throw new UsageError(`unexpected argument '${parsed.positionals[positionals]}'`);
  return parsed;
}

function portOf(value: unknown): number | string | undefined {
  if (typeof value !== 'string') return undefined;
  return /^\d{1,5}$/.test(value) ? Number(value) : value;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** pino options: level from LOG_LEVEL; credentials redacted should any serializer ever reach them. */
function loggerOptions(): LoggerOptions {
  return {
    level: process.env.LOG_LEVEL ?? 'info',
    redact: { paths: ['req.headers.authorization', 'headers.authorization', 'authorization'], censor: '[redacted]' },
  };
}

async function serve(args: string[]): Promise<number> {
  const { values } = parse(args, {
    policy: { type: 'string' },
    upstream: { type: 'string' },
    host: { type: 'string' },
    port: { type: 'string' },
    'ephemeral-key': { type: 'boolean' },
    watch: { type: 'boolean' },
    engine: { type: 'string' },
    workers: { type: 'string' },
  });
  const engine = (values.engine as string | undefined) ?? 'undici';
  const workersText = (values.workers as string | undefined) ?? '1';
  if (!/^[1-9][0-9]{0,2}$/.test(workersText)) throw new UsageError(`--workers must be a whole number from 1 to 999, not '${workersText}'`);
  const workers = Number(workersText);
  if (!ENGINES.includes(engine)) throw new UsageError(`--engine must be one of ${ENGINES.join(', ')}, not '${engine}'`);
  const file = (values.policy as string | undefined) ?? defaultPolicyFile();
  const env: Record<string, string | undefined> = { ...process.env };
  const overrides = { upstreamUrl: values.upstream as string | undefined, host: values.host as string | undefined, port: portOf(values.port) };
  let loaded = loadPolicyFile(file, { env }, overrides);
  if (!loaded.ok) {
    process.stderr.write(formatProblems(file, loaded.problems) + '\n');
    return EXIT.config;
  }
  let ephemeral: string | undefined;
  const auth = loaded.config.policies.auth;
  if (buildKeyRing(auth, { env }).size === 0) {
    if (values['ephemeral-key'] !== true || auth.keysFromEnv === null) {
      process.stderr.write(
        `${file}: $.policies.auth: no API key is configured, so every request would be refused. ` +
          `Add keys (petstore-gateway hash-key), set ${auth.keysFromEnv ?? 'auth.keysFromEnv'}, or pass --ephemeral-key.\n`,
      );
      return EXIT.config;
    }
    ephemeral = newKey();
    env[auth.keysFromEnv] = ephemeral;
    loaded = loadPolicyFile(file, { env }, overrides);
    if (!loaded.ok) return EXIT.config;
  }
  const log = pino(loggerOptions());
  if (workers > 1 && cluster.isPrimary) return runPrimary(workers, env, ephemeral, log);
  const holder = new GatewayHolder(createGateway(loaded.config, { env, log }));
  const running = await startEngine(engine, holder, log);
  const { host, port, shutdownGraceMs } = loaded.config.server;
  // Signal handlers come before listening: a SIGHUP that arrives while starting (a cluster primary
  // forwards it as soon as one worker is up) must reload, not kill the process.
  // Hot reload: re-read the file; an invalid file is refused with its problems logged and the old
  // policy stays; requests in flight finish under the policy they started with.
  const reload = (reason: string) => {
    const next = loadPolicyFile(file, { env }, overrides);
    const problems = !next.ok
      ? next.problems
      : buildKeyRing(next.config.policies.auth, { env }).size === 0
        ? [{ path: '$.policies.auth', message: 'no API key is configured, so every request would be refused' }]
        : holder.replace(createGateway(next.config, { env, log }, holder.current.backend));
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
    for (const res of active) if (!res.headersSent) res.shouldKeepAlive = false;
    log.info({ signal, graceMs: shutdownGraceMs }, 'shutting down');
    const force = setTimeout(() => {
      log.warn({ graceMs: shutdownGraceMs }, 'requests still in flight after the grace period; closing their connections');
      running.server.closeAllConnections();
    }, shutdownGraceMs);
    force.unref();
    running.close().then(
      () => process.exit(EXIT.ok),
      () => process.exit(EXIT.runtime),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  await running.listen(host, port);
  const addr = running.server.address() as AddressInfo;
  const url = `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`;
  log.info({ url, engine, upstream: loaded.config.upstream.url }, 'petstore-gateway listening');
  const banner = `petstore-gateway listening on ${url} (upstream: ${loaded.config.upstream.url}, engine: ${engine})`;
  // A cluster worker tells the primary, which prints one banner for all.
  if (cluster.isWorker) process.send?.({ type: 'listening', banner });
  else process.stdout.write(banner + '\n');
  if (ephemeral !== undefined) {
    process.stdout.write(`API key for this run (kept in memory only): ${ephemeral}\n`);
    process.stdout.write(`try: curl -H 'Authorization: Bearer ${ephemeral}' ${url}/v1/pets\n`);
  }

  return -1; // keep running
}

interface RunningEngine {
  readonly server: Server;
  listen(host: string, port: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * The standalone server of an engine: node:http + undici, Fastify + @fastify/http-proxy, or
 * node:http + http-proxy-3.
 */
async function startEngine(engine: string, holder: GatewayHolder, log: Logger): Promise<RunningEngine> {
  if (engine !== 'fastify') {
    const handle: NodeServerHandle = engine === 'undici' ? buildUndiciServer(holder, { log }) : buildProxyServer(holder, { log });
    return {
      server: handle.server,
      listen: (host, port) =>
        new Promise((resolve, reject) => {
          handle.server.once('error', reject);
          handle.server.listen(port, host, () => resolve());
        }),
      close: () => handle.close(),
    };
  }
  const app = await buildServer(holder, { loggerInstance: log });
  return {
    server: app.server,
    listen: async (host, port) => {
      await app.listen({ host, port });
    },
    close: () => app.close(),
  };
}

/**
 * `serve --workers N`: the primary forks N workers (node:cluster; they share the listening socket),
 * hands each the same environment (an ephemeral key included), prints one banner, forwards SIGHUP
 * (every worker reloads the same file) and SIGTERM/SIGINT (each stops gracefully), and exits 0 once
 * all have. A worker that dies unexpectedly is replaced.
 */
function runPrimary(workers: number, env: Record<string, string | undefined>, ephemeral: string | undefined, log: Logger): number {
  let stopping = false;
  let listening = 0;
  const fork = () => {
    const worker = cluster.fork(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined)));
    worker.on('message', (msg: { type?: string; banner?: string }) => {
      // One banner, once every worker listens (so a SIGHUP from then on reaches them all).
      if (msg.type !== 'listening' || ++listening !== workers) return;
      process.stdout.write(`${msg.banner} with ${workers} workers\n`);
      if (ephemeral !== undefined) {
        process.stdout.write(`API key for this run (kept in memory only): ${ephemeral}\n`);
      }
    });
  };
  for (let i = 0; i < workers; i++) fork();
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(EXIT.ok);
      return;
    }
    log.error({ pid: worker.process.pid, code, signal }, 'worker exited; starting another');
    fork();
  });
  const each = (signal: NodeJS.Signals) => {
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill(signal);
  };
  process.on('SIGHUP', () => each('SIGHUP'));
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    each(signal);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  return -1;
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

function check(args: string[]): number {
  const { positionals } = parse(args, {}, 1);
  const file = positionals[0];
  if (file === undefined) throw new UsageError('check needs a FILE');
  const loaded = loadPolicyFile(file, { env: process.env });
  if (!loaded.ok) {
    process.stdout.write(formatProblems(file, loaded.problems) + '\n');
    return EXIT.config;
  }
  process.stdout.write(`${file}: ok\n`);
  return EXIT.ok;
}

async function hashKeyCommand(args: string[]): Promise<number> {
  const { values } = parse(args, { id: { type: 'string' } });
  const id = (values.id as string | undefined) ?? 'key-1';
  const key = (await readStdin()).replace(/\r?\n$/, '');
  if (key === '' || /\s/.test(key)) throw new UsageError('hash-key reads one key, without spaces, on stdin');
  process.stdout.write(`- { id: ${JSON.stringify(id)}, hash: "${hashKey(key)}" }\n`);
  return EXIT.ok;
}

async function backend(args: string[]): Promise<number> {
  const { values } = parse(args, { host: { type: 'string' }, port: { type: 'string' } });
  const port = portOf(values.port) ?? 8081;
  if (typeof port !== 'number' || port > 65535) throw new UsageError('--port must be a number from 0 to 65535');
  const server = createBackendServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, (values.host as string | undefined) ?? '127.0.0.1', resolve);
  });
  const addr = server.address() as AddressInfo;
  process.stdout.write(`petstore-gateway backend listening on http://${addr.address}:${addr.port}/v1\n`);
  const stop = () => server.close(() => process.exit(EXIT.ok));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  return -1;
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
        parse(rest, {});
        process.stdout.write(newKey() + '\n');
        return EXIT.ok;
      case 'backend':
        return await backend(rest);
      case 'schema':
        parse(rest, {});
        process.stdout.write(JSON.stringify(policyFileSchema(), null, 2) + '\n');
        return EXIT.ok;
      case '--help':
      case '-h':
      case 'help':
        process.stdout.write(HELP);
        return EXIT.ok;
      case '--version':
        process.stdout.write(JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')).version + '\n');
        return EXIT.ok;
      default:
        throw new UsageError(command === undefined ? 'a command is required' : `unknown command '${command}'`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`petstore-gateway: ${err.message}\n\n${HELP}`);
      return EXIT.usage;
    }
    process.stderr.write(`petstore-gateway: ${(err as Error).message}\n`);
    return EXIT.runtime;
  }
}
