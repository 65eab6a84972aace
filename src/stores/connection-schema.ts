/**
 * The JSON Schema and type of a Redis connection config (src/stores/connection.ts), apart from the
 * client so the policy file schema can use them without loading node-redis.
 */
import type { RedisConnectionConfig } from '../core/store.js';

export type { RedisConnectionConfig, RedisNodeAddress } from '../core/store.js';

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

/** The key prefix of a deployment that sets none: the names every release so far wrote. */
export const DEFAULT_REDIS_PREFIX = 'petstore-gateway:';
/** The environment variable that gives a deployment its Redis key prefix once, for every use. */
export const REDIS_PREFIX_ENV = 'PETSTORE_REDIS_PREFIX';
const PREFIX_PATTERN = '^[^{}\\s]*$';

/** The `prefix` of a `redis:` section: null takes the deployment's. */
export const REDIS_PREFIX_SCHEMA = {
  type: ['string', 'null'],
  default: null,
  maxLength: 64,
  pattern: PREFIX_PATTERN,
  description: `Prefix of every Redis key and channel of this use, so several deployments can share one Redis (no braces or spaces: keys carry Cluster hash tags). null (default): the deployment's prefix, from the environment variable ${REDIS_PREFIX_ENV}, else "${DEFAULT_REDIS_PREFIX}".`,
} as const;

type WithoutDefaults<P> = { readonly [K in keyof P]: Omit<P[K], 'default'> };

/**
 * The JSON Schema of a `redis:` section: the connection config (`url`, `sentinel` or `cluster`,
 * with TLS and ACL) plus the use's own options, so every section takes the same forms. Without
 * `default`s: these sections sit in a `oneOf` ("memory" or {redis}), where Ajv fills no default
 * (strict mode refuses one there); the code applies them, and each description states its own.
 */
export function redisSectionSchema<const P extends Record<string, object>>(extra: P) {
  const all = { ...REDIS_CONNECTION_SCHEMA.properties, ...extra };
  const properties = Object.fromEntries(
    Object.entries(all).map(([name, property]) => {
      const { default: value, ...rest } = property as { default?: unknown; description?: string };
      return [name, value === undefined ? rest : { ...rest, description: `${rest.description ?? ''} Default: ${JSON.stringify(value)}.`.trim() }];
    }),
  ) as WithoutDefaults<typeof all>;
  return { ...REDIS_CONNECTION_SCHEMA, properties };
}

/**
 * The deployment's Redis key prefix: `PETSTORE_REDIS_PREFIX` when set, else the default. Set once
 * per deployment, it keeps two deployments on one Redis apart without a prefix in every section.
 * A value the schema's rule refuses throws (at start, before anything is written).
 */
export function deploymentPrefix(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const value = env[REDIS_PREFIX_ENV];
  if (value === undefined || value === '') return DEFAULT_REDIS_PREFIX;
  if (value.length > 64 || !new RegExp(PREFIX_PATTERN).test(value)) throw new Error(`${REDIS_PREFIX_ENV} must be at most 64 characters without braces or spaces`);
  return value;
}

/**
 * A URL with its user and password replaced by `***`, for a log line, a banner or an error; a
 * text that is no URL keeps nothing between `//` and an `@`. Never throws.
 */
export function maskUrl(text: string): string {
  try {
    const u = new URL(text);
    if (u.username !== '') u.username = '***';
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return text.replace(/^([^/]*\/\/)[^/]*@/, '$1***@');
  }
}
