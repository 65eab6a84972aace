/**
 * The JSON Schema and type of a Redis connection config (src/stores/connection.ts), apart from the
 * client so the policy file schema can use them without loading node-redis.
 */
export interface RedisNodeAddress {
  readonly host: string;
  readonly port: number;
}

export interface RedisConnectionConfig {
  /** One server: `redis[s]://[[user][:password]@]host[:port][/db]`; null with `sentinel` or `cluster`. */
  readonly url?: string | null;
  /** Redis Sentinel: the master's name and some sentinels. */
  readonly sentinel?: { readonly masterName: string; readonly nodes: readonly string[] } | null;
  /** Redis Cluster: some of its nodes (the rest are discovered). */
  readonly cluster?: { readonly nodes: readonly string[] } | null;
  /** ACL user (Redis 6+); for `url`, the URL's user when absent. */
  readonly username?: string | null;
  /** The environment variable that holds the password, so it stays out of the policy file. */
  readonly passwordFromEnv?: string | null;
  /** TLS for Sentinel and Cluster nodes (`rediss://` says it for `url`). */
  readonly tls?: boolean;
  /** A PEM file of the CA(s) to trust instead of Node's store (which honours NODE_EXTRA_CA_CERTS). */
  readonly caFile?: string | null;
  readonly connectTimeoutMs?: number;
  readonly maxReconnectDelayMs?: number;
}

const HOST_PORT = '^(\\[[0-9A-Fa-f:.]+\\]|[^\\s:\\[\\]/]+):[0-9]{1,5}$';

/** The JSON Schema of a connection config, for every section that names a Redis. */
export const REDIS_CONNECTION_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  description: 'A Redis: one server (`url`), Redis Sentinel (`sentinel`) or Redis Cluster (`cluster`); exactly one of the three.',
  properties: {
    url: { type: ['string', 'null'], pattern: '^rediss?://', default: null, description: 'One server: redis[s]://[[user][:password]@]host[:port][/db]; rediss:// for TLS.' },
    sentinel: {
      type: ['object', 'null'],
      default: null,
      additionalProperties: false,
      required: ['masterName', 'nodes'],
      description: 'Redis Sentinel: the name of the monitored master and some of its sentinels (host:port); the gateway follows failovers.',
      properties: {
        masterName: { type: 'string', minLength: 1, description: 'The master name the sentinels monitor.' },
        nodes: { type: 'array', minItems: 1, maxItems: 32, items: { type: 'string', pattern: HOST_PORT }, description: 'Sentinels, host:port.' },
      },
    },
    cluster: {
      type: ['object', 'null'],
      default: null,
      additionalProperties: false,
      required: ['nodes'],
      description: 'Redis Cluster: some of its nodes (host:port); the rest are discovered.',
      properties: {
        nodes: { type: 'array', minItems: 1, maxItems: 64, items: { type: 'string', pattern: HOST_PORT }, description: 'Cluster nodes, host:port.' },
      },
    },
    username: { type: ['string', 'null'], default: null, minLength: 1, description: 'ACL user (Redis 6+); with `url`, the URL\'s user when null.' },
    passwordFromEnv: { type: ['string', 'null'], default: null, pattern: '^[A-Za-z_][A-Za-z0-9_]*$', description: 'The environment variable holding the password (keeps it out of the file); with `url`, the URL\'s password when null.' },
    tls: { type: 'boolean', default: false, description: 'TLS to Sentinel or Cluster nodes (for `url`, rediss:// says it).' },
    caFile: { type: ['string', 'null'], default: null, minLength: 1, description: 'A PEM file of the CA(s) to trust for TLS instead of Node\'s store (which includes NODE_EXTRA_CA_CERTS).' },
    connectTimeoutMs: { type: 'integer', minimum: 1, maximum: 60000, default: 1000, description: 'Longest wait for a TCP (and TLS) connection.' },
    maxReconnectDelayMs: { type: 'integer', minimum: 10, maximum: 60000, default: 2000, description: 'Reconnection backs off exponentially up to this many milliseconds between attempts.' },
  },
} as const;

/** Cross-field rules of a connection config (exactly one form); problems, never a throw. */
export function checkConnection(config: RedisConnectionConfig, path: string): Array<{ path: string; message: string }> {
  const forms = [config.url != null, config.sentinel != null, config.cluster != null].filter(Boolean).length;
  if (forms !== 1) return [{ path, message: 'give exactly one of url, sentinel, cluster' }];
  if (config.url != null) {
    try {
      new URL(config.url);
    } catch {
      return [{ path: `${path}.url`, message: 'is not a valid URL' }];
    }
  }
  return [];
}

/** A connection config as the policy file gives it, defaults filled (every property present). */
export type RedisConnectionSettings = { readonly [K in keyof RedisConnectionConfig]-?: Exclude<RedisConnectionConfig[K], undefined> };
