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
  readonly timeouts: { readonly connectMs: number; readonly headersMs: number; readonly bodyMs: number };
  readonly connections: number;
  readonly retryIdempotent: boolean;
  readonly circuitBreaker: { readonly failures: number; readonly coolDownMs: number } | null;
  readonly maxBufferedBytes: number;
}

export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  /** The admin listener (health, readiness, metrics, deprecation report); null: none. */
  readonly admin: { readonly host: string; readonly port: number } | null;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly maxConnections: number;
  readonly maxHeaderBytes: number;
  readonly shutdownGraceMs: number;
  /** CIDR ranges / addresses of trusted proxies (proxy-addr syntax); empty: trust no one. */
  readonly trustedProxies: readonly string[];
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
