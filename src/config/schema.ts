/**
 * The JSON Schema of a policy file, composed from the top-level sections and the schema of every
 * policy module. `petstore-gateway schema` prints it; schema/policy.schema.json is that output,
 * shipped for editors (a test keeps the two equal).
 */
import { LOG_SCHEMA } from '../ops/access-log.js';
import { ADMIN_SCHEMA } from '../ops/admin.js';
import { HEADERS_SCHEMA } from '../core/headers.js';
import { LISTENER_SCHEMA } from '../fronts/config.js';
import { POLICY_MODULES } from '../policies/index.js';
import { UPSTREAM_SCHEMA } from '../upstreams/config.js';

// The upstream, headers and log sections' schemas live beside the code that reads them, each with
// its type derived from it. The server section is composed here from the listener's options
// (src/fronts) and the admin listener's (src/ops): neither of those folders may import the other.
export { HEADERS_SCHEMA, UPSTREAM_SCHEMA };

/**
 * `server.admin`: the admin listener's own options, plus the tokens of the key admin API
 * (docs/keys.md), which are the policy file's business rather than the listener's.
 */
export const SERVER_ADMIN_SCHEMA = {
  ...ADMIN_SCHEMA,
  description: 'The admin listener (/healthz, /readyz, /metrics, /deprecations, and /keys when admin tokens are set), on a port of its own; null turns it off.',
  default: { ...ADMIN_SCHEMA.default, tokensFromEnv: 'PETSTORE_ADMIN_TOKENS', readiness: { upstream: false } },
  properties: {
    ...ADMIN_SCHEMA.properties,
    tokensFromEnv: {
      type: ['string', 'null'],
      pattern: '^[A-Za-z_][A-Za-z0-9_]*$',
      default: 'PETSTORE_ADMIN_TOKENS',
      description:
        'An environment variable with the admin API\'s bearer tokens, comma-separated (held as hashes, compared in constant time; an API key never works there). The key admin API (/keys) answers 404 while the variable is unset or empty, or when this is null.',
    },
    readiness: {
      type: 'object',
      additionalProperties: false,
      default: { upstream: false },
      description: 'What /readyz answers 503 for besides starting, draining and a fail-closed store that is down. Its JSON `detail` always shows the upstream and the key registry.',
      properties: {
        upstream: {
          type: 'boolean',
          default: false,
          description:
            'true: not ready while the circuit breaker is open or the upstream is unreachable. Off by default: every replica shares one upstream, so a 503 on all of them takes the whole service out of rotation and clients get refused connections instead of the Error shape (502/503).',
        },
      },
    },
  },
} as const;

const { trustedProxies, ...listenerBeforeProxies } = LISTENER_SCHEMA.properties;

export const SERVER_SCHEMA = {
  ...LISTENER_SCHEMA,
  // admin before trustedProxies: the order the generated schema and docs/configuration.md keep.
  properties: { ...listenerBeforeProxies, admin: SERVER_ADMIN_SCHEMA, trustedProxies },
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
      headers: HEADERS_SCHEMA,
      log: LOG_SCHEMA,
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
