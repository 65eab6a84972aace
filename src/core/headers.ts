/**
 * Which upstream response headers reach the client. Hop-by-hop fields describe one connection and
 * are never forwarded by a proxy (RFC 9110 section 7.6.1), nor are the fields the Connection header
 * names; `server` and `x-powered-by` tell a client about upstream internals and are dropped too.
 * Then the exchange's own headers (e.g. deprecation) are set over whatever the upstream sent.
 */
import type { Exchange, HeaderValue } from './policy.js';

const DROPPED = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'server', 'x-powered-by']);

type Headers = Record<string, HeaderValue | number>;

/**
 * The headers the client gets for an upstream response: a new object (copying beats deleting on
 * the hot path). `withoutLength` leaves out content-length, for a body the gateway rewrote.
 */
export function clientResponseHeaders(headers: Readonly<Headers>, ex: Exchange, withoutLength = false): Headers {
  const connection = headers.connection;
  const named = typeof connection === 'string' ? connection.toLowerCase().split(',').map((n) => n.trim()) : undefined;
  const out: Headers = {};
  for (const name in headers) {
    if (DROPPED.has(name) || (withoutLength && name === 'content-length') || named?.includes(name) === true) continue;
    out[name] = headers[name];
  }
  for (const name in ex.responseHeaders) out[name] = ex.responseHeaders[name];
  return out;
}

/**
 * Request headers the upstream never receives: hop-by-hop fields (RFC 9110 section 7.6.1), `expect`
 * (the gateway has read the body already), `proxy-authorization` (meant for a proxy, not the
 * upstream), and `accept-encoding`, so that the upstream answers in identity encoding and a policy
 * can read the body it must check (list enforcement, error rewriting).
 */
const NOT_FORWARDED = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'expect', 'proxy-authorization', 'accept-encoding']);

/**
 * The request headers the upstream receives, as a new object: the client's, less NOT_FORWARDED and
 * `omit` (what the adapter sets itself, e.g. `host`, `content-length`), with the policies' changes
 * applied (a `null` removes the field).
 */
export function upstreamRequestHeaders(
  headers: Readonly<Record<string, HeaderValue | number | undefined>>,
  ex: Exchange,
  omit?: ReadonlySet<string>,
): Record<string, HeaderValue | number> {
  const changes = ex.upstreamHeaders;
  const out: Record<string, HeaderValue | number> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || NOT_FORWARDED.has(name) || omit?.has(name) === true || Object.hasOwn(changes, name)) continue;
    out[name] = value;
  }
  for (const name in changes) {
    const value = changes[name];
    if (value !== null && value !== undefined) out[name] = value;
  }
  return out;
}

/** More response header fields than any pet store answer needs: a flood is a 502, not forwarded. */
export const MAX_UPSTREAM_HEADERS = 100;

export function tooManyHeaders(headers: Record<string, unknown>): boolean {
  let n = 0;
  for (const _ in headers) if (++n > MAX_UPSTREAM_HEADERS) return true;
  return false;
}
