/**
 * The API listener's options: what the standalone server (node-server.ts) reads of a policy file's
 * `server:` section, as JSON Schema, with their type derived from it. src/config/schema.ts adds the
 * admin listener's part (src/ops) to make the whole section; this folder may not import src/ops.
 */
import type { SchemaType } from '../core/options.js';
import type { Problem } from '../core/policy.js';

export const LISTENER_SCHEMA = {
  type: 'object',
  description: 'The listening socket of the standalone gateway (overridden by --host and --port).',
  additionalProperties: false,
  default: {},
  properties: {
    host: { type: 'string', minLength: 1, default: '127.0.0.1', description: 'Address to listen on; 127.0.0.1 by default, 0.0.0.0 to expose it.' },
    port: { type: 'integer', minimum: 0, maximum: 65535, default: 8080, description: 'TCP port; 0 picks a free one.' },
    headersTimeoutMs: { type: 'integer', minimum: 100, maximum: 600000, default: 10000, description: 'A client must send its request headers within this time (slowloris): 408, then the connection is closed.' },
    requestTimeoutMs: { type: 'integer', minimum: 100, maximum: 600000, default: 30000, description: 'A client must send its whole request within this time: 408, then the connection is closed (HTTP/2: a stream not answered yet whose request has not ended is reset, RST_STREAM CANCEL).' },
    keepAliveTimeoutMs: { type: 'integer', minimum: 100, maximum: 600000, default: 5000, description: 'An idle keep-alive connection is closed after this time.' },
    maxConnections: { type: 'integer', minimum: 1, maximum: 1000000, default: 10000, description: 'Most client connections at once; more are refused at the socket.' },
    maxConnectionsPerAddress: {
      type: ['integer', 'null'],
      minimum: 1,
      maximum: 1000000,
      default: null,
      description:
        "Most client connections at once from one client (an IPv4 address, or an IPv6 /64) (idle, half-sent or busy), so one client cannot take all of maxConnections; more are refused at the socket. null (default): a quarter of maxConnections (rounded up), at most 1000 (2,500 capped to 1000 with the default maxConnections; 5 with maxConnections 20). Addresses in trustedProxies are exempt (a load balancer's connections carry many clients).",
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
        'After a connection is closed past maxPipelinedPerConnection, new connections from its address are refused at the socket for this long (each would cost a whole read parsed before it could be closed): held open and unread until the refusal ends (at most 10 s; 8 per client, 1,000 in all, the rest closed at once), so that the client cannot reconnect at once. Addresses in trustedProxies are exempt. 0: not refused.',
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
    streamStallTimeoutMs: {
      type: 'integer',
      minimum: 100,
      maximum: 600000,
      default: 20000,
      description:
        'HTTP/2: a stream whose client takes nothing of its answer for this long (its flow-control window kept shut, or a byte now and then), or keeps its side of the stream open this long after a complete answer, is reset (RST_STREAM) and its session takes no new stream (GOAWAY). Besides, at most 8 streams of a session may wait on their client at once (see docs/limits.md).',
    },
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

/** What the API listener reads of the `server:` section, defaults filled in. */
export type ListenerConfig = SchemaType<typeof LISTENER_SCHEMA>;

/** TLS on the API listener (src/tls/listener.ts). */
export type ServerTlsConfig = NonNullable<ListenerConfig['tls']>;

/** Most connections of one client when `maxConnectionsPerAddress` is null: a quarter of `maxConnections`, at most this. */
export const DEFAULT_ADDRESS_SHARE_MAX = 1000;

/**
 * The connections one client (address or IPv6 /64) may hold at once: `maxConnectionsPerAddress`
 * when set, else a quarter of `maxConnections` (rounded up, at least 1, at most 1000), so that at
 * least four clients fill the server and a small `maxConnections` is not one client's alone.
 */
export function addressShare(limits: Pick<ListenerConfig, 'maxConnections' | 'maxConnectionsPerAddress'>): number {
  return limits.maxConnectionsPerAddress ?? Math.min(DEFAULT_ADDRESS_SHARE_MAX, Math.max(1, Math.ceil(limits.maxConnections / 4)));
}

/**
 * The rules between the listener's options that the schema cannot say. node:http refuses a
 * `headersTimeout` longer than its `requestTimeout` when the server is made (Node 24 throws at
 * start), so `check` says it first, with the options' names.
 */
export function listenerProblems(server: Partial<Pick<ListenerConfig, 'headersTimeoutMs' | 'requestTimeoutMs'>>): Problem[] {
  const { headersTimeoutMs, requestTimeoutMs } = server;
  if (headersTimeoutMs === undefined || requestTimeoutMs === undefined || headersTimeoutMs <= requestTimeoutMs) return [];
  return [{ path: '$.server.requestTimeoutMs', message: `must be at least server.headersTimeoutMs (${headersTimeoutMs}): the whole request cannot have less time than its headers` }];
}
