/** The config of the `auth` policy: its JSON Schema (with defaults) and its TypeScript type. */
import { HASH_PATTERN } from './keys.js';

export type UpstreamAuthorization = 'drop' | 'forward' | { readonly fromEnv: string };

export interface AuthConfig {
  readonly keys: ReadonlyArray<{ readonly id: string; readonly hash: string }>;
  readonly keysFromEnv: string | null;
  readonly realm: string;
  readonly upstreamAuthorization: UpstreamAuthorization;
}

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
