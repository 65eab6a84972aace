/**
 * One Redis connection config for every use of Redis (rate limits, the deprecation report, the key
 * registry), in the forms operators run Redis: one server (`redis://` or `rediss://`, with an ACL
 * user and password), Redis Sentinel (the current master, found through the sentinels), or Redis
 * Cluster. `createRedisClient` turns it into a `RedisConnection`: a narrow interface (raw commands,
 * publish/subscribe, lifecycle events) that hides which of node-redis' three client types is
 * underneath, so a store is written once for all three.
 *
 * TLS: `rediss://` (or `tls: true` for Sentinel and Cluster) verifies the server against Node's CA
 * store, which includes `NODE_EXTRA_CA_CERTS`; `caFile` replaces that store with one PEM file (a
 * private CA), as node's `tls.connect({ ca })` does.
 *
 * Cluster: every key one script touches must hash to one slot; the stores put a hash tag (`{...}`)
 * in such keys (Redis Cluster specification, "Hash tags").
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type * as NodeRedisModule from 'redis';
import { maskUrl } from './connection-schema.js';
import type { RedisConnectionConfig, RedisNodeAddress } from './connection-schema.js';

export type { RedisConnectionConfig, RedisNodeAddress } from './connection-schema.js';
export { REDIS_CONNECTION_SCHEMA, checkConnection, deploymentPrefix, maskUrl } from './connection-schema.js';

type NodeRedis = typeof NodeRedisModule;
let nodeRedis: NodeRedis | undefined;
/**
 * node-redis, loaded on the first connection rather than with this module: loading it costs about
 * 0.2 s of CPU, which every gateway without a Redis store, every CLI command and every test
 * process would otherwise pay at start. It is CommonJS, so `require` loads it synchronously.
 */
function redis(): NodeRedis {
  return (nodeRedis ??= createRequire(import.meta.url)('redis') as NodeRedis);
}

export type RedisForm = 'server' | 'sentinel' | 'cluster';

/** What a store needs of a Redis connection, whatever its form. */
export interface RedisConnection {
  readonly form: RedisForm;
  /** A command; `key` routes it in a Cluster (the first key it touches). Rejects on failure. */
  command(key: string | undefined, args: readonly string[]): Promise<unknown>;
  /** Listens on a channel on a connection of its own; `listener` gets each message. */
  subscribe(channel: string, listener: (message: string) => void): Promise<void>;
  /** 'ready' on each (re)connection, 'down' when a connection is lost, 'error' with the error. */
  on(event: 'ready' | 'down', listener: () => void): void;
  on(event: 'error', listener: (err: Error) => void): void;
  readonly isReady: boolean;
  connect(): Promise<void>;
  close(): Promise<void>;
}

/** `host:port` to an address (an IPv6 literal in brackets). */
export function parseNode(text: string): RedisNodeAddress {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(text);
  if (m === null) throw new Error(`not host:port: ${text}`);
  return { host: (m[1] ?? '').replace(/^\[|\]$/g, ''), port: Number(m[2]) };
}

/** Which form a config takes; the schema's `check` makes sure exactly one is given. */
export function formOf(config: RedisConnectionConfig): RedisForm {
  if (config.sentinel != null) return 'sentinel';
  if (config.cluster != null) return 'cluster';
  return 'server';
}

/** The TLS and credential options every node of the config shares. */
function nodeOptions(config: RedisConnectionConfig, env: Readonly<Record<string, string | undefined>>) {
  const password = config.passwordFromEnv == null ? undefined : env[config.passwordFromEnv];
  const url = config.url == null ? undefined : new URL(config.url);
  const tls = url !== undefined ? url.protocol === 'rediss:' : config.tls === true;
  const ca = config.caFile == null ? undefined : readFileSync(config.caFile, 'utf8');
  const maxDelay = config.maxReconnectDelayMs ?? 2000;
  const socket = {
    connectTimeout: config.connectTimeoutMs ?? 1000,
    // 50 ms, 100 ms, 200 ms, ... capped: never gives up, never hammers a Redis that is restarting.
    reconnectStrategy: (retries: number) => Math.min(50 * 2 ** Math.min(retries, 16), maxDelay),
    ...(tls ? { tls: true as const, ...(ca === undefined ? {} : { ca }) } : {}),
  };
  return {
    ...(config.username == null ? {} : { username: config.username }),
    ...(password === undefined ? {} : { password }),
    socket,
  };
}

type Listeners = { ready: Array<() => void>; down: Array<() => void>; error: Array<(err: Error) => void> };

/** Forwards node-redis' events (each form has the same names) to a RedisConnection's listeners. */
function wire(emitter: { on(event: string, fn: (...a: unknown[]) => void): unknown }, listeners: Listeners): void {
  emitter.on('ready', () => listeners.ready.forEach((f) => f()));
  emitter.on('end', () => listeners.down.forEach((f) => f()));
  emitter.on('reconnecting', () => listeners.down.forEach((f) => f()));
  // Without an 'error' listener an EventEmitter error would crash the process.
  emitter.on('error', (err) => listeners.error.forEach((f) => f(err instanceof Error ? err : new Error(String(err)))));
}

/**
 * The URL without its credentials, and the credentials on their own: node-redis lets a URL's user
 * (without a password) hide a password given beside it, so the config's `username` and
 * `passwordFromEnv` are merged here, each winning over the URL's.
 */
function splitUrl(config: RedisConnectionConfig, env: Readonly<Record<string, string | undefined>>) {
  const url = new URL(config.url ?? '');
  const username = config.username ?? (url.username === '' ? undefined : decodeURIComponent(url.username));
  const fromEnv = config.passwordFromEnv == null ? undefined : env[config.passwordFromEnv];
  const password = fromEnv ?? (url.password === '' ? undefined : decodeURIComponent(url.password));
  url.username = '';
  url.password = '';
  return { url: url.toString(), ...(username === undefined ? {} : { username }), ...(password === undefined ? {} : { password }) };
}

/**
 * node-redis `createClient` options for a one-server config (URL, credentials, TLS and its CA,
 * timeouts, reconnection): what another store that keeps its own node-redis client (scripts
 * defined on it) spreads into `createClient` to take the same connection config.
 */
export function serverClientOptions(config: RedisConnectionConfig, env: Readonly<Record<string, string | undefined>> = process.env) {
  return { ...splitUrl(config, env), socket: nodeOptions(config, env).socket };
}

function serverConnection(config: RedisConnectionConfig, env: Readonly<Record<string, string | undefined>>, listeners: Listeners) {
  const client = redis().createClient({ ...serverClientOptions(config, env), disableOfflineQueue: true });
  wire(client, listeners);
  let subscriber: ReturnType<typeof client.duplicate> | undefined;
  let closed = false;
  return {
    command: (_key: string | undefined, args: readonly string[]) => client.sendCommand([...args]),
    async subscribe(channel: string, listener: (message: string) => void) {
      // After close, a new subscriber would reconnect for ever and keep the process alive.
      if (closed) throw new Error('the Redis connection is closed');
      // A connection in subscribe mode takes no other command: one of its own (RESP2 rule).
      subscriber ??= client.duplicate();
      subscriber.on('error', () => undefined);
      if (!subscriber.isOpen) await subscriber.connect();
      await subscriber.subscribe(channel, (m) => listener(String(m)));
    },
    isReady: () => client.isReady,
    connect: async () => void (await client.connect()),
    async close() {
      closed = true;
      for (const c of [subscriber, client]) if (c?.isOpen === true) c.destroy();
    },
  };
}

function sentinelConnection(s: NonNullable<RedisConnectionConfig['sentinel']>, config: RedisConnectionConfig, env: Readonly<Record<string, string | undefined>>, listeners: Listeners) {
  const node = nodeOptions(config, env);
  const client = redis().createSentinel({
    name: s.masterName,
    sentinelRootNodes: s.nodes.map(parseNode),
    nodeClientOptions: node,
    // Sentinels rarely carry the data nodes' ACL user; their TLS, yes.
    sentinelClientOptions: { socket: node.socket },
  });
  wire(client, listeners);
  return {
    command: (_key: string | undefined, args: readonly string[]) => client.sendCommand(false, [...args]),
    subscribe: async (channel: string, listener: (message: string) => void) => void (await client.subscribe(channel, (m) => listener(String(m)))),
    isReady: () => client.isReady,
    connect: async () => void (await client.connect()),
    close: async () => void (client.isOpen ? client.destroy() : undefined),
  };
}

function clusterConnection(c: NonNullable<RedisConnectionConfig['cluster']>, config: RedisConnectionConfig, env: Readonly<Record<string, string | undefined>>, listeners: Listeners) {
  const node = nodeOptions(config, env);
  const scheme = node.socket.tls === true ? 'rediss' : 'redis';
  const client = redis().createCluster({
    rootNodes: c.nodes.map((n) => ({ url: `${scheme}://${n}` })),
    defaults: { ...node, disableOfflineQueue: true },
  });
  wire(client, listeners);
  return {
    command: (key: string | undefined, args: readonly string[]) => client.sendCommand(key, false, [...args]),
    subscribe: async (channel: string, listener: (message: string) => void) => void (await client.subscribe(channel, (m) => listener(String(m)))),
    isReady: () => client.isOpen,
    connect: async () => void (await client.connect()),
    close: async () => void (client.isOpen ? client.destroy() : undefined),
  };
}

/**
 * A connection of the config's form, not yet connected (call `connect`). `env` is where
 * `passwordFromEnv` is read.
 *
 * @example
 *   const redis = createRedisClient({ url: 'rediss://gateway@redis.internal:6380', passwordFromEnv: 'REDIS_PASSWORD' }, process.env);
 *   redis.on('error', (err) => log.warn({ err: err.message }, 'Redis'));
 *   await redis.connect();
 */
export function createRedisClient(config: RedisConnectionConfig, env: Readonly<Record<string, string | undefined>> = process.env): RedisConnection {
  const listeners: Listeners = { ready: [], down: [], error: [] };
  const form = formOf(config);
  const impl =
    config.sentinel != null
      ? sentinelConnection(config.sentinel, config, env, listeners)
      : config.cluster != null
        ? clusterConnection(config.cluster, config, env, listeners)
        : serverConnection(config, env, listeners);
  return {
    form,
    command: impl.command,
    subscribe: impl.subscribe,
    on(event: 'ready' | 'down' | 'error', listener: (() => void) | ((err: Error) => void)) {
      (listeners[event] as Array<typeof listener>).push(listener);
    },
    get isReady() {
      return impl.isReady();
    },
    connect: impl.connect,
    close: impl.close,
  };
}

/**
 * The config's address for logs, banners and errors: a URL's user and password are masked (a
 * user alone still tells an attacker which ACL account to try).
 */
export function describeConnection(config: RedisConnectionConfig): string {
  const form = formOf(config);
  if (form === 'sentinel') return `sentinel ${config.sentinel?.masterName} via ${config.sentinel?.nodes.join(',')}`;
  if (form === 'cluster') return `cluster ${config.cluster?.nodes.join(',')}`;
  return maskUrl(config.url ?? '');
}

/** A Lua script run by its SHA-1 (EVALSHA), its text sent only when Redis does not know it yet. */
export interface RedisScript {
  readonly source: string;
  readonly sha1: string;
}

export function redisScript(source: string): RedisScript {
  return { source, sha1: createHash('sha1').update(source).digest('hex') };
}

/**
 * Runs a script on `keys` (a Cluster routes it by the first; the caller puts every key in one
 * hash slot). EVALSHA first: one short command per call; after a restart or a failover the new
 * master answers NOSCRIPT once, and the text goes with EVAL (which also caches it).
 */
export async function runScript(conn: RedisConnection, script: RedisScript, keys: readonly string[], args: readonly string[]): Promise<unknown> {
  const tail = [String(keys.length), ...keys, ...args];
  try {
    return await conn.command(keys[0], ['EVALSHA', script.sha1, ...tail]);
  } catch (err) {
    if (err instanceof Error && err.message.startsWith('NOSCRIPT')) return conn.command(keys[0], ['EVAL', script.source, ...tail]);
    throw err;
  }
}

/** One connection shared by every use of one connection config in this process. */
export interface SharedRedis {
  readonly conn: RedisConnection;
  /** Resolves once the first connection is up, or when connecting gave up (never rejects). */
  readonly connected: Promise<void>;
  /** True once the first connection was up. */
  readonly connectedOnce: boolean;
  /** This use is done; the last use closes the connection. */
  release(): Promise<void>;
}

interface PoolEntry {
  readonly conn: RedisConnection;
  readonly connected: Promise<void>;
  connectedOnce: boolean;
  users: number;
}

const pool = new Map<string, PoolEntry>();

/**
 * What tells two connection configs apart (a use's own options, as its prefix, do not). The
 * password read from `passwordFromEnv` counts, as a digest: the same names with another password
 * are another connection.
 */
export function connectionKey(c: RedisConnectionConfig, env: Readonly<Record<string, string | undefined>> = process.env): string {
  const password = c.passwordFromEnv == null ? '' : createHash('sha256').update(env[c.passwordFromEnv] ?? '').digest('base64');
  return JSON.stringify([password, c.url ?? null, c.sentinel ?? null, c.cluster ?? null, c.username ?? null, c.passwordFromEnv ?? null, c.tls ?? false, c.caFile ?? null, c.connectTimeoutMs ?? 1000, c.maxReconnectDelayMs ?? 2000]);
}

/**
 * The process's connection for `config`, opened (and connecting) on first use: the rate-limit
 * store, the deprecation report and the response cache on one Redis make one connection (and one
 * subscriber connection), not one each, and a reload opens none.
 */
export function acquireRedis(config: RedisConnectionConfig, env: Readonly<Record<string, string | undefined>> = process.env): SharedRedis {
  const key = connectionKey(config, env);
  let entry = pool.get(key);
  if (entry === undefined) {
    const conn = createRedisClient(config, env);
    const made: PoolEntry = {
      conn,
      users: 0,
      connectedOnce: false,
      connected: conn.connect().then(
        () => void (made.connectedOnce = true),
        () => undefined,
      ),
    };
    entry = made;
    pool.set(key, made);
  }
  const held = entry;
  held.users++;
  let released = false;
  return {
    conn: held.conn,
    connected: held.connected,
    get connectedOnce() {
      return held.connectedOnce;
    },
    async release() {
      if (released) return;
      released = true;
      if (--held.users > 0) return;
      if (pool.get(key) === held) pool.delete(key);
      await held.conn.close();
    },
  };
}
