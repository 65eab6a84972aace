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
import { readFileSync } from 'node:fs';
import { createClient, createCluster, createSentinel } from 'redis';
import type { RedisConnectionConfig, RedisNodeAddress } from './connection-schema.js';

export type { RedisConnectionConfig, RedisNodeAddress } from './connection-schema.js';
export { REDIS_CONNECTION_SCHEMA, checkConnection } from './connection-schema.js';

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
  const client = createClient({ ...serverClientOptions(config, env), disableOfflineQueue: true });
  wire(client, listeners);
  let subscriber: ReturnType<typeof client.duplicate> | undefined;
  return {
    command: (_key: string | undefined, args: readonly string[]) => client.sendCommand([...args]),
    async subscribe(channel: string, listener: (message: string) => void) {
      // A connection in subscribe mode takes no other command: one of its own (RESP2 rule).
      subscriber ??= client.duplicate();
      subscriber.on('error', () => undefined);
      if (!subscriber.isOpen) await subscriber.connect();
      await subscriber.subscribe(channel, (m) => listener(String(m)));
    },
    isReady: () => client.isReady,
    connect: async () => void (await client.connect()),
    async close() {
      for (const c of [subscriber, client]) if (c?.isOpen === true) c.destroy();
    },
  };
}

function sentinelConnection(s: NonNullable<RedisConnectionConfig['sentinel']>, config: RedisConnectionConfig, env: Readonly<Record<string, string | undefined>>, listeners: Listeners) {
  const node = nodeOptions(config, env);
  const client = createSentinel({
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
  const client = createCluster({
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

/** The config's address without a password, for logs. */
export function describeConnection(config: RedisConnectionConfig): string {
  const form = formOf(config);
  if (form === 'sentinel') return `sentinel ${config.sentinel?.masterName} via ${config.sentinel?.nodes.join(',')}`;
  if (form === 'cluster') return `cluster ${config.cluster?.nodes.join(',')}`;
  try {
    const u = new URL(config.url ?? '');
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return 'redis://(invalid url)';
  }
}
