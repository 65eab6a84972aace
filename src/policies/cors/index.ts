/**
 * The `cors` policy: browsers on other origins may call the API (the Fetch standard, section 3.2,
 * "CORS protocol"). First in the chain, because a preflight carries no credentials: it is answered
 * here, before authentication, and never forwarded.
 *
 * - A preflight (OPTIONS with Origin and Access-Control-Request-Method) from an allowed origin: a
 *   local 204 with Access-Control-Allow-Origin, -Methods, -Headers, -Max-Age (and -Credentials).
 * - Every other answer to an allowed origin, errors included (401, 400, 429, 502), carries
 *   Access-Control-Allow-Origin and Access-Control-Expose-Headers, so a page can read the Error
 *   body and the fields it names (`annotate` puts them on the exchange's response headers).
 * - `Vary: Origin` on every answer, so no shared cache hands one origin's answer to another.
 * - Any other origin gets no CORS field: the browser blocks the page from reading the answer, and a
 *   preflight from it goes on through the chain as any OPTIONS does (401, or 405 with a key).
 * The upstream's own Access-Control-* fields never pass (src/core/headers.ts).
 */
import { LocalReply, type Exchange, type HeaderValue, type PolicyModule, type Problem, type RequestDecision } from '../../core/policy.js';
import { schema, type CorsConfig } from './schema.js';

export type { CorsConfig } from './schema.js';

/** The methods of the interface ("Endpoints"); a preflight for another gets no Allow-Methods match. */
const METHODS = 'GET, POST';

function check(config: CorsConfig, path: string): Problem[] {
  // Fetch standard: a credentialed request is refused with `Access-Control-Allow-Origin: *`.
  if (config.credentials && config.origins.includes('*')) return [{ path: `${path}.origins`, message: 'must list exact origins when credentials is true: "*" is refused by browsers for credentialed requests' }];
  return [];
}

function single(v: HeaderValue): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function create(config: CorsConfig) {
  if (config.origins.length === 0) return { name: 'cors' };
  const any = config.origins.includes('*');
  const allowed = new Set(config.origins);
  const expose = config.exposeHeaders.join(', ');
  const credentials = config.credentials;
  const preflight = Object.freeze({
    'access-control-allow-methods': METHODS,
    'access-control-allow-headers': config.allowHeaders.join(', '),
    'access-control-max-age': String(config.maxAgeSeconds),
    // The answer depends on these too (Fetch standard, "CORS protocol and HTTP caches").
    vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
  });
  const reply = new LocalReply(204, preflight);
  return {
    name: 'cors',
    annotate(ex: Exchange): void {
      const h = ex.responseHeaders;
      h.vary = 'Origin';
      const origin = single(ex.head.headers.origin);
      if (origin === undefined || !(any || allowed.has(origin))) return;
      // With "*" and no credentials the literal `*` is enough; otherwise the origin itself.
      h['access-control-allow-origin'] = any && !credentials ? '*' : origin;
      if (credentials) h['access-control-allow-credentials'] = 'true';
      if (expose !== '') h['access-control-expose-headers'] = expose;
    },
    onRequest(ex: Exchange): RequestDecision {
      const head = ex.head;
      if (head.method !== 'OPTIONS' || ex.responseHeaders['access-control-allow-origin'] === undefined) return undefined;
      if (single(head.headers['access-control-request-method']) === undefined) return undefined;
      // Expose-Headers means nothing on a preflight; the preflight's Vary names join Origin.
      delete ex.responseHeaders['access-control-expose-headers'];
      return reply;
    },
  };
}

export const cors: PolicyModule<CorsConfig, 'cors'> = {
  name: 'cors',
  description: schema.description,
  schema,
  check,
  create,
};
