/**
 * Which upstream response headers reach the client. Hop-by-hop fields describe one connection and
 * are never forwarded by a proxy (RFC 9110 section 7.6.1), nor are the fields the Connection header
 * names; `server` and `x-powered-by` tell a client about upstream internals and are dropped too.
 * Then the exchange's own headers (e.g. deprecation) are set over whatever the upstream sent.
 */
import type { Exchange, HeaderValue } from './policy.js';

const DROPPED = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'server', 'x-powered-by']);

/** Rewrites a response header object in place for the client, and returns it. */
export function clientResponseHeaders<H extends Record<string, HeaderValue | number>>(headers: H, ex: Exchange): H {
  const connection = headers.connection;
  if (typeof connection === 'string') {
    for (const name of connection.split(',')) delete headers[name.trim().toLowerCase()];
  }
  for (const name of Object.keys(headers)) if (DROPPED.has(name)) delete headers[name];
  return Object.assign(headers, ex.responseHeaders);
}

/**
 * The request headers the upstream receives: the client's, with the policies' changes applied.
 * `accept-encoding` is always removed so that the upstream answers in identity encoding and a
 * policy can read the body it must check (list enforcement, error rewriting).
 */
export function upstreamRequestHeaders<H extends Record<string, HeaderValue | number>>(headers: H, ex: Exchange): H {
  delete headers['accept-encoding'];
  for (const [name, value] of Object.entries(ex.upstreamHeaders)) {
    if (value === null) delete headers[name];
    else (headers as Record<string, HeaderValue | number>)[name] = value;
  }
  return headers;
}
