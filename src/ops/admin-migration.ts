/**
 * `DELETE /migration` on the admin listener: the migration lane's counts start again from zero
 * (the fleet's, with `migration.store`), as an operator does when a new `next` build is deployed
 * or after a fix, so the gate judges the build in service. Bearer-authenticated with the admin
 * tokens, as /keys is (src/ops/admin-auth.ts), failures counted by the same guard; while no token
 * is in force the route does not exist (the listener answers 404). One audit line per reset,
 * naming the token, never its value.
 *
 * `GET /migration` (the report) is the listener's own (src/ops/admin.ts); any method but GET,
 * HEAD and DELETE gets 405 here.
 */
import type { ServerResponse } from 'node:http';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from '../core/errors.js';
import type { AdminRoutes } from './admin.js';
import { adminAuthenticator } from './admin-auth.js';
import type { AdminAuthGuard } from './admin-guard.js';
import type { AuditLog } from './admin-keys.js';
import type { AdminTokens } from './admin-tokens.js';

export interface MigrationAdminOptions {
  /** The admin tokens in force (replaced whole on a reload); none: the route answers nothing (404). */
  readonly tokens: AdminTokens;
  readonly guard: AdminAuthGuard;
  /** Resets the counts; rejects when they cannot be (the fleet's Redis is away): nothing was reset then. */
  readonly reset: () => Promise<void>;
  readonly log: AuditLog | undefined;
}

function sendError(res: ServerResponse, err: GatewayError): void {
  const text = renderError(err);
  res.writeHead(err.status, { ...err.headers, 'cache-control': 'no-store', 'content-type': ERROR_CONTENT_TYPE, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const UNREACHABLE = new GatewayError('service_unavailable', {
  message: "The migration counts' Redis (migration.store) is not reachable; nothing was reset.",
  headers: { 'retry-after': '1' },
});

/**
 * The reset route.
 *
 * @example
 *   const routes = combineRoutes([keyRoutes, migrationAdminRoutes({ tokens, guard, reset: () => view.reset(), log })]);
 */
export function migrationAdminRoutes(options: MigrationAdminOptions): AdminRoutes {
  const who = adminAuthenticator(options.tokens, options.guard);
  return {
    handle: async (req, res, path) => {
      if (options.tokens.size === 0 || path !== '/migration' || req.method === 'GET' || req.method === 'HEAD') return false;
      if (req.method !== 'DELETE') {
        sendError(res, new GatewayError('method_not_allowed', { headers: { allow: 'GET, HEAD, DELETE' } }));
        return true;
      }
      const by = who(req);
      if (by instanceof GatewayError) {
        sendError(res, by);
        return true;
      }
      try {
        await options.reset();
      } catch {
        sendError(res, UNREACHABLE);
        return true;
      }
      options.log?.info({ audit: 'migration', action: 'reset', by, remoteAddress: req.socket.remoteAddress }, 'migration counts reset');
      res.writeHead(204, { 'cache-control': 'no-store' });
      res.end();
      return true;
    },
  };
}
