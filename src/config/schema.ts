/**
 * The JSON Schema of a policy file, composed from the top-level sections and the schema of every
 * policy module. `petstore-gateway schema` prints it; schema/policy.schema.json is that output,
 * shipped for editors (a test keeps the two equal).
 */
import { POLICY_MODULES } from '../policies/index.js';

export const UPSTREAM_SCHEMA = {
  type: 'object',
  description: 'Where requests go once every policy has passed them.',
  additionalProperties: false,
  default: {},
  properties: {
    url: {
      type: 'string',
      default: 'builtin',
      pattern: '^(builtin|https?://[^\\s?#]+)$',
      description: '"builtin" (the in-process reference backend) or the base URL of the upstream, ending with its /v1 prefix, e.g. http://127.0.0.1:8081/v1.',
    },
    timeouts: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'Upstream timeouts in milliseconds; past one, the client gets 504.',
      properties: {
        connectMs: { type: 'integer', minimum: 1, maximum: 600000, default: 2000, description: 'To open a connection.' },
        headersMs: { type: 'integer', minimum: 1, maximum: 600000, default: 10000, description: 'From sending the request to receiving the response headers.' },
        bodyMs: { type: 'integer', minimum: 1, maximum: 600000, default: 10000, description: 'Longest pause between two chunks of the response body.' },
      },
    },
    connections: { type: 'integer', minimum: 1, maximum: 65536, default: 128, description: 'Most keep-alive connections to the upstream.' },
    maxBufferedBytes: {
      type: 'integer',
      minimum: 1024,
      maximum: 268435456,
      default: 8388608,
      description: 'Most bytes of an upstream body the gateway holds when a policy must read it (lists, errors); the rest is not read.',
    },
  },
} as const;

export const SERVER_SCHEMA = {
  type: 'object',
  description: 'The listening socket of the standalone gateway (overridden by --host and --port).',
  additionalProperties: false,
  default: {},
  properties: {
    host: { type: 'string', minLength: 1, default: '127.0.0.1', description: 'Address to listen on; 127.0.0.1 by default, 0.0.0.0 to expose it.' },
    port: { type: 'integer', minimum: 0, maximum: 65535, default: 8080, description: 'TCP port; 0 picks a free one.' },
  },
} as const;

export function policyFileSchema(): Record<string, unknown> {
  const policies: Record<string, unknown> = {};
  for (const m of POLICY_MODULES) policies[m.name] = { ...m.schema, default: {} };
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    $id: 'https://petstore-gateway.invalid/policy.schema.json',
    title: 'petstore-gateway policy file',
    type: 'object',
    additionalProperties: false,
    properties: {
      version: { const: 1, default: 1, description: 'The policy file format version.' },
      upstream: UPSTREAM_SCHEMA,
      server: SERVER_SCHEMA,
      policies: {
        type: 'object',
        description: 'One entry per policy module; the chain runs them in a fixed order: ' + POLICY_MODULES.map((m) => m.name).join(', ') + '.',
        additionalProperties: false,
        default: {},
        properties: policies,
      },
    },
  };
}
