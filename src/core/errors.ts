/**
 * The one error type of the gateway and its catalogue of codes.
 *
 * Every response the gateway makes itself, and every upstream error it rewrites, is rendered from a
 * GatewayError by `renderError` into the interface's Error shape `{code, message, status}`
 * (docs/interface.md, "Errors"), with `status` equal to the HTTP status. The interface leaves
 * the set of codes open ("The set of values of `code`: not shown"); the catalogue below is ours and
 * stable: codes are never renamed, only added. docs/errors.md is generated from it (`npm run docs`).
 */
import type { ResponseBody } from './message.js';

export interface CatalogueEntry {
  readonly status: number;
  /** The message used when the raiser gives none: plain, safe to show to any client. */
  readonly message: string;
}

export const CATALOGUE = {
  // 400
  malformed_json: { status: 400, message: 'The request body is not valid JSON.' },
  invalid_body: { status: 400, message: "The request body does not match the operation's schema." },
  invalid_request: { status: 400, message: 'The request is malformed.' },
  invalid_query: { status: 400, message: 'The query parameters are not valid.' },
  // 401 (RFC 6750 section 3)
  missing_api_key: { status: 401, message: 'An API key is required: send Authorization: Bearer <key>.' },
  malformed_authorization: { status: 401, message: 'The Authorization header must be "Bearer <key>".' },
  invalid_api_key: { status: 401, message: 'The API key is not valid.' },
  expired_api_key: { status: 401, message: 'The API key has expired.' },
  // 403 (a key's operations)
  forbidden: { status: 403, message: 'This API key may not call this operation.' },
  // 404 / 405
  not_found: { status: 404, message: 'No operation of this interface is at this path.' },
  pet_not_found: { status: 404, message: 'The requested animal could not be found.' },
  method_not_allowed: { status: 405, message: 'This method is not allowed on this path.' },
  conflict: { status: 409, message: 'The request conflicts with the state of the service.' },
  operation_removed: { status: 410, message: 'This operation has been removed.' },
  // 408 / 413 / 415 / 431
  request_timeout: { status: 408, message: 'The request was not received in time.' },
  payload_too_large: { status: 413, message: 'The request body is too large.' },
  unsupported_media_type: { status: 415, message: 'The request body must be application/json.' },
  too_many_requests: { status: 429, message: 'Too many requests: retry later.' },
  rate_limited: { status: 429, message: 'The rate limit of this API key is exceeded: retry after the time in Retry-After.' },
  too_many_auth_failures: { status: 429, message: 'Too many failed authentications from this address: retry after the time in Retry-After.' },
  too_many_in_flight: { status: 429, message: 'This API key has too many requests in progress: retry after the time in Retry-After.' },
  expectation_failed: { status: 417, message: 'The only expectation the gateway meets is Expect: 100-continue.' },
  headers_too_large: { status: 431, message: 'The request headers are too large.' },
  // 5xx
  internal_error: { status: 500, message: 'The service failed to handle the request.' },
  not_implemented: { status: 501, message: 'The gateway does not implement this method for any resource.' },
  bad_gateway: { status: 502, message: 'The upstream service sent an invalid response.' },
  upstream_unavailable: { status: 502, message: 'The upstream service could not be reached.' },
  upstream_contract_violation: { status: 502, message: 'The upstream service answered outside the interface.' },
  upstream_error: { status: 502, message: 'The upstream service answered with an error.' },
  upstream_auth_failed: { status: 502, message: "The upstream service refused the gateway's credentials." },
  upstream_tls_error: { status: 502, message: 'A secure connection to the upstream service could not be established.' },
  service_unavailable: { status: 503, message: 'The service is unavailable: retry later.' },
  upstream_timeout: { status: 504, message: 'The upstream service did not answer in time.' },
  store_full: { status: 507, message: 'The store cannot hold more animals.' },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof CATALOGUE;

/** The optional fields of a GatewayError (named fields, not five positional arguments). */
export interface GatewayErrorOptions {
  /** Shown to the client; the catalogue's message when absent. */
  readonly message?: string | undefined;
  /** Extra response headers, e.g. WWW-Authenticate on 401 or Allow on 405. */
  readonly headers?: Readonly<Record<string, string>> | undefined;
  /** The underlying failure, kept as `Error.cause` for the log (never shown to the client). */
  readonly cause?: unknown;
  /**
   * Only for `upstream_error`, which carries an upstream status that no other code names (e.g.
   * 418); every other code has the catalogue's status and ignores this.
   */
  readonly status?: number | undefined;
}

/**
 * A decision to answer the client with an error. Policies return it (they never throw it); the
 * exchange renders it in exactly one place (`sendError`, src/core/exchange/reply.ts).
 */
export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Extra response headers, e.g. WWW-Authenticate on 401 or Allow on 405. */
  readonly headers: Readonly<Record<string, string>>;

  /** `code` is positional (the one required field, the one most read); the rest are named. */
  constructor(code: ErrorCode, options: GatewayErrorOptions = {}) {
    const { message, headers = {}, cause, status } = options;
    super(message ?? CATALOGUE[code].message, cause === undefined ? undefined : { cause });
    this.name = 'GatewayError';
    this.code = code;
    this.status = code === 'upstream_error' && status !== undefined ? status : CATALOGUE[code].status;
    this.headers = headers;
  }
}

const BY_STATUS: ReadonlyMap<number, ErrorCode> = new Map<number, ErrorCode>([
  [400, 'invalid_request'],
  [401, 'missing_api_key'],
  [404, 'not_found'],
  [405, 'method_not_allowed'],
  [408, 'request_timeout'],
  [413, 'payload_too_large'],
  [415, 'unsupported_media_type'],
  [429, 'too_many_requests'],
  [431, 'headers_too_large'],
  [502, 'bad_gateway'],
  [503, 'service_unavailable'],
  [504, 'upstream_timeout'],
]);

/**
 * The catalogue error for a bare status, e.g. a framework's own 413 (a front maps its framework's
 * errors by their status); unknown 4xx are 400 invalid_request, anything else 500.
 */
export function errorForStatus(status: number, cause?: unknown): GatewayError {
  const code = BY_STATUS.get(status) ?? (status >= 400 && status < 500 ? 'invalid_request' : 'internal_error');
  return new GatewayError(code, { cause });
}

export const ERROR_CONTENT_TYPE = 'application/json; charset=utf-8';

/** The body of an Error response: exactly `{code, message, status}`. */
export function renderError(err: GatewayError): string {
  return JSON.stringify({ code: err.code, message: err.message, status: err.status });
}

/** An error as a complete response, for the response phase: its own headers replace the upstream's. */
export function errorResponse(err: GatewayError): ResponseBody {
  return {
    status: err.status,
    headers: { ...err.headers, 'content-type': ERROR_CONTENT_TYPE },
    body: Buffer.from(renderError(err)),
    truncated: false,
    code: err.code,
  };
}
