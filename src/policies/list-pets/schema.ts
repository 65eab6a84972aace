/** The options of the `list-pets` policy (listPets query and response): its JSON Schema, and the type derived from it. */
import type { SchemaType } from '../../core/options.js';

export const schema = {
  type: 'object',
  description: 'listPets: the `limit` (1..100, default 20) and `status` query parameters, and what the response may hold (docs/interface.md, "listPets").',
  additionalProperties: false,
  properties: {
    outOfRange: {
      type: 'string',
      enum: ['reject', 'clamp'],
      default: 'reject',
      description: 'An integer `limit` outside 1..100: "reject" (400, naming the bound) or "clamp" (to 1 or 100). A `limit` that is not an integer is always a 400.',
    },
    unknownParams: {
      type: 'string',
      enum: ['drop', 'reject'],
      default: 'drop',
      description: 'Query parameters other than `limit` and `status`: "drop" (not forwarded) or "reject" (400).',
    },
    enforceResponse: {
      type: 'boolean',
      default: true,
      description: 'Never send more than `limit` animals, nor one whose status differs from the `status` filter, whatever the upstream returns.',
    },
  },
} as const;

export type ListPetsConfig = SchemaType<typeof schema>;
