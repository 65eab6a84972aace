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
 * - `GET /deprecations` the deprecation report (JSON);
 * - `GET /openapi.json` the OpenAPI document of what clients get through the gateway (when given);
 * - `GET /migration`    the migration report (JSON), when the lane is on (src/migration);
 *                        `DELETE /migration` resets its counts, behind the admin tokens
 *                        (src/ops/admin-migration.ts: a route of `routes`), else 404;
 * - `/console/`          the operator console and its JSON at `/console/api/*`
 *                        (src/ops/console/routes.ts: a route of `routes`, on unless
 *                        `server.admin.console` is false; its API behind the admin tokens).
 *
 * HEAD is answered like GET without a body (RFC 9110 section 9.3.2; some load balancers probe
 * with HEAD). Any other method on these paths: 405 with `Allow: GET, HEAD`; any other path: 404;
 * both in the interface's Error shape. A query string is ignored.
 *
 * The Host header is checked first (`hostChecker`): a page a browser loaded from a name the
 * attacker controls, re-pointed at this port by DNS rebinding, sends that name, and is refused
 * (400 `invalid_request`), so it cannot read /metrics or /deprecations (which name consumers). A
 * request with more than one Host field is refused the same way (RFC 9112 section 3.2).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type ServerOptions as HttpsOptions } from 'node:https';
import { isIP, type AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from '../core/errors.js';
import { hostFieldCount } from '../core/headers.js';
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
  /** The document clients see (src/api/served.ts), for the policy in force; absent: /openapi.json is 404. */
  readonly openapi?: (() => object | Promise<object>) | undefined;
  /** The migration report (src/migration/report.ts), when the lane is on; absent: /migration is 404. */
  readonly migration?: (() => Promise<object>) | undefined;
  /** Told about a failing callback (the client gets a 500 without details). */
  readonly onError?: (err: unknown, path: string) => void;
  /** More routes (the key admin API, src/ops/admin-keys.ts). */
  readonly routes?: AdminRoutes | undefined;
  /** Host names accepted besides the listener's own addresses (`server.admin.allowedHosts`, see `hostChecker`). */
  readonly allowedHosts?: readonly string[] | undefined;
  /** TLS: the options of `https.createServer` (src/tls's `ListenerTls.options()`); absent: plain HTTP. */
  readonly tls?: HttpsOptions | undefined;
}

/** Routes added to the admin listener, and what they add to /metrics. */
export interface AdminRoutes {
  /** True when it answered the request. */
  handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean>;
  /** More Prometheus text exposition, appended to /metrics. */
  metrics?(): Promise<string>;
}

/**
 * Several route sets as one: the first that answers a request wins; their metrics are joined.
 *
 * @example
 *   await startAdmin({ ..., routes: combineRoutes([keyRoutes, migrationRoutes]) });
 */
export function combineRoutes(list: ReadonlyArray<AdminRoutes | undefined>): AdminRoutes | undefined {
  const all = list.filter((r): r is AdminRoutes => r !== undefined);
  if (all.length <= 1) return all[0];
  return {
    async handle(req, res, path) {
      for (const r of all) if (await r.handle(req, res, path)) return true;
      return false;
    },
    async metrics() {
      const texts = await Promise.all(all.map((r) => r.metrics?.() ?? Promise.resolve('')));
      return texts.filter((x) => x !== '').join('');
    },
  };
}

export interface AdminHandle {
  address(): AddressInfo;
  /** The listening server (with TLS, a node:https server: its certificate is reloaded with `setSecureContext`). */
  readonly server: Server;
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
  description: 'The admin listener (/healthz, /readyz, /metrics, /deprecations, /openapi.json, the console at /console/), on a port of its own; null turns it off.',
  additionalProperties: false,
  default: { host: '127.0.0.1', port: ADMIN_DEFAULT_PORT, console: true },
  properties: {
    host: { type: 'string', minLength: 1, default: '127.0.0.1', description: 'Address to listen on; loopback by default: metrics and the report name consumers.' },
    port: { type: 'integer', minimum: 0, maximum: 65535, default: ADMIN_DEFAULT_PORT, description: "TCP port; 9464 is OpenTelemetry's for a process's Prometheus endpoint; 0 picks a free one (logged)." },
    console: {
      type: 'boolean',
      default: true,
      description:
        'The operator console at /console/ and its JSON at /console/api/* (docs/console.md): traffic and errors per operation and consumer, the deprecation burn-down, upstream contract violations, keys, the fleet. Its counts cost each request a few increments; false turns them and the pages off.',
    },
    allowedHosts: {
      type: 'array',
      uniqueItems: true,
      items: { type: 'string', pattern: '^(\\*|\\.?[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*)$' },
      description:
        'Host names the admin listener answers besides its own: it always accepts localhost, this machine\'s host name, loopback addresses and the address it is bound to (any IP address when bound to 0.0.0.0 or ::, as Kubernetes probes and Prometheus send the pod IP), and refuses any other Host with 400 (DNS rebinding). Entries are names or IPv4 addresses; a name with a leading dot (.svc.cluster.local) accepts that domain and its subdomains; "*" accepts any Host. Absent: none.',
    },
  },
} as const;
export const ADMIN_PATHS = ['/healthz', '/readyz', '/metrics', '/deprecations', '/openapi.json', '/migration'] as const;
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

const LOOPBACK_V4 = /^127\.\d+\.\d+\.\d+$/;

/** An IP address in one spelling (IPv6 compressed and lower-case, as WHATWG URL writes it). */
function canonicalIp(ip: string): string {
  return isIP(ip) === 6 ? new URL(`http://[${ip}]/`).hostname.slice(1, -1) : ip;
}

/**
 * Whether a Host header names this listener. Accepted: no Host (HTTP/1.0: no browser sends that),
 * `localhost`, this machine's host name, a loopback address, the address the listener is bound
 * to, any IP address when it is bound to every interface (0.0.0.0 or ::: kubelet probes and
 * Prometheus' pod discovery send the pod IP, and DNS rebinding needs a name, never an IP), and the
 * names of `allowed` (a leading dot: that domain and its subdomains; `*`: anything). The port is
 * not compared (a port mapping or a tunnel changes it).
 *
 * @example
 *   const ok = hostChecker({ address: '0.0.0.0', family: 'IPv4', port: 9464 }, ['prometheus-target.internal']);
 *   ok('10.1.2.3:9464') // true; ok('evil.example:9464') // false
 */
export function hostChecker(bound: AddressInfo, allowed: readonly string[] = []): (host: string | undefined) => boolean {
  const names = new Set(['localhost', hostname().toLowerCase(), ...allowed.filter((a) => !a.startsWith('.')).map((a) => a.toLowerCase())]);
  const suffixes = allowed.filter((a) => a.startsWith('.')).map((a) => a.toLowerCase());
  const any = allowed.includes('*');
  const wildcard = bound.address === '0.0.0.0' || bound.address === '::';
  const own = canonicalIp(bound.address);
  return (host) => {
    if (host === undefined || any) return true;
    const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]]+))(?::[0-9]*)?$/.exec(host);
    if (m === null) return false;
    if (m[1] !== undefined) {
      if (isIP(m[1]) !== 6) return false;
      const ip = canonicalIp(m[1]);
      return wildcard || ip === own || ip === '::1';
    }
    const name = (m[2] ?? '').toLowerCase().replace(/\.$/, '');
    if (isIP(name) === 4) return wildcard || name === own || LOOPBACK_V4.test(name) || names.has(name);
    return names.has(name) || suffixes.some((s) => name === s.slice(1) || name.endsWith(s));
  };
}

const MISDIRECTED = new GatewayError('invalid_request', {
  message: 'The Host header names no address of this admin listener (server.admin.allowedHosts lists the names it accepts).',
});

const TWO_HOSTS = new GatewayError('invalid_request', { message: 'The request has more than one Host header (RFC 9112 section 3.2).' });

async function route(options: AdminOptions, req: IncomingMessage, res: ServerResponse, hostOk: (host: string | undefined) => boolean): Promise<void> {
  // node keeps the first Host only: `Host: 127.0.0.1` then `Host: evil.example` would pass the
  // check below on the first while a proxy in front may have routed on the second.
  if (hostFieldCount(req.rawHeaders) > 1) {
    sendError(res, TWO_HOSTS);
    return;
  }
  if (!hostOk(req.headers.host)) {
    sendError(res, MISDIRECTED);
    return;
  }
  const target = req.url ?? '/';
  const q = target.indexOf('?');
  const path = q === -1 ? target : target.slice(0, q);
  if (options.routes !== undefined && (await options.routes.handle(req, res, path))) return;
  const absent = (p: string) => (p === '/openapi.json' && options.openapi === undefined) || (p === '/migration' && options.migration === undefined);
  if (!(ADMIN_PATHS as readonly string[]).includes(path) || absent(path)) {
    const paths = ADMIN_PATHS.filter((p) => !absent(p));
    sendError(res, new GatewayError('not_found', { message: `No admin endpoint at this path: ${paths.join(', ')}.` }));
    return;
  }
  if (path === '/migration' && req.method === 'DELETE') {
    // As /keys: the reset exists only while an admin token is in force (the route answered it then).
    sendError(res, new GatewayError('not_found', { message: 'DELETE /migration needs an admin token (server.admin.tokensFromEnv or tokensFile).' }));
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
        const more = (await options.routes?.metrics?.()) ?? '';
        send(res, 200, m.contentType, more === '' ? m.body : `${m.body}${m.body === '' || m.body.endsWith('\n') ? '' : '\n'}${more}`);
        return;
      }
      case '/openapi.json': {
        // Present: a listener without it answered 404 above.
        const document: object = (await options.openapi?.()) ?? {};
        send(res, 200, JSON_TYPE, JSON.stringify(document));
        return;
      }
      case '/migration': {
        const report: object = (await options.migration?.()) ?? {};
        send(res, 200, JSON_TYPE, JSON.stringify(report));
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
  // Set once listening, before the first request can arrive.
  let hostOk: (host: string | undefined) => boolean = () => false;
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    void route(options, req, res, hostOk);
  };
  const server: Server = options.tls === undefined ? createServer(handler) : createHttpsServer(options.tls, handler);
  // A failed handshake (plain HTTP sent to the TLS port, no client certificate) closes the socket
  // without a byte: node's default answer would be an HTTP response in clear text.
  if (options.tls !== undefined) server.on('tlsClientError', (_err: Error, socket: { destroy(): void }) => socket.destroy());
  // Small, fixed limits: the admin port answers short GETs from probes and scrapers only.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.maxHeadersCount = 100;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? ADMIN_DEFAULT_PORT, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      hostOk = hostChecker(server.address() as AddressInfo, options.allowedHosts);
      resolve();
    });
  });
  return {
    server,
    address: () => server.address() as AddressInfo,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
