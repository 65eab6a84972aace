/**
 * The operator console on the admin listener (docs/console.md): the page at `/console/` and the
 * JSON it draws, `/console/api/{traffic,deprecations,violations,keys,fleet,migration}`.
 *
 * - The page's files (console/ at the package's root, and uPlot from node_modules) are read once,
 *   when the routes are made, and served from memory with a strong ETag and `Cache-Control:
 *   no-cache` (revalidated, answered 304 when unchanged). They hold no data, so they load without
 *   a token; the page asks for one when the API answers 401.
 * - The API answers with `Cache-Control: no-store`. When admin tokens are in force every API
 *   request needs `Authorization: Bearer <admin token>`, checked as /keys checks it
 *   (src/ops/admin-auth.ts): failures are counted and an address that guesses is locked by the
 *   listener's one guard. With no token in force the API is open, as /deprecations is: the
 *   listener is loopback-only by default.
 * - Every response under /console carries a strict Content-Security-Policy (nothing but this
 *   origin's own files: no inline script or style, no third-party request) and the headers that
 *   keep the page out of frames and other origins' reach. Only GET and HEAD (405 otherwise).
 *
 * Errors are in the interface's Error shape (src/core/errors.ts).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from '../../core/errors.js';
import type { AdminRoutes } from '../admin.js';
import { adminAuthenticator } from '../admin-auth.js';
import { ADMIN_BRUTE_FORCE_DEFAULT, AdminAuthGuard } from '../admin-guard.js';
import type { AdminTokens } from '../admin-tokens.js';
import type { ConsoleData } from './types.js';

export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The headers of every /console response (OWASP's secure headers for a page that needs no one else). */
const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'x-frame-options': 'DENY',
});

const ALLOW = 'GET, HEAD';
const JSON_TYPE = 'application/json; charset=utf-8';
/** Days a keys query may name: a year's worth of `unusedDays` is the most anyone asks. */
const MAX_DAYS = 3650;

export interface ConsoleRoutesOptions {
  readonly data: ConsoleData;
  /** The admin tokens in force (replaced on a reload); none or empty: the API is open, as /deprecations is. */
  readonly tokens?: (() => AdminTokens | undefined) | undefined;
  /** The listener's guard (shared with /keys); a guard of the default limits when absent. */
  readonly guard?: AdminAuthGuard | undefined;
  /** Told about a failing data callback (the client gets a 500 without details). */
  readonly onError?: ((err: unknown, path: string) => void) | undefined;
}

interface StaticFile {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
}

function staticFile(path: string, type: string): StaticFile {
  const body = readFileSync(path);
  return { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
}

/**
 * The folder of the page's files: console/ at the package's root, found upwards from this module,
 * which runs as dist/ops/console/routes.js, src/ops/console/routes.ts (tsx) or
 * .test-build/src/ops/console/routes.js.
 */
export function consoleDir(from: string = dirname(fileURLToPath(import.meta.url))): string {
  let dir = from;
  for (let i = 0; i < 6; i++) {
    const candidate = join(dir, 'console');
    if (existsSync(join(candidate, 'index.html')) && existsSync(join(dir, 'package.json'))) return candidate;
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  throw new Error(`the console's page (console/index.html) was not found above ${from}`);
}

function pageFiles(): ReadonlyMap<string, StaticFile> {
  const dir = consoleDir();
  const require = createRequire(import.meta.url);
  const js = 'text/javascript; charset=utf-8';
  const css = 'text/css; charset=utf-8';
  return new Map([
    ['/console/', staticFile(join(dir, 'index.html'), 'text/html; charset=utf-8')],
    ['/console/app.js', staticFile(join(dir, 'app.js'), js)],
    ['/console/app.css', staticFile(join(dir, 'app.css'), css)],
    ['/console/uplot.js', staticFile(require.resolve('uplot/dist/uPlot.iife.min.js'), js)],
    ['/console/uplot.css', staticFile(require.resolve('uplot/dist/uPlot.min.css'), css)],
  ]);
}

function writeHead(res: ServerResponse, status: number, headers: Record<string, string | number>): void {
  res.writeHead(status, { ...SECURITY_HEADERS, ...headers });
}

function sendError(res: ServerResponse, err: GatewayError, head: boolean): void {
  const text = renderError(err);
  writeHead(res, err.status, { ...err.headers, 'cache-control': 'no-store', 'content-type': ERROR_CONTENT_TYPE, 'content-length': Buffer.byteLength(text) });
  res.end(head ? undefined : text);
}

function sendFile(req: IncomingMessage, res: ServerResponse, file: StaticFile, head: boolean): void {
  const common = { 'cache-control': 'no-cache', etag: file.etag };
  // If-None-Match lists entity tags (RFC 9110 section 13.1.2); a weak comparison is what it asks for.
  const match = req.headers['if-none-match'];
  if (match !== undefined && (match.trim() === '*' || match.split(',').some((m) => m.trim().replace(/^W\//, '') === file.etag))) {
    writeHead(res, 304, common);
    res.end();
    return;
  }
  writeHead(res, 200, { ...common, 'content-type': file.type, 'content-length': file.body.length });
  res.end(head ? undefined : file.body);
}

const badQuery = (message: string) => new GatewayError('invalid_query', { message });

/** The query's parameters, each at most once; the names the endpoint does not read are ignored. */
function params(url: string | undefined): URLSearchParams | GatewayError {
  const q = (url ?? '').indexOf('?');
  const search = new URLSearchParams(q === -1 ? '' : (url ?? '').slice(q + 1));
  for (const name of new Set(search.keys())) if (search.getAll(name).length > 1) return badQuery(`The query parameter ${name} is given more than once.`);
  return search;
}

function scopeOf(search: URLSearchParams): 'instance' | undefined | GatewayError {
  const scope = search.get('scope');
  if (scope === null) return undefined;
  return scope === 'instance' ? 'instance' : badQuery('scope must be instance (absent: the fleet, when Redis is configured).');
}

function daysOf(search: URLSearchParams, name: string): number | undefined | GatewayError {
  const raw = search.get(name);
  if (raw === null) return undefined;
  const n = /^[0-9]{1,4}$/.test(raw) ? Number(raw) : NaN;
  return n >= 1 && n <= MAX_DAYS ? n : badQuery(`${name} must be a whole number of days from 1 to ${MAX_DAYS}.`);
}

/** The view an API path names, read with the query's parameters; an error for a bad parameter. */
async function view(data: ConsoleData, name: string, search: URLSearchParams): Promise<object | GatewayError | undefined> {
  switch (name) {
    case 'traffic': {
      const window = search.get('window') ?? 'hour';
      if (window !== 'hour' && window !== 'day') return badQuery('window must be hour or day.');
      const scope = scopeOf(search);
      return scope instanceof GatewayError ? scope : data.traffic(window, scope);
    }
    case 'deprecations':
    case 'violations': {
      const scope = scopeOf(search);
      if (scope instanceof GatewayError) return scope;
      return name === 'violations' ? data.violations(scope) : data.deprecations(scope);
    }
    case 'keys': {
      const unusedDays = daysOf(search, 'unusedDays');
      if (unusedDays instanceof GatewayError) return unusedDays;
      const expiringDays = daysOf(search, 'expiringDays');
      if (expiringDays instanceof GatewayError) return expiringDays;
      return data.keys({ ...(unusedDays === undefined ? {} : { unusedDays }), ...(expiringDays === undefined ? {} : { expiringDays }) });
    }
    case 'fleet':
      return data.fleet();
    case 'migration':
      return data.migration();
    default:
      return undefined;
  }
}

const API = /^\/console\/api\/([a-z]+)$/;

/**
 * The console's routes, for `startAdmin`'s `routes` (with `combineRoutes` beside the key API).
 *
 * @example
 *   const routes = combineRoutes([keyRoutes, consoleRoutes({ data, tokens: () => tokens, guard })]);
 *   await startAdmin({ ..., routes });
 */
export function consoleRoutes(options: ConsoleRoutesOptions): AdminRoutes {
  const files = pageFiles();
  const guard = options.guard ?? new AdminAuthGuard(ADMIN_BRUTE_FORCE_DEFAULT);
  // One authenticator per token set: a reload replaces the set's contents, a new set its identity.
  let auth: { tokens: AdminTokens; who: ReturnType<typeof adminAuthenticator> } | undefined;
  const authenticate = (req: IncomingMessage): GatewayError | undefined => {
    const tokens = options.tokens?.();
    if (tokens === undefined || tokens.size === 0) return undefined;
    if (auth?.tokens !== tokens) auth = { tokens, who: adminAuthenticator(tokens, guard) };
    const by = auth.who(req);
    return by instanceof GatewayError ? by : undefined;
  };

  return {
    handle: async (req, res, path) => {
      if (path !== '/console' && !path.startsWith('/console/')) return false;
      const head = req.method === 'HEAD';
      if (req.method !== 'GET' && !head) {
        sendError(res, new GatewayError('method_not_allowed', { headers: { allow: ALLOW } }), false);
        return true;
      }
      if (path === '/console') {
        // 308 keeps the method (RFC 9110 section 15.4.9); the page's relative URLs need the slash.
        writeHead(res, 308, { location: '/console/', 'cache-control': 'no-cache', 'content-length': 0 });
        res.end();
        return true;
      }
      const file = files.get(path);
      if (file !== undefined) {
        sendFile(req, res, file, head);
        return true;
      }
      const name = API.exec(path)?.[1];
      if (name === undefined) {
        sendError(res, new GatewayError('not_found', { message: 'No console file or endpoint at this path: /console/, /console/api/{traffic,deprecations,violations,keys,fleet,migration}.' }), head);
        return true;
      }
      await answerApi(options, req, res, { name, path, head, authenticate });
      return true;
    },
  };
}

interface ApiRequest {
  readonly name: string;
  readonly path: string;
  readonly head: boolean;
  readonly authenticate: (req: IncomingMessage) => GatewayError | undefined;
}

async function answerApi(options: ConsoleRoutesOptions, req: IncomingMessage, res: ServerResponse, { name, path, head, authenticate }: ApiRequest): Promise<void> {
  const refused = authenticate(req);
  if (refused !== undefined) {
    sendError(res, refused, head);
    return;
  }
  const search = params(req.url);
  if (search instanceof GatewayError) {
    sendError(res, search, head);
    return;
  }
  let answer: object | GatewayError | undefined;
  try {
    answer = await view(options.data, name, search);
  } catch (err) {
    options.onError?.(err, path);
    answer = new GatewayError('internal_error');
  }
  if (answer === undefined) answer = new GatewayError('not_found', { message: 'No console endpoint at this path: /console/api/{traffic,deprecations,violations,keys,fleet,migration}.' });
  if (answer instanceof GatewayError) {
    sendError(res, answer, head);
    return;
  }
  const text = JSON.stringify(answer);
  writeHead(res, 200, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(head ? undefined : text);
}
