/** What a policy file's `server:` section gives the standalone server and the admin listener. */
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
