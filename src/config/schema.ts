/**
 * The JSON Schema of a policy file, composed from the top-level sections and the schema of every
 * policy module. `petstore-gateway schema` prints it; schema/policy.schema.json is that output,
 * shipped for editors (a test keeps the two equal).
 */
import { LOG_SCHEMA } from '../ops/access-log.js';
import { ADMIN_SCHEMA } from '../ops/admin.js';
import { DEFAULT_REQUEST_ALLOW, DEFAULT_RESPONSE_ALLOW, FIELD_NAME_PATTERN } from '../core/headers.js';
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

/**
 * `server.admin`: the admin listener's own options, plus the tokens of the key admin API
 * (docs/keys.md), which are the policy file's business rather than the listener's.
 */
export const SERVER_ADMIN_SCHEMA = {
  ...ADMIN_SCHEMA,
  description: 'The admin listener (/healthz, /readyz, /metrics, /deprecations, and /keys when admin tokens are set), on a port of its own; null turns it off.',
  default: { ...ADMIN_SCHEMA.default, tokensFromEnv: 'PETSTORE_ADMIN_TOKENS' },
  properties: {
    ...ADMIN_SCHEMA.properties,
    tokensFromEnv: {
      type: ['string', 'null'],
      pattern: '^[A-Za-z_][A-Za-z0-9_]*$',
      default: 'PETSTORE_ADMIN_TOKENS',
      description:
        'An environment variable with the admin API\'s bearer tokens, comma-separated (held as hashes, compared in constant time; an API key never works there). The key admin API (/keys) answers 404 while the variable is unset or empty, or when this is null.',
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
    headersTimeoutMs: { type: 'integer', minimum: 100, maximum: 600000, default: 10000, description: 'A client must send its request headers within this time (slowloris): 408, then the connection is closed.' },
    requestTimeoutMs: { type: 'integer', minimum: 100, maximum: 600000, default: 30000, description: 'A client must send its whole request within this time: 408, then the connection is closed.' },
    keepAliveTimeoutMs: { type: 'integer', minimum: 100, maximum: 600000, default: 5000, description: 'An idle keep-alive connection is closed after this time.' },
    maxConnections: { type: 'integer', minimum: 1, maximum: 1000000, default: 10000, description: 'Most client connections at once; more are refused at the socket.' },
    maxConnectionsPerAddress: {
      type: 'integer',
      minimum: 1,
      maximum: 1000000,
      default: 1000,
      description:
        "Most client connections at once from one peer address (idle, half-sent or busy), so one client cannot take all of maxConnections; more are refused at the socket. Addresses in trustedProxies are exempt (a load balancer's connections carry many clients).",
    },
    maxInFlightPerConnection: {
      type: 'integer',
      minimum: 1,
      maximum: 1000,
      default: 8,
      description:
        'Most requests of one connection served at once. Pipelined requests past it wait, and the connection is not read meanwhile (TCP back-pressure), so memory stays bounded whatever one client sends. Answers keep their order.',
    },
    maxPipelinedPerConnection: {
      type: 'integer',
      minimum: 1,
      maximum: 100000,
      default: 64,
      description:
        'Most requests of one connection parsed and waiting their turn (past maxInFlightPerConnection). node parses a whole read (64 KiB) at once; a connection with more waiting than this is closed without answering them, with a warning (pipeline_overflow). Ordinary clients do not pipeline; raise it only for a client that pipelines deep bursts.',
    },
    pipelineOverflowRefuseMs: {
      type: 'integer',
      minimum: 0,
      maximum: 3600000,
      default: 10000,
      description:
        'After a connection is closed past maxPipelinedPerConnection, new connections from its address are refused at the socket for this long (each would cost a whole read parsed before it could be closed). Addresses in trustedProxies are exempt. 0: not refused.',
    },
    maxInFlightPerConsumer: {
      type: ['integer', 'null'],
      minimum: 1,
      maximum: 100000,
      default: 128,
      description:
        "Most requests of one consumer (API key) in progress at once, from passing authentication and the other request policies to the end of the answer, on every connection and engine together. Past it a request waits, unread, in arrival order, and its connection is not read meanwhile (HTTP/1.1; an HTTP/2 stream waits under the session's flow control); after consumerQueueMs it is answered 429 too_many_in_flight with Retry-After. Unauthenticated requests are not counted. null: no bound.",
    },
    consumerQueueMs: {
      type: 'integer',
      minimum: 1,
      maximum: 60000,
      default: 1000,
      description: 'With maxInFlightPerConsumer: how long a request may wait for a place of its consumer before its 429 too_many_in_flight.',
    },
    maxHeaderBytes: { type: 'integer', minimum: 1024, maximum: 65536, default: 16384, description: 'Largest request head (request line and headers): 431 past it.' },
    shutdownGraceMs: { type: 'integer', minimum: 0, maximum: 600000, default: 10000, description: 'On SIGTERM/SIGINT, how long in-flight requests may take to finish before connections are closed.' },
    drainDelayMs: {
      type: 'integer',
      minimum: 0,
      maximum: 600000,
      default: 0,
      description:
        'On SIGTERM, /readyz answers 503 draining at once and the API listener keeps accepting for this long (load balancers remove an endpoint some time after it starts stopping), then stops accepting and shutdownGraceMs begins. 0 (default): stop accepting at once.',
    },
    tls: {
      type: ['object', 'null'],
      default: null,
      additionalProperties: false,
      required: ['certFile', 'keyFile'],
      description: 'TLS on the API listener; null (default): plain HTTP. Reloaded with the policy (SIGHUP, --watch).',
      properties: {
        certFile: { type: 'string', minLength: 1, description: 'PEM certificate chain, the server certificate first.' },
        keyFile: { type: 'string', minLength: 1, description: 'PEM private key of the certificate.' },
        minVersion: { enum: ['TLSv1.2', 'TLSv1.3'], default: 'TLSv1.2', description: 'Oldest TLS version accepted.' },
        clientCaFile: { type: ['string', 'null'], minLength: 1, default: null, description: 'PEM CA(s): when set, every client must present a certificate they signed (mutual TLS); null (default): none asked.' },
      },
    },
    http2: { type: 'boolean', default: true, description: 'With tls: HTTP/2 and HTTP/1.1 on the same port (ALPN); false: HTTP/1.1 only. No cleartext HTTP/2.' },
    hsts: {
      type: ['object', 'null'],
      default: null,
      additionalProperties: false,
      required: ['maxAgeSeconds'],
      description: 'With tls: Strict-Transport-Security on every answer (RFC 6797); null (default): none. Never sent without tls.',
      properties: {
        maxAgeSeconds: { type: 'integer', minimum: 0, maximum: 63072000, description: 'max-age, in seconds (one year: 31536000).' },
        includeSubDomains: { type: 'boolean', default: false, description: 'Add includeSubDomains.' },
      },
    },
    admin: SERVER_ADMIN_SCHEMA,
    trustedProxies: {
      type: 'array',
      default: [],
      maxItems: 256,
      items: { type: 'string', minLength: 1, maxLength: 64 },
      description:
        'Peers (IP addresses, CIDR ranges, or loopback/linklocal/uniquelocal) whose X-Forwarded-For, X-Forwarded-Proto, X-Forwarded-Host and Forwarded are kept (X-Forwarded-For appended to); from any other peer the gateway sets them from the connection. Empty (default): trust no one.',
    },
  },
} as const;

const FIELD_NAMES = (description: string) =>
  ({
    type: 'array',
    default: [],
    maxItems: 256,
    items: { type: 'string', pattern: FIELD_NAME_PATTERN, maxLength: 128, description: 'A header field name (RFC 9110 token), any case.' },
    description,
  }) as const;

export const HEADERS_SCHEMA = {
  type: 'object',
  description: 'Which header fields cross the gateway: both directions by allowlist.',
  additionalProperties: false,
  default: {},
  properties: {
    request: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        allow: FIELD_NAMES(
          `Client request fields forwarded to the upstream, ADDED to the defaults (${DEFAULT_REQUEST_ALLOW.join(', ')}). Hop-by-hop, method-override, URL-rewrite, forwarding fields, Host, Authorization and Accept-Encoding are never forwarded.`,
        ),
      },
    },
    response: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        allow: FIELD_NAMES(
          `Upstream response fields passed to the client, ADDED to the defaults (${DEFAULT_RESPONSE_ALLOW.join(', ')}). Hop-by-hop fields, Set-Cookie, Server, Via, X-Powered-By, X-AspNet-Version, Access-Control-*, Strict-Transport-Security and WWW-Authenticate never pass.`,
        ),
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
