/**
 * The policy file's `upstream:` section: its JSON Schema (with defaults), and the type derived from
 * it, for the transports and the forwarding layers. src/config/schema.ts composes it.
 */
import type { SchemaType } from '../core/options.js';

export const UPSTREAM_SCHEMA = {
  type: 'object',
  description: 'Where requests go once every policy has passed them.',
  additionalProperties: false,
  default: {},
  properties: {
    url: {
      type: 'string',
      default: 'builtin',
      // No user:password@: the URL is printed in logs and banners, and the
      // credential would not even be sent; auth.upstreamAuthorization.fromEnv is the way.
      pattern: '^(builtin|https?://[^\\s?#/@]+(/[^\\s?#]*)?)$',
      description: '"builtin" (the in-process reference backend) or the base URL of the upstream, ending with its /v1 prefix, e.g. http://127.0.0.1:8081/v1. No user:password@ part: a credential for the upstream goes in policies.auth.upstreamAuthorization.',
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
        totalMs: {
          type: 'integer',
          minimum: 1,
          maximum: 3600000,
          default: 60000,
          description: 'From sending the request to the last byte of the response, however steadily the upstream sends: past it, 504 when nothing was sent to the client yet, else the client connection is closed.',
        },
      },
    },
    connections: { type: 'integer', minimum: 1, maximum: 65536, default: 128, description: 'Most keep-alive connections to the upstream.' },
    retryIdempotent: {
      type: 'boolean',
      default: false,
      description: 'Retry listPets and getPet once when the connection fails before any answer (never createPet, never on an answer such as 503).',
    },
    circuitBreaker: {
      type: ['object', 'null'],
      default: null,
      additionalProperties: false,
      required: ['failures', 'coolDownMs'],
      description: 'After `failures` consecutive failures (connection errors, timeouts, 502-504 answers; never 4xx or 500, which one consumer can provoke), answer 503 with Retry-After for `coolDownMs` instead of calling the upstream; null (default) for none.',
      properties: {
        failures: { type: 'integer', minimum: 1, maximum: 1000 },
        coolDownMs: { type: 'integer', minimum: 100, maximum: 3600000 },
      },
    },
    tls: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'TLS towards an https:// upstream (ignored for http://). The certificate is always verified.',
      properties: {
        caFile: { type: ['string', 'null'], minLength: 1, default: null, description: "PEM file of the CA(s) that sign the upstream's certificate; null (default): the system's trust store." },
        certFile: { type: ['string', 'null'], minLength: 1, default: null, description: 'PEM certificate (chain) the gateway presents to the upstream (mutual TLS), with keyFile; null (default): none.' },
        keyFile: { type: ['string', 'null'], minLength: 1, default: null, description: 'PEM private key of certFile; null (default): none.' },
        servername: { type: ['string', 'null'], minLength: 1, maxLength: 253, default: null, description: "Name sent as SNI and checked against the upstream's certificate; null (default): the URL's host." },
      },
    },
    maxBufferedBytes: {
      type: 'integer',
      minimum: 1024,
      maximum: 268435456,
      default: 8388608,
      description: 'Most bytes of an upstream body the gateway holds when a policy must read it (lists, errors); the rest is not read.',
    },
  },
} as const;

/** What a policy file's `upstream:` section gives the transports and the forwarding layers. */
export type UpstreamConfig = SchemaType<typeof UPSTREAM_SCHEMA>;

/** TLS towards an https:// upstream (src/tls/upstream.ts). */
export type UpstreamTlsConfig = UpstreamConfig['tls'];
