/**
 * The policy file's `migration:` section: a second upstream (`next`) and, per operation, how the
 * two share the traffic. Its JSON Schema (with defaults) and the type derived from it. The `next`
 * upstream takes the options of `upstream:` (src/upstreams/config.ts), which src/config/schema.ts
 * composes in: this layer reads of it only what the lane needs (`NextView`).
 */
import type { SchemaType } from '../core/options.js';
import { REDIS_CONNECTION_SCHEMA } from '../stores/connection-schema.js';

export const MODES = ['legacy', 'shadow', 'split', 'next'] as const;
export type Mode = (typeof MODES)[number];

/** The header a tester sends to pick a side, and the scope its key must carry, unless configured. */
export const TESTER_DEFAULT = { header: 'x-migration-side', scope: 'migration:tester' } as const;

export const OPERATION_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['mode'],
  description: 'How one operation (by operationId) reaches the two upstreams.',
  properties: {
    mode: {
      type: 'string',
      enum: MODES,
      description:
        'legacy: every request to `upstream` (the default for an operation not listed); shadow: answered by `upstream`, a copy sent to `next` and the two answers compared; split: `percent` of the consumers (by key id, sticky) to `next`, the rest to `upstream`; next: every request to `next`.',
    },
    percent: {
      type: 'number',
      minimum: 0,
      maximum: 100,
      default: 0,
      description: 'split: the share of consumers (by key id) sent to `next`, 0 to 100 (decimals allowed). Raising it only moves consumers from legacy to next, never back.',
    },
  },
} as const;

export const MIGRATION_SCHEMA = {
  type: ['object', 'null'],
  default: null,
  additionalProperties: false,
  required: ['next'],
  description: 'The migration lane (docs/migration.md): a second upstream, `next`, and per operation whether it is shadowed, split or answered by it. null (default): one upstream.',
  properties: {
    next: {
      type: 'object',
      description: 'The new backend: the options of `upstream` (url required, a URL), plus `sandbox`. Takes effect on a restart, as `upstream` does.',
    },
    operations: {
      type: 'object',
      default: {},
      description: 'Per operationId, its mode; an operation not listed stays on `upstream` (mode legacy).',
      additionalProperties: OPERATION_SCHEMA,
    },
    shadow: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'The copies shadow mode sends to `next`. They never delay or change the client\'s answer, which is `upstream`\'s.',
      properties: {
        percent: { type: 'number', minimum: 0, maximum: 100, default: 100, description: 'The share of shadowed requests copied (by request, at random).' },
        maxInFlight: { type: 'integer', minimum: 1, maximum: 10000, default: 64, description: 'Most copies waiting for `next` at once, per process; one more is dropped and counted.' },
        timeoutMs: { type: 'integer', minimum: 1, maximum: 600000, default: 2000, description: 'A copy `next` has not answered whole in this many milliseconds is abandoned and counted as a timeout.' },
        maxAnswerBytes: {
          type: 'integer',
          minimum: 1024,
          maximum: 268435456,
          default: 1048576,
          description: 'Most bytes of each answer (legacy\'s and the copy\'s) held for the comparison; a larger answer is not compared (counted). The client\'s answer is never held for it.',
        },
        maxBodyBytes: {
          type: 'integer',
          minimum: 0,
          maximum: 16777216,
          default: 65536,
          description: 'Most bytes of a request body copied; a request with a larger body is not copied (counted). Bodies are copied only when `next.sandbox` is true.',
        },
      },
    },
    compare: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'How two answers are compared: as the client would get each, after the same response phase.',
      properties: {
        ignore: {
          type: 'array',
          default: [],
          maxItems: 64,
          items: { type: 'string', pattern: '^\\$(\\.[A-Za-z_][A-Za-z0-9_]*|\\[\\*\\]|\\[[0-9]+\\])*$', maxLength: 256 },
          description: 'JSON paths whose values are not compared (declared noise), e.g. "$.id" (a Pet\'s id) or "$[*].id" (every id of a list): `$`, `.name`, `[*]` and `[N]` steps.',
        },
        listOrder: {
          type: 'string',
          enum: ['strict', 'ignore'],
          default: 'strict',
          description: 'strict (default): two lists are equal only in the same order; ignore: as multisets (the same items, any order).',
        },
        maxSamples: { type: 'integer', minimum: 0, maximum: 1000, default: 20, description: 'Differences kept as samples per operation (the newest), each value redacted and cut to 64 characters. Takes effect on a restart.' },
        maxPaths: { type: 'integer', minimum: 1, maximum: 10000, default: 100, description: 'Distinct field paths counted per operation; past it, differences count under "(other)". Takes effect on a restart.' },
      },
    },
    tester: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'Testers pick a side: a request carrying `header` (legacy or next) from a key with `scope` is sent there, whatever the operation\'s mode (no copy is made of it); from any other key the header is ignored.',
      properties: {
        header: { type: 'string', pattern: '^[a-z0-9-]+$', maxLength: 64, default: TESTER_DEFAULT.header, description: 'The request header (lower case) that names the side: legacy or next.' },
        scope: { type: 'string', pattern: '^[A-Za-z0-9:._-]+$', maxLength: 64, default: TESTER_DEFAULT.scope, description: 'The scope a key must carry (auth.keys[].scopes, or the key registry\'s) for its header to count.' },
      },
    },
    gate: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'The thresholds `petstore-gateway migration report` checks per operation for its verdict (flags override them).',
      properties: {
        minComparisons: { type: 'integer', minimum: 0, default: 10000, description: 'Comparisons needed before an operation can be called ready.' },
        maxDifferentRatio: { type: 'number', minimum: 0, maximum: 1, default: 0.001, description: 'Largest share of comparisons that differ (0.001: 0.1%).' },
        maxViolations: { type: 'integer', minimum: 0, default: 0, description: "Most answers of `next` that break the interface." },
      },
    },
    store: {
      ...REDIS_CONNECTION_SCHEMA,
      type: ['object', 'null'],
      default: null,
      description: 'A Redis where every instance adds its counts, so /migration and the report show the whole fleet; null (default): each instance reports its own.',
    },
  },
} as const;

export type MigrationConfig = NonNullable<SchemaType<typeof MIGRATION_SCHEMA>>;
export type OperationMigration = SchemaType<typeof OPERATION_SCHEMA>;
