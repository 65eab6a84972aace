/**
 * Who sends an admin API request (the key API, src/ops/admin-keys.ts; the migration reset,
 * src/ops/admin-migration.ts): the name of the admin token in its `Authorization: Bearer` header,
 * matched in constant time against every token in force (src/ops/admin-tokens.ts), or the refusal
 * to answer. Every refusal is counted, and a wrong token is charged to the client's address, by
 * the one guard of the listener (src/ops/admin-guard.ts): guesses at any admin route add up.
 */
import type { IncomingMessage } from 'node:http';
import { GatewayError } from '../core/errors.js';
import { AdminAuthGuard } from './admin-guard.js';
import type { AdminTokens } from './admin-tokens.js';

const REALM = 'Bearer realm="petstore-gateway-admin"';

/**
 * The authentication of admin requests with `tokens`, failures limited by `guard`.
 *
 * @example
 *   const who = adminAuthenticator(tokens, guard);
 *   const by = who(req);
 *   if (by instanceof GatewayError) return sendError(res, by);
 *   log.info({ by }, 'reset');
 */
export function adminAuthenticator(tokens: AdminTokens, guard: AdminAuthGuard): (req: IncomingMessage) => string | GatewayError {
  const missing = new GatewayError('missing_api_key', { message: 'An admin token is required: send Authorization: Bearer <admin token>.', headers: { 'www-authenticate': REALM } });
  const wrong = new GatewayError('invalid_api_key', { message: 'The admin token is not valid.', headers: { 'www-authenticate': `${REALM}, error="invalid_token"` } });
  return (req) => {
    const client = AdminAuthGuard.keyOf(req.socket.remoteAddress);
    const waitMs = guard.lockedFor(client);
    if (waitMs > 0) {
      guard.refusedLocked();
      return new GatewayError('too_many_auth_failures', { headers: { 'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))) } });
    }
    const header = req.headers.authorization;
    if (header === undefined || header === '') {
      guard.failed(client, 'missing');
      return missing;
    }
    const m = /^bearer +(\S+)$/i.exec(header);
    const name = m === null ? undefined : tokens.match(m[1] ?? '');
    if (name === undefined) {
      guard.failed(client, 'invalid');
      return wrong;
    }
    return name;
  };
}
