/** TLS on the API listener (src/tls/listener.ts). */
export interface ServerTlsConfig {
  readonly certFile: string;
  readonly keyFile: string;
  readonly minVersion: 'TLSv1.2' | 'TLSv1.3';
  readonly clientCaFile: string | null;
}

/** What a policy file's `server:` section gives the standalone server and the admin listener. */
export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  /** The admin listener (health, readiness, metrics, deprecation report); null: none. */
  readonly admin: {
    readonly host: string;
    readonly port: number;
    /** The variable holding the key admin API's tokens (docs/keys.md); null: that API is off. */
    readonly tokensFromEnv: string | null;
  } | null;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly maxConnections: number;
  /** Most connections from one peer address (trusted proxies exempt). */
  readonly maxConnectionsPerAddress: number;
  /** Most requests of one connection served at once; pipelined ones past it wait, unread. */
  readonly maxInFlightPerConnection: number;
  /** Most parsed requests of one connection waiting their turn; past it the connection is closed. */
  readonly maxPipelinedPerConnection: number;
  /** After such a close, how long new connections from that address are refused (0: not at all). */
  readonly pipelineOverflowRefuseMs: number;
  /** Most requests of one consumer in progress at once (src/core/consumer-gate.ts); null: no bound. */
  readonly maxInFlightPerConsumer: number | null;
  /** How long a request waits for a place of its consumer before its 429. */
  readonly consumerQueueMs: number;
  readonly maxHeaderBytes: number;
  readonly shutdownGraceMs: number;
  /** From SIGTERM, how long the API listener keeps accepting while /readyz says draining. */
  readonly drainDelayMs: number;
  /** CIDR ranges / addresses of trusted proxies (proxy-addr syntax); empty: trust no one. */
  readonly trustedProxies: readonly string[];
  /** null: plain HTTP. */
  readonly tls: ServerTlsConfig | null;
  /** With tls: HTTP/2 and HTTP/1.1 on one port (ALPN). */
  readonly http2: boolean;
  /** With tls: Strict-Transport-Security on every answer. */
  readonly hsts: { readonly maxAgeSeconds: number; readonly includeSubDomains: boolean } | null;
}
