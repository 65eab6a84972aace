/** The options of the `deprecation` policy (the lifecycle of deprecated operations, getPet's in the shipped interface): its JSON Schema, and the type derived from it. */
import type { SchemaType } from '../../core/options.js';

/** RFC 3339 date-time, with a zone. */
const DATE_TIME = '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$';
/** A URI reference without characters that would break a Link header (RFC 8288). */
const URI_REFERENCE = '^[^\\s<>"]+$';

export const schema = {
  type: 'object',
  description: 'Operations the interface document marks deprecated (getPet: removed on 5 December 2030, docs/interface.md, "Versioning"): their headers, their removal and rehearsals of it.',
  additionalProperties: false,
  properties: {
    deprecatedAt: {
      type: 'string',
      pattern: DATE_TIME,
      default: '2026-01-01T00:00:00Z',
      description: 'When the deprecated operations became deprecated (RFC 3339), sent as `Deprecation: @<unix-seconds>` (RFC 9745). The interface gives no date; set yours.',
    },
    sunset: {
      type: 'string',
      pattern: DATE_TIME,
      description: 'When a deprecated operation is removed (RFC 3339), sent as the `Sunset` HTTP-date (RFC 8594). Absent: the document\'s `x-sunset` (getPet: 2030-12-05T00:00:00Z, as the interface says).',
    },
    successor: {
      type: 'string',
      pattern: URI_REFERENCE,
      description: 'The replacement, sent as `Link: <...>; rel="successor-version"`. Absent: the document\'s `x-successor` (getPet: /v1/pets).',
    },
    links: {
      type: 'array',
      default: [],
      description: 'Documentation links, sent in `Link` with rel "deprecation" (RFC 9745) or "sunset" (RFC 8594).',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['href', 'rel'],
        properties: {
          href: { type: 'string', pattern: URI_REFERENCE },
          rel: { type: 'string', enum: ['deprecation', 'sunset'] },
          type: { type: 'string', pattern: '^[a-z]+/[a-z0-9.+-]+$' },
        },
      },
    },
    removeAfterSunset: {
      type: 'boolean',
      default: true,
      description: 'From the sunset moment on, answer a deprecated operation with 410 operation_removed without calling the upstream.',
    },
    brownouts: {
      type: 'array',
      default: [],
      description: 'Scheduled windows before the sunset in which the deprecated operations already answer 410, so clients find out while it can still be undone.',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['start', 'end'],
        properties: { start: { type: 'string', pattern: DATE_TIME }, end: { type: 'string', pattern: DATE_TIME } },
      },
    },
  },
} as const;

export type DeprecationConfig = SchemaType<typeof schema>;
