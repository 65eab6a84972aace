/**
 * Failures that are not a policy's decision, mapped to the one catalogue: transport errors of the
 * upstream (by `err.code`, as @fastify/reply-from and node's sockets name them) and bare HTTP
 * statuses (of the framework's own errors). Both adapters use these, so they fail alike.
 */
import { GatewayError, type ErrorCode } from './errors.js';

/** Codes that mean the upstream did not answer in time (504); anything else is 502. */
const TIMEOUT_CODES = new Set([
  'FST_REPLY_FROM_GATEWAY_TIMEOUT',
  'FST_REPLY_FROM_TIMEOUT',
  'FST_REPLY_FROM_HTTP_REQUEST_TIMEOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
  'ESOCKETTIMEDOUT',
]);

/** The codes and names along an error's cause chain. */
function codesOf(err: unknown): string[] {
  const codes: string[] = [];
  for (let e = err, depth = 0; e !== null && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, name } = e as { code?: unknown; name?: unknown };
    if (typeof code === 'string') codes.push(code);
    if (typeof name === 'string') codes.push(name);
  }
  return codes;
}

/** An answer that is not HTTP, or too big to be one: llhttp's parse errors, undici's HTTPParserError. */
function isParseError(code: string): boolean {
  return code.startsWith('HPE_') || code === 'HTTPParserError' || code === 'FST_REPLY_FROM_BAD_GATEWAY' || code === 'UND_ERR_HEADERS_OVERFLOW';
}

const CONNECTION_FAILURES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'ECONNABORTED']);

/**
 * Whether the connection failed before any answer, the one case where a read may be retried: never
 * when the upstream answered something (even garbage), never on a timeout.
 */
export function isConnectionFailure(err: unknown): boolean {
  const codes = codesOf(err);
  return codes.some((c) => CONNECTION_FAILURES.has(c)) && !codes.some((c) => isParseError(c) || TIMEOUT_CODES.has(c));
}

/** What the operator log gets of a cause: its code and message, never a request header. */
export function describeCause(cause: unknown): string | undefined {
  if (!(cause instanceof Error)) return undefined;
  const code = (cause as { code?: unknown }).code;
  return `${typeof code === 'string' ? code + ': ' : ''}${cause.message}`;
}

/**
 * 504 upstream_timeout, 502 bad_gateway (the upstream answered something that is not HTTP) or 502
 * upstream_unavailable (refused, reset, unreachable); the original is kept as `cause` for the log.
 */
export function fromTransportError(err: unknown): GatewayError {
  const codes = codesOf(err);
  const code = codes.some((c) => TIMEOUT_CODES.has(c)) ? 'upstream_timeout' : codes.some(isParseError) ? 'bad_gateway' : 'upstream_unavailable';
  return new GatewayError(code, undefined, {}, err);
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

/** The catalogue error for a bare status, e.g. a framework's own 413; unknown statuses are 500. */
export function errorForStatus(status: number, cause?: unknown): GatewayError {
  const code = BY_STATUS.get(status) ?? (status >= 400 && status < 500 ? 'invalid_request' : 'internal_error');
  return new GatewayError(code, undefined, {}, cause);
}
