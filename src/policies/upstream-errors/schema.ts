/** The options of the `upstream-errors` policy: its JSON Schema, and the type derived from it. */
import type { SchemaType } from '../../core/options.js';

const STATUS_MAP = {
  type: 'object',
  propertyNames: { pattern: '^[1-5][0-9]{2}$' },
  additionalProperties: { type: 'integer', minimum: 400, maximum: 599 },
} as const;

export const schema = {
  type: 'object',
  description: 'Every non-2xx upstream answer reaches the client in the Error shape, with statuses the interface does not list for an operation mapped to ones it does.',
  additionalProperties: false,
  properties: {
    statusMap: {
      type: 'object',
      additionalProperties: false,
      description: 'Per operation, upstream status -> status the client gets, e.g. createPet {"422": 400}. An operation given here replaces its default table.',
      default: {},
      properties: {
        listPets: { ...STATUS_MAP, default: {} },
        createPet: { ...STATUS_MAP, default: { '409': 400, '422': 400 } },
        getPet: { ...STATUS_MAP, default: { '400': 404, '410': 404, '422': 404 } },
      },
    },
    maxBodyBytes: {
      type: 'integer',
      minimum: 256,
      maximum: 65536,
      default: 4096,
      description: 'Upstream error bodies larger than this are not read for a message: the client gets the generic text.',
    },
  },
} as const;

export type UpstreamErrorsConfig = SchemaType<typeof schema>;
