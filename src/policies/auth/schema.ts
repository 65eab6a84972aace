/** The config of the `auth` policy: its JSON Schema (with defaults) and its TypeScript type. */
import type { OperationId } from '../../core/operations.js';
import { HASH_PATTERN } from './keys.js';

export type UpstreamAuthorization = 'drop' | 'forward' | { readonly fromEnv: string };

export interface KeyEntry {
  readonly id: string;
  readonly hash: string;
  /** RFC 3339; after it the key is refused with 401 (issue 14). */
  readonly expires?: string;
  /** The operationIds the key may call; absent: all of them. */
  readonly operations?: readonly OperationId[];
}

export interface BruteForceConfig {
  readonly maxFailures: number;
  readonly windowSeconds: number;
}

export interface AuthConfig {
  readonly keys: ReadonlyArray<KeyEntry>;
  readonly keysFromEnv: string | null;
  readonly realm: string;
  readonly upstreamAuthorization: UpstreamAuthorization;
  /** Failed authentications per client address; null: no limit. */
  readonly bruteForce: BruteForceConfig | null;
}

export const DEFAULT_BRUTE_FORCE: BruteForceConfig = Object.freeze({ maxFailures: 100, windowSeconds: 60 });

/** RFC 3339 date-time, with a zone. */
const DATE_TIME = '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$';

const ENV_NAME = '^[A-Za-z_][A-Za-z0-9_]*$';

export const schema = {
  type: 'object',
  description: 'Bearer API keys (pet-store-interface.md, "Authentication"). Runs first, on every request.',
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
          id: { type: 'string', minLength: 1, maxLength: 64, description: 'A name for the key, shown in logs.' },
          hash: { type: 'string', pattern: HASH_PATTERN, description: '"sha256:" and 64 lower-case hex digits.' },
          expires: {
            type: 'string',
            pattern: DATE_TIME,
            description: 'When the key stops working (RFC 3339); from then on it gets 401 with error="invalid_token" and "The access token expired".',
          },
          operations: {
            type: 'array',
            uniqueItems: true,
            items: { type: 'string', enum: ['listPets', 'createPet', 'getPet'] },
            description: 'The operationIds the key may call; any other gets 403 forbidden. Absent: every operation.',
          },
        },
      },
    },
    keysFromEnv: {
      type: ['string', 'null'],
      pattern: ENV_NAME,
      default: 'PETSTORE_API_KEYS',
      description: 'An environment variable with more keys, comma-separated, in plaintext (as secret managers inject them); null to read none.',
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
