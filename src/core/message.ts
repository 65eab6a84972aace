/**
 * The shapes of an HTTP message that the policy contract (policy.ts) and the error catalogue
 * (errors.ts) share. They live here, importing nothing, so that those two do not import each
 * other (errors.ts renders a GatewayError as a ResponseBody; policy.ts decides with GatewayErrors).
 * policy.ts re-exports both: policies import them from there.
 */

export type HeaderValue = string | string[] | undefined;

/** A complete response body a policy rewrote, or the body it passes on. */
export interface ResponseBody {
  status: number;
  headers: Record<string, HeaderValue | number>;
  body: Buffer;
  /** True when the upstream sent more than the gateway buffers (`body` holds the first part). */
  truncated: boolean;
  /** The catalogue code when `body` is an Error the gateway wrote (for the access log and metrics). */
  code?: string;
}
