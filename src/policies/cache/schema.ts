/** The options of the `cache` policy: its JSON Schema (with defaults), and the types derived from it. */
import { FIELD_NAME_PATTERN } from '../../core/headers.js';
import type { SchemaType } from '../../core/options.js';
import { DEFAULT_REDIS_PREFIX, REDIS_PREFIX_ENV, REDIS_PREFIX_SCHEMA, redisSectionSchema } from '../../stores/connection-schema.js';

const TTL = { type: 'integer', minimum: 0, maximum: 86400 } as const;

export const schema = {
  type: 'object',
  description:
    'A response cache in front of the upstream for listPets and getPet (RFC 9111 as a shared cache): identical concurrent misses make one upstream call, a successful createPet drops the lists, a stale copy answers when the upstream fails (RFC 5861 stale-if-error), and every answer says what happened in Cache-Status (RFC 9211) and Age. Both TTLs 0 (the default): no cache. Takes effect on a restart, not a reload.',
  additionalProperties: false,
  properties: {
    ttlSeconds: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: "Seconds an upstream 200 stays fresh, per operation (the upstream's s-maxage or max-age, else its Expires, shortens it); 0: that operation is never cached.",
      properties: {
        listPets: { ...TTL, default: 0, description: 'listPets, keyed by its normalised limit and status.' },
        getPet: { ...TTL, default: 0, description: 'getPet, keyed by petId.' },
      },
    },
    ignoreRequestFields: {
      type: 'array',
      default: [],
      maxItems: 64,
      uniqueItems: true,
      items: { type: 'string', pattern: FIELD_NAME_PATTERN, maxLength: 128, description: 'A request field name (RFC 9110 token), any case.' },
      description:
        "Request fields the gateway forwards that the upstream's answers do not depend on (e.g. User-Agent for an upstream that ignores it): left out of the key, so clients that differ only in them share entries. Every other field the upstream is sent is part of the key: X-Forwarded-Host (the client's Host or HTTP/2 :authority), X-Forwarded-Proto, Accept, Accept-Language, User-Agent and each headers.request.allow entry; never the request ids, the client's address or Authorization. An answer whose Vary names an ignored field is not stored.",
    },
    maxBytes: {
      type: 'integer',
      minimum: 1024,
      maximum: 17179869184,
      default: 67108864,
      description: 'Most bytes the memory store holds (bodies, headers and keys); the least recently used entries go first. With the Redis store, the bound of the local copy of nothing: Redis bounds itself (maxmemory).',
    },
    staleIfErrorSeconds: {
      type: 'integer',
      minimum: 0,
      maximum: 86400,
      default: 0,
      description: 'For this many seconds after an entry went stale, a failed upstream call (refused, reset, timed out), a 5xx answer or a call the open circuit breaker refuses is answered from the stale copy (Cache-Status says so) instead of 502/503/504; never for an answer that forbids stale copies (must-revalidate, proxy-revalidate, s-maxage); 0: never.',
    },
    store: {
      default: 'memory',
      description: 'Where entries live: "memory" (this process, bounded by maxBytes) or {redis: {...}} (one cache for every instance; createPet invalidates the lists on every instance through publish/subscribe; the same Redis forms as every `redis:` section: url, sentinel or cluster, see docs/scaling.md).',
      oneOf: [
        { type: 'string', enum: ['memory'] },
        {
          type: 'object',
          additionalProperties: false,
          required: ['redis'],
          properties: {
            redis: redisSectionSchema({
              prefix: {
                ...REDIS_PREFIX_SCHEMA,
                description: `Prefix of every key and channel the cache writes (no braces or spaces). null (default): the deployment's prefix (the environment variable ${REDIS_PREFIX_ENV}, else "${DEFAULT_REDIS_PREFIX}") followed by "cache:".`,
              },
            }),
          },
        },
      ],
    },
  },
} as const;

export type CacheConfig = SchemaType<typeof schema>;
/**
 * The cache's Redis: a connection (one server, Sentinel or Cluster) and its key `prefix` (null or
 * absent: the deployment's, then `cache:`). In a `oneOf`, so without defaults: every field optional.
 */
export type CacheRedisConfig = Extract<CacheConfig['store'], object>['redis'];
