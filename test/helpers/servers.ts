/**
 * Helpers for the end-to-end tests: a gateway on a real socket, the reference backend as a separate
 * process (the built CLI), an in-process stub upstream for fault tests, and a node:http request
 * helper that gives the exact status, headers and body bytes.
 *
 * Every server listens on 127.0.0.1, port 0; every helper registers its own teardown.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify as yamlStringify } from 'yaml';
import type { TapTest } from './assert.js';
import { PROJECT_ROOT } from './root.js';
export { sleep, waitFor } from './wait.js';
// The engines, the loader and the gateway are imported where first used (listenEngine,
// startGateway): a third of the files importing this module only run the CLI or send requests,
// and loading all of them costs such a file about 0.8 s of CPU at its start.
import type { Gateway, GatewayHolder } from '../../src/gateway.js';
import type { Logger } from 'pino';
import type { ExchangeObserver } from '../../src/core/record.js';

/** The smallest part of tap's Test that the helpers use. */
export interface TeardownHost {
  teardown(fn: () => unknown): void;
}

export { PROJECT_ROOT };
export const CLI = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');
export const JSON_TYPE = 'application/json; charset=utf-8';

/** A fresh API key, a valid RFC 6750 b64token. */
export function testKey(): string {
  return 'e2e_' + randomBytes(18).toString('base64url');
}

/** A new directory under the system's temporary directory, removed at teardown. */
export function tempDir(t: TeardownHost, name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `petstore-gateway-${name}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// ---------------------------------------------------------------------------------------------
// request()

export interface Response {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  /** The raw header lines as received, [name, value, name, value, ...]. */
  readonly rawHeaders: string[];
  readonly raw: Buffer;
  readonly body: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  readonly json: unknown;
}

export interface RequestOptions {
  readonly method?: string;
  /**
   * Sent exactly as given; node adds only Host and Connection, and the helper adds Content-Length
   * for a body unless Content-Length or Transfer-Encoding is given.
   */
  readonly headers?: Record<string, string | number>;
  readonly body?: string | Buffer;
  /** Whole-exchange limit in milliseconds; the request is destroyed past it. */
  readonly timeoutMs?: number;
}

/** One request on a fresh connection (no keep-alive agent, so nothing lingers after a test). */
export function request(url: string, options: RequestOptions = {}): Promise<Response> {
  const timeoutMs = options.timeoutMs ?? 5000;
  return new Promise((resolvePromise, reject) => {
    const headers: Record<string, string | number> = { ...(options.headers ?? {}) };
    // node sends a GET body without framing unless told its length: always frame a given body.
    const named = new Set(Object.keys(headers).map((h) => h.toLowerCase()));
    if (options.body !== undefined && !named.has('content-length') && !named.has('transfer-encoding')) {
      headers['content-length'] = Buffer.byteLength(options.body);
    }
    const req = httpRequest(url, { method: options.method ?? 'GET', headers, agent: false });
    const timer = setTimeout(() => req.destroy(new Error(`request to ${url} timed out after ${timeoutMs} ms`)), timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.on('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      res.on('end', () => {
        clearTimeout(timer);
        const raw = Buffer.concat(chunks);
        const body = raw.toString('utf8');
        let json: unknown;
        try {
          json = body === '' ? undefined : JSON.parse(body);
        } catch {
          json = undefined;
        }
        resolvePromise({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, raw, body, json });
      });
    });
    req.end(options.body);
  });
}

/** Headers with a bearer key, plus any extra ones. */
export function bearer(key: string, extra: Record<string, string | number> = {}): Record<string, string | number> {
  return { authorization: `Bearer ${key}`, ...extra };
}

// ---------------------------------------------------------------------------------------------
// startGateway()

export type PolicyInput = string | Record<string, unknown>;

/**
 * The engines: every end-to-end file runs its tests against each (test/meta/parity.test.ts checks
 * that), so a behaviour cannot exist in one and not the others.
 */
export const ENGINES = ['undici', 'fastify', 'http-proxy-3'] as const;
export type Engine = (typeof ENGINES)[number];

/** Runs `body` once per engine, as a subtest named after it. */
export function forEachEngine(t: TapTest, body: (t: TapTest, engine: Engine) => Promise<void>): void {
  for (const engine of ENGINES) void t.test(`engine: ${engine}`, (tt) => body(tt, engine));
}

export interface GatewayHandle {
  /** `http://127.0.0.1:PORT` (no /v1). */
  readonly url: string;
  /** A key the gateway accepts (from the env map, never process.env). */
  readonly key: string;
  readonly gateway: Gateway;
  readonly engine: Engine;
  /** The listening node:http server (to count its connections, for instance). */
  readonly server: Server;
}

export interface StartGatewayOptions {
  /** The engine; undici (the standalone default) by default. */
  readonly engine?: Engine;
  /** More environment entries for the policies (e.g. an upstreamAuthorization variable). */
  readonly env?: Record<string, string>;
  /** The key to accept; a fresh one by default. */
  readonly key?: string;
  /** Receives every finished request's record (what the access log and metrics read). */
  readonly observer?: ExchangeObserver;
  /**
   * The gateway's wall clock in place of Date.now (e.g. `manualWallClock().now`, test/helpers/clock.ts):
   * the policies' (rate-limit windows, key expiry, brute-force lock), a memory rate-limit store of
   * this gateway's own (not the process-wide one), the circuit breaker's open window and the
   * response cache. The deadlines (headersMs, bodyMs, totalMs) stay on real time: the sockets do.
   */
  readonly now?: () => number;
}

const DEFAULT_POLICY = { version: 1, upstream: { url: 'builtin' }, policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' } } };

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    out[k] = isPlainObject(b) && isPlainObject(v) ? deepMerge(b, v) : v;
  }
  return out;
}

/** A policy file text: the YAML as given, or the default policy with the overrides merged in. */
export function policyText(input: PolicyInput = {}): string {
  return typeof input === 'string' ? input : yamlStringify(deepMerge(DEFAULT_POLICY, input));
}

/**
 * The standalone server of `engine` for a gateway (or a holder, to reload it) on 127.0.0.1:0,
 * closed at teardown; `log` gets the operator log lines.
 */
export async function listenEngine(
  t: TeardownHost,
  engine: Engine,
  gateway: Gateway | GatewayHolder,
  log?: Logger,
  observer?: ExchangeObserver,
): Promise<{ url: string; port: number; server: Server }> {
  let server: Server;
  if (engine === 'fastify') {
    const { buildServer } = await import('../../src/engines/fastify.js');
    const app = await buildServer(gateway, { ...(log === undefined ? {} : { loggerInstance: log }), ...(observer === undefined ? {} : { observer }) });
    t.teardown(() => app.close());
    await app.listen({ host: '127.0.0.1', port: 0 });
    server = app.server;
  } else {
    const handle =
      engine === 'undici'
        ? (await import('../../src/engines/undici.js')).buildUndiciServer(gateway, { log, observer })
        : (await import('../../src/engines/http-proxy-3.js')).buildProxyServer(gateway, { log, observer });
    server = handle.server;
    t.teardown(() => {
      server.closeAllConnections();
      return handle.close();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  }
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, port, server };
}

/**
 * A gateway from a policy (YAML text, or overrides over a builtin default) on 127.0.0.1:0.
 * The server is always 127.0.0.1 port 0, whatever the policy's `server` section says.
 */
export async function startGateway(t: TeardownHost, policy: PolicyInput = {}, options: StartGatewayOptions = {}): Promise<GatewayHandle> {
  const key = options.key ?? testKey();
  const env = { ...(options.env ?? {}), PETSTORE_API_KEYS: key };
  const [{ formatProblems, parsePolicy }, { compileGateway, GatewayHolder }, { openStore }, { MemoryRateLimitStore }] = await Promise.all([
    import('../../src/config/load.js'),
    import('../../src/gateway.js'),
    import('../../src/stores/index.js'),
    import('../../src/stores/memory.js'),
  ]);
  const loaded = parsePolicy(policyText(policy), { env });
  if (!loaded.ok) throw new Error('invalid test policy:\n' + formatProblems('policy', loaded.problems));
  const now = options.now;
  const gateway =
    now === undefined
      ? compileGateway(loaded.config, { env })
      : compileGateway(loaded.config, { env, now, openStore: (config) => (config === 'memory' ? new MemoryRateLimitStore({ now }) : openStore(config)) });
  const engine = options.engine ?? 'undici';
  const served = now === undefined ? gateway : new GatewayHolder(gateway, { now });
  const { server, port } = await listenEngine(t, engine, served, undefined, options.observer);
  return { url: `http://127.0.0.1:${port}`, key, gateway, engine, server };
}

// ---------------------------------------------------------------------------------------------
// The built CLI

const BUILD_LOCK = join(tmpdir(), 'petstore-gateway-e2e-build-' + Buffer.from(PROJECT_ROOT).toString('base64url').slice(-40));

function newestMtime(dir: string, depth = 0): number {
  if (depth > 8 || !existsSync(dir)) return 0;
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(p, depth + 1));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

function distIsCurrent(): boolean {
  return existsSync(CLI) && statSync(CLI).mtimeMs >= newestMtime(join(PROJECT_ROOT, 'src'));
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

let built = false;

/**
 * Builds dist (`npm run build`) once when dist/cli/main.js is missing or older than a source file,
 * so the CLI under test is the current source. Test files run in parallel: a lock directory keeps
 * to one build at a time, and a waiter gives up after 120 s.
 */
export function ensureBuilt(): void {
  if (built || distIsCurrent()) {
    built = true;
    return;
  }
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(BUILD_LOCK);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`timed out waiting for the build lock ${BUILD_LOCK}`);
      // A lock left by a killed run: take it over after 2 minutes.
      try {
        if (Date.now() - statSync(BUILD_LOCK).mtimeMs > 120_000) rmdirSync(BUILD_LOCK);
      } catch {
        /* gone meanwhile */
      }
      sleepSync(200);
    }
  }
  try {
    if (!distIsCurrent()) {
      const r = spawnSync('npm', ['run', 'build'], { cwd: PROJECT_ROOT, encoding: 'utf8', timeout: 120_000 });
      if (r.status !== 0) throw new Error(`npm run build failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
    }
    built = true;
  } finally {
    rmdirSync(BUILD_LOCK);
  }
}

/**
 * `serve` with the admin listener on a free port unless the test names one: its default (9464)
 * would make gateways started side by side (test files run in parallel) refuse to start.
 */
export function withAdminPort(args: string[]): string[] {
  if (args[0] !== 'serve' || args.some((a) => a.startsWith('--admin-port')) || args.includes('--help') || args.includes('-h')) return args;
  return [...args, '--admin-port', '0'];
}

/** The environment for a CLI child: no inherited API keys, quiet logs (nodeCommand keeps out the test runner's loaders). */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const name of ['PATH', 'HOME', 'TMPDIR', 'SystemRoot']) if (process.env[name] !== undefined) env[name] = process.env[name];
  return { ...env, LOG_LEVEL: 'silent', ...extra };
}

/**
 * The command that runs node with `args` as a process manager would: with the NODE_OPTIONS of
 * `env` (usually none). tap's process recorder adds its own loader to the NODE_OPTIONS of every
 * process a test spawns, whatever env the test gives; in a child that loader records each module
 * and V8's precise coverage, which nearly doubles the CPU of a CLI start. env(1) sets NODE_OPTIONS
 * after that and then becomes node (same pid, so signals reach node).
 */
export function nodeCommand(args: string[], env: Record<string, string> = {}): [string, string[]] {
  return plainCommand(process.execPath, args, env);
}

/** `command` (node, or a program written for it such as npm) started as nodeCommand starts node. */
export function plainCommand(command: string, args: string[], env: Record<string, string> = {}): [string, string[]] {
  const options = env.NODE_OPTIONS;
  return ['env', ['-u', 'NODE_OPTIONS', ...(options === undefined ? [] : [`NODE_OPTIONS=${options}`]), command, ...args]];
}

export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunCliOptions {
  readonly stdin?: string;
  readonly env?: Record<string, string>;
  readonly cwd?: string;
  readonly timeoutMs?: number;
}

/** Runs the built CLI to completion (killed past timeoutMs) and returns its exit code and output. */
export function runCli(t: TeardownHost, args: string[], options: RunCliOptions = {}): Promise<CliResult> {
  ensureBuilt();
  const child = spawn(...nodeCommand([CLI, ...withAdminPort(args)], options.env), {
    cwd: options.cwd ?? PROJECT_ROOT,
    env: childEnv(options.env),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  killOnTeardown(t, child);
  const timeoutMs = options.timeoutMs ?? 10_000;
  return new Promise((resolvePromise, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`petstore-gateway ${args.join(' ')} did not exit within ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code, signal, stdout, stderr });
    });
    child.stdin!.end(options.stdin ?? '');
  });
}

/** Stops a child at teardown: SIGTERM, then SIGKILL after 2 s. */
export function killOnTeardown(t: TeardownHost, child: ChildProcess): void {
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 2000);
    await exited;
    clearTimeout(timer);
  });
}

export interface ProcessHandle {
  readonly child: ChildProcess;
  /** What the process printed so far. */
  readonly output: () => { stdout: string; stderr: string };
  /** Resolves with the exit code (or signal) once the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** A pino JSON line of a process's log. */
export type LogEntry = Record<string, unknown> & { msg?: string; level?: number };

/** The JSON log lines of a process's stdout from character `since` on (a line still being written is skipped). */
export function logEntries(handle: ProcessHandle, since = 0): LogEntry[] {
  const out: LogEntry[] = [];
  for (const line of handle.output().stdout.slice(since).split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push(JSON.parse(line) as LogEntry);
    } catch {
      /* a line still being written */
    }
  }
  return out;
}

/** Which output `spawnCliUntil` matches `ready` against. */
export type CliStream = 'stdout' | 'stderr' | 'either';

/**
 * Spawns the built CLI as a long-running process and waits (at most timeoutMs) until its output
 * matches `ready`; returns the match. The process is killed at teardown.
 *
 * `stream` (default 'either'): 'stdout' or 'stderr' match that stream alone; 'either' tries stdout,
 * then stderr, then both together (stdout, a newline, stderr), so a pattern of lookaheads may need
 * a JSON log line (stdout) and the banner (stderr) at once. `serve` writes its banner and ephemeral
 * key to stderr and only JSON lines to stdout.
 */
export async function spawnCliUntil(
  t: TeardownHost,
  args: string[],
  ready: RegExp,
  options: { env?: Record<string, string>; timeoutMs?: number; spawn?: SpawnOptions; stream?: CliStream } = {},
): Promise<{ handle: ProcessHandle; match: RegExpMatchArray }> {
  ensureBuilt();
  const child = spawn(...nodeCommand([CLI, ...withAdminPort(args)], options.env), {
    cwd: PROJECT_ROOT,
    env: childEnv(options.env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killOnTeardown(t, child);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal })),
  );
  const handle: ProcessHandle = { child, output: () => ({ stdout, stderr }), exited };
  const timeoutMs = options.timeoutMs ?? 10_000;
  const stream = options.stream ?? 'either';
  const candidates = (): string[] =>
    stream === 'stdout' ? [stdout] : stream === 'stderr' ? [stderr] : [stdout, stderr, `${stdout}\n${stderr}`];
  const match = await new Promise<RegExpMatchArray>((resolvePromise, reject) => {
    const timer = setTimeout(() => done(new Error(`no ${ready} within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`)), timeoutMs);
    const check = () => {
      for (const text of candidates()) {
        const m = ready.exec(text);
        if (m !== null) return done(undefined, m);
      }
    };
    const onExit = (code: number | null) => done(new Error(`exited (${code}) before ${ready}\nstdout: ${stdout}\nstderr: ${stderr}`));
    function done(err?: Error, m?: RegExpMatchArray) {
      clearTimeout(timer);
      child.stdout!.off('data', check);
      child.stderr!.off('data', check);
      child.off('exit', onExit);
      if (err) reject(err);
      else resolvePromise(m!);
    }
    // After the helper's own listeners (registered above), so the text is appended before a check.
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    child.once('exit', onExit);
    check();
  });
  return { handle, match };
}

/** The reference backend as a separate process (`petstore-gateway backend --port 0`); its /v1 base URL. */
export async function startBackendProcess(t: TeardownHost): Promise<{ url: string; handle: ProcessHandle }> {
  const { handle, match } = await spawnCliUntil(
    t,
    ['backend', '--host', '127.0.0.1', '--port', '0'],
    /backend listening on (http:\/\/127\.0\.0\.1:\d+\/v1)\n/,
  );
  return { url: match[1]!, handle };
}

// ---------------------------------------------------------------------------------------------
// startStubUpstream()

export interface RecordedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: string[];
  readonly body: Buffer;
}

export interface StubUpstream {
  /** `http://127.0.0.1:PORT` (no path). */
  readonly origin: string;
  readonly port: number;
  /** Every request received, in order, with its complete body. */
  readonly requests: RecordedRequest[];
  readonly server: Server;
  close(): Promise<void>;
}

export type StubHandler = (req: RecordedRequest, res: ServerResponse, raw: IncomingMessage) => void;

/**
 * An in-process node:http upstream on 127.0.0.1:0. The handler gets each request once its body is
 * read; it may answer, hang (never answer: closed at teardown), or destroy the socket.
 */
export async function startStubUpstream(t: TeardownHost, handler: StubHandler): Promise<StubUpstream> {
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rec: RecordedRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, body: Buffer.concat(chunks) };
      requests.push(rec);
      handler(rec, res, req);
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => r());
  });
  const { port } = server.address() as AddressInfo;
  let closed: Promise<void> | undefined;
  const close = () =>
    (closed ??= new Promise<void>((r) => {
      server.close(() => r());
      for (const s of sockets) s.destroy();
    }));
  t.teardown(close);
  return { origin: `http://127.0.0.1:${port}`, port, requests, server, close };
}

/** A port on 127.0.0.1 that nothing listens on: a server was there and has been closed. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** Sends an Error-shaped JSON answer from a stub. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

// ---------------------------------------------------------------------------------------------
// Raw bytes

/**
 * Writes raw bytes to 127.0.0.1:port and returns everything received until the server closes the
 * connection (or timeoutMs passes, then the socket is destroyed and what arrived is returned).
 */
export function rawExchange(port: number, bytes: string | Buffer, timeoutMs = 3000): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(), timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // The server may reset after answering; what arrived still counts.
      if (err.code !== 'ECONNRESET' && err.code !== 'EPIPE') {
        clearTimeout(timer);
        reject(err);
      }
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolvePromise(Buffer.concat(chunks).toString('utf8'));
    });
    socket.write(bytes);
  });
}

/** Splits a raw HTTP/1.1 response into its status, lower-cased headers and body. */
export function parseRawResponse(text: string): { status: number; headers: Record<string, string>; body: string } {
  const end = text.indexOf('\r\n\r\n');
  const head = end === -1 ? text : text.slice(0, end);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0), headers, body: end === -1 ? '' : text.slice(end + 4) };
}

/** The admin listener's URL, from the `admin listening` line a `serve` process printed. */
export function adminUrl(handle: ProcessHandle): string {
  for (const line of handle.output().stdout.split('\n')) {
    if (!line.includes('"msg":"admin listening')) continue;
    const url = (JSON.parse(line) as { url?: unknown }).url;
    if (typeof url === 'string') return url;
  }
  throw new Error(`no admin line:\n${handle.output().stdout}`);
}
