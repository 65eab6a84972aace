/** The options of the `auth` policy: its JSON Schema (with defaults), and the types derived from it. */
import type { SchemaType } from '../../core/options.js';
import { SCOPES_SCHEMA } from '../../core/policy.js';
import { CONTACT_SCHEMA, OWNER_SCHEMA } from '../../core/key-owner.js';
import { HASH_PATTERN } from './keys.js';
import { REDIS_CONNECTION_SCHEMA, REDIS_PREFIX_SCHEMA } from '../../stores/connection-schema.js';

/** Its own literal type, not `BruteForceConfig`: the schema's type is read from this default. */
export const DEFAULT_BRUTE_FORCE = Object.freeze({ maxFailures: 100, windowSeconds: 60 });

/** RFC 3339 date-time, with a zone. */
const DATE_TIME = '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$';

const ENV_NAME = '^[A-Za-z_][A-Za-z0-9_]*$';

export const schema = {
  type: 'object',
  description: 'Bearer API keys (docs/interface.md, "Authentication"). Runs first, on every request.',
  additionalProperties: false,
  properties: {
    keys: {
      type: 'array',
      description: 'Accepted keys, as hashes only: make the line with `petstore-gateway hash-key`.',
      default: [],
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'hash'],
        properties: {
          id: {
            type: 'string',
            minLength: 1,
            maxLength: 64,
            // No control or invisible character (shown by the console, keys the fleet's counts in Redis); empty: minLength says so.
            pattern: '^[^\\x00-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\ufeff]*$',
            description: 'A name for the key, shown in logs and the console: no control or invisible character.',
          },
          hash: { type: 'string', pattern: HASH_PATTERN, description: '"sha256:" and 64 lower-case hex digits.' },
          expires: {
            type: 'string',
            pattern: DATE_TIME,
            description: 'When the key stops working (RFC 3339); from then on it gets 401 with error="invalid_token" and "The access token expired".',
          },
          operations: {
            type: 'array',
            uniqueItems: true,
            items: { type: 'string', pattern: '^[A-Za-z][A-Za-z0-9_]{0,63}$' },
            description: 'The operationIds the key may call (of the interface: listPets, createPet, getPet in the shipped one); any other gets 403 forbidden. Absent: every operation.',
          },
          scopes: {
            ...SCOPES_SCHEMA,
            description: 'What else the key may do, each of A-Z a-z 0-9 : . _ -, read by the features that ask for one: today `migration.tester.scope` (default migration:tester). Absent: none. See docs/keys.md, "Scopes".',
          },
          owner: OWNER_SCHEMA,
          contact: CONTACT_SCHEMA,
        },
      },
    },
    keysFromEnv: {
      type: ['string', 'null'],
      pattern: ENV_NAME,
      default: 'PETSTORE_API_KEYS',
      description:
        'An environment variable with more keys, comma-separated, in plaintext (as secret managers inject them); null to read none. Their owners and contacts, if any, are in the variable of the same name and `_OWNERS` (a JSON array, one entry per key in order: docs/keys.md, "Owner and contact").',
    },
    realm: { type: 'string', pattern: '^[\\x20-\\x21\\x23-\\x5b\\x5d-\\x7e]{1,64}$', default: 'petstore', description: 'The realm of the WWW-Authenticate challenge.' },
    bruteForce: {
      type: ['object', 'null'],
      default: DEFAULT_BRUTE_FORCE,
      additionalProperties: false,
      required: ['maxFailures', 'windowSeconds'],
      description:
        'Failed authentications (a well-formed key that matches none) per client address: past `maxFailures` in `windowSeconds`, every request with a key from that address gets 429 too_many_auth_failures with Retry-After, valid keys included, until the window drains. At most 1,000,000 addresses are tracked (least recently failed forgotten first). null: no limit.',
      properties: {
        maxFailures: { type: 'integer', minimum: 1, maximum: 1000000 },
        windowSeconds: { type: 'integer', minimum: 1, maximum: 86400 },
      },
    },
    registry: {
      type: ['object', 'null'],
      default: null,
      additionalProperties: false,
      required: ['redis'],
      description:
        'Keys issued, rotated and revoked at run time (the `keys` command, the admin API), kept in Redis as hashes and shared by every instance; null (default): none. Authentication reads a local copy, never Redis. When an id is both here and in `keys`, the policy file\'s key wins and the registry\'s is ignored. See docs/keys.md.',
      properties: {
        redis: REDIS_CONNECTION_SCHEMA,
        prefix: REDIS_PREFIX_SCHEMA,
        syncIntervalMs: { type: 'integer', minimum: 100, maximum: 600000, default: 5000, description: 'How often the local copy is checked against Redis, beside publish/subscribe (catches messages lost during a reconnection).' },
        maxStaleSeconds: {
          type: ['integer', 'null'],
          minimum: 1,
          maximum: 31536000,
          default: 21600,
          description:
            'While Redis is away (or has lost the registry\'s data, until an operator restores it), registry keys keep working from the local copy for this long after it was last confirmed current; then they are refused until Redis is back. Also how long a revocation made elsewhere can stay unheard by an instance cut off from Redis (watch petstore_gateway_key_registry_confirmed_age_seconds). Default 6 hours; null: for ever.',
        },
        commandTimeoutMs: { type: 'integer', minimum: 10, maximum: 60000, default: 1000, description: 'Longest wait for one Redis command of the registry (a sync, a change, a list); never on the request path.' },
      },
    },
    upstreamAuthorization: {
      description: 'What the upstream receives as Authorization: "drop" (default: nothing), "forward" (the client\'s header), or {fromEnv: NAME} (a credential of the gateway\'s own, the whole header value, from that variable).',
      default: 'drop',
      oneOf: [
        { type: 'string', enum: ['drop', 'forward'] },
        {
          type: 'object',
          additionalProperties: false,
          required: ['fromEnv'],
          properties: { fromEnv: { type: 'string', pattern: ENV_NAME } },
        },
      ],
    },
  },
} as const;

export type AuthConfig = SchemaType<typeof schema>;
/** One entry of `keys`: `expires` is RFC 3339 (after it, 401); `operations` absent: all of them; `scopes` absent: none; `owner` and `contact` absent: none. */
export type KeyEntry = AuthConfig['keys'][number];
/** Failed authentications per client address; `bruteForce: null` is no limit. */
export type BruteForceConfig = NonNullable<AuthConfig['bruteForce']>;
/** `auth.registry` (the registry's own type, src/registry/registry.ts, is this, as loaded). */
export type RegistryPolicyConfig = NonNullable<AuthConfig['registry']>;
export type UpstreamAuthorization = AuthConfig['upstreamAuthorization'];
