/**
 * The `upstream-errors` policy: a non-2xx answer of the upstream reaches the client in the Error
 * shape (docs/interface.md, "Errors"), with `status` equal to the HTTP status sent.
 *
 * - A body that already is a valid Error with that status, and a plain message, passes as it is.
 * - Otherwise the message comes from a common shape (`message`, `error`, `detail`, `error.message`,
 *   `errors[0].message`) when it is short, plain prose; else the catalogue's generic text. HTML
 *   pages, stack traces, large bodies and anything that looks like a secret are logged, redacted,
 *   for the operator, and never sent.
 * - Statuses the interface does not list for an operation are mapped by `statusMap`.
 * - Only `Retry-After` (on 429 and 503) survives of the upstream's headers.
 * - A 1xx/3xx final answer is not part of the interface: 502 upstream_contract_violation.
 * - An upstream 401/403 when the upstream sees the gateway's credential (`upstreamAuthorization`
 *   `drop` or `fromEnv`): the client's key was valid, the gateway's was refused, so the client gets
 *   502 upstream_auth_failed and the operator an error line. When the upstream
 *   sees the client's own key (`forward`), its 401 is the client's: relayed in the Error shape.
 * - Every 401 the client gets carries a Bearer challenge (RFC 9110 section 15.5.2, RFC 6750 section 3).
 * - No secret the gateway holds (env.secrets, and the client's forwarded key) is relayed or logged.
 */
import { ERROR_CONTENT_TYPE, errorResponse, GatewayError, type ErrorCode } from '../../core/errors.js';
import type { Exchange, PolicyEnv, PolicyModule, ResponseBody, UpstreamResponse } from '../../core/policy.js';
import type { ApiOperation } from '../../api/model.js';
import { isPlainMessage, redactForLog, SecretSet } from '../../core/redact.js';
import { schema, type UpstreamErrorsConfig } from './schema.js';

export type { UpstreamErrorsConfig } from './schema.js';

/**
 * The code a client gets for an upstream status, per operation where the interface gives one. An
 * upstream 500 (and any status without a code of its own) is `upstream_error` with that status:
 * `internal_error` is the gateway's own failure, and an operator reading a client's report must
 * tell the two apart.
 */
function codeFor(op: ApiOperation | undefined, status: number): ErrorCode {
  // The document's own code for this status on this operation (`x-error-code`: createPet's 400
  // invalid_body, getPet's 404 pet_not_found), checked against the catalogue when it was compiled.
  const own = op?.errorCodes[status];
  if (own !== undefined) return own as ErrorCode;
  if (status === 400) return 'invalid_request';
  if (status === 404) return 'not_found';
  const fixed: Partial<Record<number, ErrorCode>> = {
    401: 'invalid_api_key',
    405: 'method_not_allowed',
    409: 'conflict',
    410: 'operation_removed',
    413: 'payload_too_large',
    415: 'unsupported_media_type',
    429: 'too_many_requests',
    502: 'bad_gateway',
    503: 'service_unavailable',
    504: 'upstream_timeout',
  };
  return fixed[status] ?? 'upstream_error';
}

const CODE = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;

/** The bearer token of an Authorization value, or undefined. */
function bearerToken(header: unknown): string | undefined {
  if (typeof header !== 'string') return undefined;
  const m = /^bearer +(\S+)/i.exec(header);
  return m === null ? undefined : m[1];
}

/** The first plain message among the common shapes of error bodies. */
export function extractMessage(value: unknown, isPlain: (text: unknown) => text is string = isPlainMessage): string | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const v = value as Record<string, unknown>;
  const nested = v.error !== null && typeof v.error === 'object' ? (v.error as Record<string, unknown>).message : undefined;
  const first = Array.isArray(v.errors) && v.errors[0] !== null && typeof v.errors[0] === 'object' ? (v.errors[0] as Record<string, unknown>).message : undefined;
  for (const candidate of [v.message, v.error, v.detail, nested, first]) if (isPlain(candidate)) return candidate;
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
  const secrets = env.secrets ?? SecretSet.EMPTY;
  // Absent: the default `drop`, the safe reading (a refusal is the gateway's, never the client's).
  const upstreamAuth = env.upstreamAuth ?? { credential: 'gateway', realm: 'petstore' };
  const challenge = `Bearer realm="${upstreamAuth.realm}", error="invalid_token"`;
  const refused = new GatewayError('upstream_auth_failed');
  const logError = (fields: Record<string, unknown>, message: string): void => {
    if (env.log === undefined) return;
    if (env.log.error !== undefined) env.log.error(fields, message);
    else env.log?.warn(fields, message);
  };
  return {
    name: 'upstream-errors',
    wantsResponseBody(_ex: Exchange, res: UpstreamResponse): boolean {
      return res.status < 200 || res.status >= 300;
    },
    onResponseBody(ex: Exchange, res: ResponseBody): ResponseBody {
      if (res.status >= 200 && res.status < 300) return res;
      const op = ex.operation?.id;
      // A copy run aside (a comparison) is not this gateway's answer: nothing logged of it.
      const log = ex.aside === true ? undefined : env.log;
      if (res.status < 400) {
        log?.warn({ policy: 'upstream-errors', upstreamStatus: res.status }, 'upstream answered outside the interface');
        return errorResponse(new GatewayError('upstream_contract_violation'));
      }
      // With `forward` the upstream saw the client's own key: it may echo it, so it is a secret here too.
      const known = upstreamAuth.credential === 'client' ? secrets.including(bearerToken(ex.head.headers.authorization)) : secrets;
      const isPlain = (text: unknown): text is string => isPlainMessage(text) && !known.contains(text);
      const excerpt = (): string => redactForLog(res.body.subarray(0, 2048).toString('utf8'), 500, known, res.truncated || res.body.length > 2048);
      if ((res.status === 401 || res.status === 403) && upstreamAuth.credential === 'gateway') {
        if (log !== undefined) logError(
          { policy: 'upstream-errors', operation: op, upstreamStatus: res.status, excerpt: excerpt() },
          "upstream refused the gateway's credentials (check upstreamAuthorization); the client got 502",
        );
        return errorResponse(refused);
      }
      const status = (op !== undefined ? (config.statusMap as Readonly<Record<string, Readonly<Record<string, number>> | undefined>>)[op]?.[String(res.status)] : undefined) ?? res.status;
      const readable = !res.truncated && res.body.length <= config.maxBodyBytes;
      const value = readable ? parseJson(res.body) : undefined;
      const v = value as Record<string, unknown> | undefined;
      const retryAfter = res.headers['retry-after'];
      const headers: Record<string, string> =
        (status === 503 || status === 429) && typeof retryAfter === 'string' && /^[\w ,:]{1,64}$/.test(retryAfter) ? { 'retry-after': retryAfter } : {};
      // A 401 must carry a challenge (RFC 9110 section 15.5.2); the token it names is the client's.
      // Set on the exchange too: the exchange passes a rewritten response's headers through the
      // upstream allowlist, which never lets an upstream WWW-Authenticate through.
      if (status === 401) headers['www-authenticate'] = ex.responseHeaders['www-authenticate'] = challenge;

      const code = codeFor(ex.operation as ApiOperation | undefined, status);
      if (v !== undefined && v.status === status && typeof v.code === 'string' && CODE.test(v.code) && isPlain(v.code) && isPlain(v.message) && Object.keys(v).length === 3) {
        // Already the Error shape with this status: its code and message pass on.
        return {
          status,
          headers: { ...headers, 'content-type': ERROR_CONTENT_TYPE },
          body: Buffer.from(JSON.stringify({ code: v.code, message: v.message, status })),
          truncated: false,
        };
      }
      const message = extractMessage(value, isPlain);
      // A 4xx is the upstream's ordinary answer; a 5xx page is what the operator must see.
      if (message === undefined && res.body.length > 0 && status >= 500) {
        log?.warn(
          { policy: 'upstream-errors', operation: op, upstreamStatus: res.status, excerpt: excerpt() },
          'upstream error body replaced by a generic message',
        );
      }
      return errorResponse(new GatewayError(code, { message, headers, status }));
    },
  };
}

export const upstreamErrors: PolicyModule<UpstreamErrorsConfig, 'upstream-errors'> = {
  name: 'upstream-errors',
  description: schema.description,
  schema,
  create,
};
