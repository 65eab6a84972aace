/** The shape of a policy file once it is validated and its defaults filled in. */
import type { LogConfig } from '../ops/access-log.js';
import type { HeadersConfig } from '../core/headers.js';
import type { AuthConfig } from '../policies/auth/index.js';
import type { CacheConfig } from '../policies/cache/index.js';
import type { CorsConfig } from '../policies/cors/index.js';
import type { DeprecationConfig } from '../policies/deprecation/index.js';
import type { ListPetsConfig } from '../policies/list-pets/index.js';
import type { ResponseContractConfig } from '../policies/response-contract/index.js';
import type { UpstreamErrorsConfig } from '../policies/upstream-errors/index.js';
import type { NewPetConfig } from '../policies/new-pet/index.js';
import type { RateLimitConfig } from '../policies/rate-limit/index.js';
import type { RouteConfig } from '../policies/route/index.js';

export interface UpstreamConfig {
  readonly url: string;
  readonly timeouts: { readonly connectMs: number; readonly headersMs: number; readonly bodyMs: number; readonly totalMs: number };
  readonly connections: number;
  readonly retryIdempotent: boolean;
  readonly circuitBreaker: { readonly failures: number; readonly coolDownMs: number } | null;
  readonly maxBufferedBytes: number;
  /** TLS towards an https:// upstream (src/tls/upstream.ts). */
  readonly tls: UpstreamTlsConfig;
}

export interface UpstreamTlsConfig {
  readonly caFile: string | null;
  readonly certFile: string | null;
  readonly keyFile: string | null;
  readonly servername: string | null;
}

/** TLS on the API listener (src/tls/listener.ts). */
export interface ServerTlsConfig {
  readonly certFile: string;
  readonly keyFile: string;
  readonly minVersion: 'TLSv1.2' | 'TLSv1.3';
  readonly clientCaFile: string | null;
}

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

export interface PolicyConfig {
  readonly version: 1;
  readonly upstream: UpstreamConfig;
  readonly server: ServerConfig;
  readonly headers: HeadersConfig;
  readonly log: LogConfig;
  readonly policies: {
    readonly cors: CorsConfig;
    readonly auth: AuthConfig;
    readonly 'rate-limit': RateLimitConfig;
    readonly route: RouteConfig;
    readonly deprecation: DeprecationConfig;
    readonly 'list-pets': ListPetsConfig;
    readonly 'new-pet': NewPetConfig;
    readonly 'upstream-errors': UpstreamErrorsConfig;
    readonly 'response-contract': ResponseContractConfig;
    readonly cache: CacheConfig;
  };
}

export type { HeadersConfig };
