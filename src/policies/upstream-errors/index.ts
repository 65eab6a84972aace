/**
 * The `upstream-errors` policy: a non-2xx answer of the upstream reaches the client in the Error
 * shape (pet-store-interface.md, "Errors"), with `status` equal to the HTTP status sent.
 *
 * - A body that already is a valid Error with that status, and a plain message, passes as it is.
 * - Otherwise the message comes from a common shape (`message`, `error`, `detail`, `error.message`,
 *   `errors[0].message`) when it is short, plain prose; else the catalogue's generic text. HTML
 *   pages, stack traces, large bodies and anything that looks like a secret are logged, redacted,
 *   for the operator, and never sent.
 * - Statuses the interface does not list for an operation are mapped by `statusMap`.
 * - Only `Retry-After` (on 429 and 503) survives of the upstream's headers.
 * - A 1xx/3xx final answer is not part of the interface: 502 upstream_contract_violation.
 */
import { ERROR_CONTENT_TYPE, errorResponse, GatewayError, type ErrorCode } from '../../core/errors.js';
import type { Exchange, PolicyEnv, PolicyModule, ResponseBody, UpstreamResponse } from '../../core/policy.js';
import type { OperationId } from '../../core/operations.js';
import { isPlainMessage, redactForLog } from '../../core/redact.js';
import { schema, type UpstreamErrorsConfig } from './schema.js';

export type { UpstreamErrorsConfig } from './schema.js';

/** The code a client gets for an upstream status, per operation where the interface gives one. */
function codeFor(op: OperationId | undefined, status: number): ErrorCode {
  if (status === 400) return op === 'createPet' ? 'invalid_body' : 'invalid_request';
  if (status === 404) return op === 'getPet' ? 'pet_not_found' : 'not_found';
  const fixed: Partial<Record<number, ErrorCode>> = {
    401: 'invalid_api_key',
    405: 'method_not_allowed',
    409: 'conflict',
    410: 'operation_removed',
    413: 'payload_too_large',
    415: 'unsupported_media_type',
    429: 'too_many_requests',
    500: 'internal_error',
    502: 'bad_gateway',
    503: 'service_unavailable',
    504: 'upstream_timeout',
  };
  return fixed[status] ?? 'upstream_error';
}

const CODE = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;

/** The first plain message among the common shapes of error bodies. */
export function extractMessage(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const v = value as Record<string, unknown>;
  const nested = v.error !== null && typeof v.error === 'object' ? (v.error as Record<string, unknown>).message : undefined;
  const first = Array.isArray(v.errors) && v.errors[0] !== null && typeof v.errors[0] === 'object' ? (v.errors[0] as Record<string, unknown>).message : undefined;
  for (const candidate of [v.message, v.error, v.detail, nested, first]) if (isPlainMessage(candidate)) return candidate;
  return undefined;
}

function parseJson(body: Buffer): unknown {
  const start = body.findIndex((b) => b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09);
  if (start === -1 || (body[start] !== 0x7b && body[start] !== 0x5b)) return undefined;
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}

function create(config: UpstreamErrorsConfig, env: PolicyEnv) {
  return {
    name: 'upstream-errors',
    wantsResponseBody(_ex: Exchange, res: UpstreamResponse): boolean {
      return res.status < 200 || res.status >= 300;
    },
    onResponseBody(ex: Exchange, res: ResponseBody): ResponseBody {
      if (res.status >= 200 && res.status < 300) return res;
      const op = ex.operation?.id;
      if (res.status < 400) {
        env.log?.warn({ policy: 'upstream-errors', upstreamStatus: res.status }, 'upstream answered outside the interface');
        return errorResponse(new GatewayError('upstream_contract_violation'));
      }
      const status = (op !== undefined ? config.statusMap[op][String(res.status)] : undefined) ?? res.status;
      const readable = !res.truncated && res.body.length <= config.maxBodyBytes;
      const value = readable ? parseJson(res.body) : undefined;
      const v = value as Record<string, unknown> | undefined;
      const retryAfter = res.headers['retry-after'];
      const headers: Record<string, string> =
        (status === 503 || status === 429) && typeof retryAfter === 'string' && /^[\w ,:]{1,64}$/.test(retryAfter) ? { 'retry-after': retryAfter } : {};

      const code = codeFor(op, status);
      if (v !== undefined && v.status === status && typeof v.code === 'string' && CODE.test(v.code) && isPlainMessage(v.code) && isPlainMessage(v.message) && Object.keys(v).length === 3) {
        // Already the Error shape with this status: its code and message pass on.
        return {
          status,
          headers: { ...headers, 'content-type': ERROR_CONTENT_TYPE },
          body: Buffer.from(JSON.stringify({ code: v.code, message: v.message, status })),
          truncated: false,
        };
      }
      const message = extractMessage(value);
      // A 4xx is the upstream's ordinary answer; a 5xx page is what the operator must see.
      if (message === undefined && res.body.length > 0 && status >= 500) {
        env.log?.warn(
          { policy: 'upstream-errors', operation: op, upstreamStatus: res.status, excerpt: redactForLog(res.body.subarray(0, 2048).toString('utf8')) },
          'upstream error body replaced by a generic message',
        );
      }
      return errorResponse(new GatewayError(code, message, headers, undefined, status));
    },
  };
}

export const upstreamErrors: PolicyModule<UpstreamErrorsConfig> = {
  name: 'upstream-errors',
  description: schema.description,
  schema,
  create,
};
