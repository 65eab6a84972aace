/**
 * The admin listener: a node:http server of its own, on its own port
 * (default 127.0.0.1:9464, OpenTelemetry's port for a process's Prometheus endpoint), separate
 * from the API so that probes and scrapes never pass the API's policies and the API never exposes
 * these. It serves exactly:
 *
 * - `GET /healthz`      200 {"status":"ok"} while the process serves (liveness);
 * - `GET /readyz`       200 {"status":"ready"}, or 503 {"status":"not ready","reason":...}, each with
 *                        a `detail` object when the readiness callback gives one;
 * - `GET /metrics`      Prometheus text exposition;
 * - `GET /deprecations` the deprecation report (JSON).
 *
 * HEAD is answered like GET without a body (RFC 9110 section 9.3.2; some load balancers probe
 * with HEAD). Any other method on these paths: 405 with `Allow: GET, HEAD`; any other path: 404;
 * both in the interface's Error shape. A query string is ignored.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from '../core/errors.js';
import type { DeprecationReport } from './deprecations.js';

/** Why the gateway should not get traffic now (the /readyz body's `reason`). */
export type NotReadyReason = 'starting' | 'draining' | 'circuit breaker open' | 'upstream unreachable' | 'store down' | 'worker down' | (string & {});

/** `detail`: what readiness looked at (the upstream, the key registry), shown in the /readyz body. */
export type ReadinessDetail = Readonly<Record<string, unknown>>;

export type Readiness = { readonly ready: true; readonly detail?: ReadinessDetail } | { readonly ready: false; readonly reason: NotReadyReason; readonly detail?: ReadinessDetail };

export const READY: Readiness = Object.freeze({ ready: true });

export interface MetricsText {
  readonly body: string;
  readonly contentType: string;
}

export interface AdminOptions {
  /** Default 127.0.0.1: metrics and the report name consumers; expose them on purpose, not by default. */
  readonly host?: string;
  /** Default 9464; 0 picks a free port (see `address()`). */
  readonly port?: number;
  readonly readiness: () => Readiness | Promise<Readiness>;
  /** The exposition, e.g. `async () => ({ body: await registry.metrics(), contentType: registry.contentType })`. */
  readonly metrics: () => Promise<MetricsText>;
  readonly deprecations: () => Promise<DeprecationReport>;
  /** Told about a failing callback (the client gets a 500 without details). */
  readonly onError?: (err: unknown, path: string) => void;
  /** More routes (the key admin API, src/ops/admin-keys.ts): true when one answered the request. */
  readonly routes?: (req: IncomingMessage, res: ServerResponse, path: string) => Promise<boolean>;
}

export interface AdminHandle {
  address(): AddressInfo;
  /** Stops listening and closes every connection (probes keep connections alive). */
  close(): Promise<void>;
}

export const ADMIN_DEFAULT_PORT = 9464;

/**
 * `server.admin` in the policy file, for src/config/schema.ts to compose into SERVER_SCHEMA
 * (overridden by `serve --admin-host` / `--admin-port`); null turns the listener off.
 */
export const ADMIN_SCHEMA = {
  type: ['object', 'null'],
  description: 'The admin listener (/healthz, /readyz, /metrics, /deprecations), on a port of its own; null turns it off.',
  additionalProperties: false,
  default: { host: '127.0.0.1', port: ADMIN_DEFAULT_PORT },
  properties: {
    host: { type: 'string', minLength: 1, default: '127.0.0.1', description: 'Address to listen on; loopback by default: metrics and the report name consumers.' },
    port: { type: 'integer', minimum: 0, maximum: 65535, default: ADMIN_DEFAULT_PORT, description: "TCP port; 9464 is OpenTelemetry's for a process's Prometheus endpoint; 0 picks a free one (logged)." },
  },
} as const;
export const ADMIN_PATHS = ['/healthz', '/readyz', '/metrics', '/deprecations'] as const;
const ALLOW = 'GET, HEAD';
const JSON_TYPE = 'application/json; charset=utf-8';
const HEALTHY = JSON.stringify({ status: 'ok' });
const IS_READY = JSON.stringify({ status: 'ready' });

function send(res: ServerResponse, status: number, contentType: string, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, {
    ...headers,
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
    // A probe or a scrape must see the state now, never a cache's copy.
    'cache-control': 'no-store',
  });
  res.end(body);
}

function sendError(res: ServerResponse, err: GatewayError): void {
  send(res, err.status, ERROR_CONTENT_TYPE, renderError(err), { ...err.headers });
}

async function route(options: AdminOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const target = req.url ?? '/';
  const q = target.indexOf('?');
  const path = q === -1 ? target : target.slice(0, q);
  if (options.routes !== undefined && (await options.routes(req, res, path))) return;
  if (!(ADMIN_PATHS as readonly string[]).includes(path)) {
    sendError(res, new GatewayError('not_found', { message: `No admin endpoint at this path: ${ADMIN_PATHS.join(', ')}.` }));
    return;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    sendError(res, new GatewayError('method_not_allowed', { headers: { allow: ALLOW } }));
    return;
  }
  try {
    switch (path) {
      case '/healthz':
        send(res, 200, JSON_TYPE, HEALTHY);
        return;
      case '/readyz': {
        const r = await options.readiness();
        const detail = r.detail === undefined ? {} : { detail: r.detail };
        if (r.ready) send(res, 200, JSON_TYPE, r.detail === undefined ? IS_READY : JSON.stringify({ status: 'ready', ...detail }));
        else send(res, 503, JSON_TYPE, JSON.stringify({ status: 'not ready', reason: r.reason, ...detail }));
        return;
      }
      case '/metrics': {
        const m = await options.metrics();
        send(res, 200, m.contentType, m.body);
        return;
      }
      default: {
        const report = await options.deprecations();
        send(res, 200, JSON_TYPE, JSON.stringify(report));
        return;
      }
    }
  } catch (err) {
    options.onError?.(err, path);
    if (path === '/readyz') {
      // A readiness check that cannot be made is not a ready gateway.
      send(res, 503, JSON_TYPE, JSON.stringify({ status: 'not ready', reason: 'readiness check failed' }));
    } else if (!res.headersSent) {
      sendError(res, new GatewayError('internal_error'));
    } else {
      res.destroy();
    }
  }
}

/**
 * Starts the admin listener; resolves once it listens.
 *
 * @example
 *   const admin = await startAdmin({
 *     host: '127.0.0.1', port: 9464,
 *     readiness: () => (draining ? { ready: false, reason: 'draining' } : READY),
 *     metrics: async () => ({ body: await metrics.registry.metrics(), contentType: metrics.registry.contentType }),
 *     deprecations: async () => deprecationReport(await ledger.report(), [{ operation: 'getPet', sunset }]),
 *   });
 *   log.info({ admin: admin.address() }, 'admin listening');
 */
export async function startAdmin(options: AdminOptions): Promise<AdminHandle> {
  const server: Server = createServer((req, res) => {
    void route(options, req, res);
  });
  // Small, fixed limits: the admin port answers short GETs from probes and scrapers only.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.maxHeadersCount = 100;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? ADMIN_DEFAULT_PORT, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    address: () => server.address() as AddressInfo,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
