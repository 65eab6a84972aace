/**
 * The JSON Schema of a policy file, composed from the top-level sections and the schema of every
 * policy module. `petstore-gateway schema` prints it; schema/policy.schema.json is that output,
 * shipped for editors (a test keeps the two equal).
 */
import { LOG_SCHEMA } from '../ops/access-log.js';
import { ADMIN_SCHEMA } from '../ops/admin.js';
import { ADMIN_BRUTE_FORCE_DEFAULT } from '../ops/admin-guard.js';
import { MIN_TOKEN_LENGTH } from '../ops/admin-tokens.js';
import { HEADERS_SCHEMA } from '../core/headers.js';
import { LISTENER_SCHEMA } from '../fronts/config.js';
import { POLICY_MODULES } from '../policies/index.js';
import { UPSTREAM_SCHEMA } from '../upstreams/config.js';
import { MIGRATION_SCHEMA } from '../migration/schema.js';
import { TELEMETRY_SECTION_SCHEMA } from '../telemetry/schema.js';

// The upstream, headers and log sections' schemas live beside the code that reads them, each with
// its type derived from it. The server section is composed here from the listener's options
// (src/fronts) and the admin listener's (src/ops): neither of those folders may import the other.
export { HEADERS_SCHEMA, TELEMETRY_SECTION_SCHEMA, UPSTREAM_SCHEMA };

/**
 * `server.admin`: the admin listener's own options, plus the tokens of the key admin API
 * (docs/keys.md) and their failure limit, which are the policy file's business rather than the
 * listener's.
 */
// The API listener's TLS options, with no default: absent, the admin listener speaks plain HTTP.
const { default: _plainHttp, ...LISTENER_TLS } = LISTENER_SCHEMA.properties.tls;

export const SERVER_ADMIN_SCHEMA = {
  ...ADMIN_SCHEMA,
  description: 'The admin listener (/healthz, /readyz, /metrics, /deprecations, /openapi.json, and /keys when admin tokens are set), on a port of its own; null turns it off.',
  default: { ...ADMIN_SCHEMA.default, tokensFromEnv: 'PETSTORE_ADMIN_TOKENS', readiness: { upstream: false } },
  properties: {
    ...ADMIN_SCHEMA.properties,
    tokensFromEnv: {
      type: ['string', 'null'],
      pattern: '^[A-Za-z_][A-Za-z0-9_]*$',
      default: 'PETSTORE_ADMIN_TOKENS',
      description:
        `An environment variable with the admin API's bearer tokens, comma-separated (held as hashes, compared in constant time; an API key never works there). Each must be at least ${MIN_TOKEN_LENGTH} characters of random text (\`openssl rand -base64 32\`): \`check\` and \`serve\` refuse a shorter or guessable one. Read at start only (an environment does not change): tokens that must change without a restart go in tokensFile. The key admin API (/keys) answers 404 while no token is set.`,
    },
    tokensFile: {
      type: 'string',
      minLength: 1,
      description:
        'A file of more admin tokens, one per line (blank lines and lines starting with # skipped), e.g. a Kubernetes Secret mounted as a volume; the same strength rule as tokensFromEnv. Read at start and again on each reload (SIGHUP, --watch): a reload with a token too weak, or a file that cannot be read, is refused and the tokens in force stay. Absent: none.',
    },
    tls: {
      ...LISTENER_TLS,
      type: 'object',
      description:
        'TLS on the admin listener (HTTPS, HTTP/1.1), with the fields of server.tls: admin tokens and new key secrets no longer cross the network in clear. Re-read on each reload (SIGHUP, --watch). Probes and scrapes must then use HTTPS (Kubernetes: scheme: HTTPS); with clientCaFile, kubelet httpGet probes, which send no certificate, fail. Absent: plain HTTP.',
    },
    bruteForce: {
      type: 'object',
      additionalProperties: false,
      required: ['maxFailures', 'windowSeconds'],
      description: `Wrong admin tokens per client address: past maxFailures in windowSeconds, every /keys request from that address gets 429 too_many_auth_failures with Retry-After, a right token included, until the window drains (probes and scrapes are never locked). Absent: ${ADMIN_BRUTE_FORCE_DEFAULT.maxFailures} in ${ADMIN_BRUTE_FORCE_DEFAULT.windowSeconds} s.`,
      properties: {
        maxFailures: { type: 'integer', minimum: 1, maximum: 1000, description: 'Wrong tokens from one address that lock it.' },
        windowSeconds: { type: 'integer', minimum: 1, maximum: 86400, description: 'The window they are counted in; one failure is earned back every windowSeconds / maxFailures.' },
      },
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

/**
 * `migration:` with its `next` upstream: the options of `upstream` (a URL required), plus `sandbox`.
 * The section's own schema (src/migration) leaves `next` open: the lane reads of it only
 * what it needs, and this layer knows the upstream's schema.
 */
const { default: _upstreamDefault, ...NEXT_BASE } = UPSTREAM_SCHEMA;

export const MIGRATION_SECTION_SCHEMA = {
  ...MIGRATION_SCHEMA,
  properties: {
    ...MIGRATION_SCHEMA.properties,
    next: {
      ...NEXT_BASE,
      description: 'The new backend, with the options of `upstream` (its own timeouts, connections, TLS and circuit breaker), reached with an undici pool whatever the engine. Takes effect on a restart, as `upstream` does.',
      required: ['url'],
      properties: {
        ...UPSTREAM_SCHEMA.properties,
        url: { type: 'string', pattern: '^https?://[^\\s?#/@]+(/[^\\s?#]*)?$', description: 'The base URL of the new backend, ending with its path prefix, e.g. http://127.0.0.1:8082/v1. No user:password@ part.' },
        sandbox: {
          type: 'boolean',
          default: false,
          description: 'true: `next` is a sandbox whose writes do not matter, so shadow mode copies every method (a createPet copy creates an animal there). false (default): only GET and HEAD are copied.',
        },
      },
    },
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
      interface: {
        type: 'string',
        minLength: 1,
        description:
          'The interface the gateway enforces: an OpenAPI 3.1 document (YAML or JSON), relative to this file. Absent: the shipped pet store document, openapi/pet-store.yaml (docs/interface-document.md).',
      },
      upstream: UPSTREAM_SCHEMA,
      server: SERVER_SCHEMA,
      headers: HEADERS_SCHEMA,
      log: LOG_SCHEMA,
      migration: MIGRATION_SECTION_SCHEMA,
      telemetry: TELEMETRY_SECTION_SCHEMA,
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
