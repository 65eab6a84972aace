/** The options of the `rate-limit` policy: its JSON Schema (with defaults), and the type derived from it. */
import { REDIS_PREFIX_SCHEMA, redisSectionSchema } from '../../stores/connection-schema.js';
import { REDIS_DEFAULTS } from '../../stores/defaults.js';
import type { SchemaType } from '../../core/options.js';

const LIMIT = { type: 'integer', minimum: 1, maximum: 1000000000 } as const;
const WINDOW = { type: 'integer', minimum: 1, maximum: 86400 } as const;

export const schema = {
  type: 'object',
  description:
    'Requests per consumer (API key id), counted across operations after `auth` (a bad key is never counted), with GCRA: `limit` at once, refilled evenly over `windowSeconds`. Over it: 429 rate_limited with Retry-After; every response to a limited consumer carries RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers). Without `limit` and `perKey`, nothing is limited.',
  additionalProperties: false,
  properties: {
    limit: { ...LIMIT, description: 'Requests per window, per consumer. Absent: only the keys of `perKey` are limited.' },
    windowSeconds: { ...WINDOW, default: 60, description: 'The window of `limit`, in seconds (at most one day).' },
    perKey: {
      type: 'object',
      default: {},
      description: 'Limits by key id that replace `limit` for that key, e.g. {ops: {limit: 1000, windowSeconds: 60}}: an id of `auth.keys`, NAME#n of `auth.keysFromEnv`, or, with `auth.registry`, a registry key id (issued at run time, so `check` notes it instead of refusing it).',
      propertyNames: { type: 'string', minLength: 1, maxLength: 64 },
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['limit'],
        properties: {
          limit: LIMIT,
          windowSeconds: { ...WINDOW, description: 'Defaults to the top-level windowSeconds.' },
        },
      },
    },
    store: {
      default: 'memory',
      description:
        'Where the counters live: "memory" (this process; with --workers N each worker has its own) or {redis: {...}} (one limit across every instance and worker; the same Redis forms as every `redis:` section: url, sentinel or cluster, see docs/scaling.md). The deprecation report lives there too.',
      oneOf: [
        { type: 'string', enum: ['memory'] },
        {
          type: 'object',
          additionalProperties: false,
          required: ['redis'],
          properties: {
            redis: redisSectionSchema({
              prefix: REDIS_PREFIX_SCHEMA,
              commandTimeoutMs: {
                type: 'integer',
                minimum: 10,
                maximum: 10000,
                default: REDIS_DEFAULTS.commandTimeoutMs,
                description: "A command without an answer after this many ms fails (onStoreError decides). Time this process's event loop was busy is not counted (up to 8 times this in all).",
              },
            }),
          },
        },
      ],
    },
    onStoreError: {
      type: 'string',
      enum: ['open', 'closed'],
      default: 'open',
      description:
        'When the store fails (Redis away or slow): "open" decides with this process\'s own counters, with the same limit (so a consumer may get its limit from the store plus its limit from each process during an outage, never unlimited; a warn log at most every 10 s with a count), "closed" answers 503.',
    },
  },
} as const;

export type RateLimitConfig = SchemaType<typeof schema>;
/** One key's own limit (`perKey`). */
export type RateLimitRuleConfig = RateLimitConfig['perKey'][string];
