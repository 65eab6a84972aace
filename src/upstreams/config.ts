/** What a policy file's `upstream:` section gives the transports and the forwarding layers. */
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
