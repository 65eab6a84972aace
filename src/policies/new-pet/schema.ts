/** The options of the `new-pet` policy (request bodies: createPet's NewPet): its JSON Schema, and the type derived from it. */
import type { SchemaType } from '../../core/options.js';

export const schema = {
  type: 'object',
  description: 'Request bodies (createPet\'s NewPet, docs/interface.md): media type, size and the schema the interface document gives.',
  additionalProperties: false,
  properties: {
    maxBytes: {
      type: 'integer',
      minimum: 64,
      maximum: 1048576,
      default: 16384,
      description: 'Largest accepted body in bytes; larger bodies get 413 before they are read whole.',
    },
    unknownFields: {
      type: 'string',
      enum: ['reject', 'strip', 'allow'],
      default: 'reject',
      description: 'Fields the body\'s schema does not define: "reject" (400), "strip" (removed before forwarding) or "allow" (forwarded as sent).',
    },
  },
} as const;

export type NewPetConfig = SchemaType<typeof schema>;
