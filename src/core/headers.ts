/**
 * Which header fields cross the gateway. Both directions work by
 * ALLOWLIST: a field reaches the other side only when it is named in the compiled rules, so an
 * upstream's Set-Cookie, Server or `Access-Control-Allow-Origin: *`, and a client's
 * X-HTTP-Method-Override, X-Original-URL or Cookie, never cross unless an operator asks for them.
 *
 * This module applies the rules to each message. The rules are compiled once, when the config
 * loads (`compileHeaderRules`, header-rules.ts): per request the work is one pass over the incoming
 * fields with one Set lookup each, no regex and no split unless the message carries a Connection
 * header. The single field values it reads or rewrites (Host, Cache-Control, Vary) are
 * header-values.ts.
 */
import type { Exchange, HeaderValue } from './policy.js';
import { CONNECTION_PROTECTED, type HeaderRules } from './header-rules.js';
import { isValidHost, mergeVary, privateCacheControl } from './header-values.js';

// The header vocabulary in one import: the exchange, the policies and the config loader take the
// rules and the field values from here.
export {
  checkHeaderRules,
  compileHeaderRules,
  CONNECTION_PROTECTED,
  DEFAULT_REQUEST_ALLOW,
  DEFAULT_RESPONSE_ALLOW,
  FIELD_NAME_PATTERN,
  HEADERS_SCHEMA,
  type HeaderRules,
  type HeaderRulesConfig,
  type HeadersConfig,
} from './header-rules.js';
export { acceptsCoding, contentCoding, hostFieldCount, isValidHost, MAX_UPSTREAM_HEADERS, mergeVary, privateCacheControl, tooManyHeaders } from './header-values.js';

/** The names a Connection header lists, lower-case (RFC 9110 section 7.6.1); undefined when absent. */
function connectionNamed(value: HeaderValue | number | undefined): Set<string> | undefined {
  if (value === undefined || typeof value === 'number') return undefined;
  // Nearly every request says only `keep-alive` or `close`: options that name no other field
  // (both are hop-by-hop and never pass anyway), so no Set is built for them.
  if (typeof value === 'string') {
    const v = value.length === 10 || value.length === 5 ? value.toLowerCase() : '';
    if (v === 'keep-alive' || v === 'close') return undefined;
  }
  const named = new Set<string>();
  for (const part of (Array.isArray(value) ? value.join(',') : value).split(',')) {
    const n = part.trim().toLowerCase();
    if (n !== '' && !CONNECTION_PROTECTED.has(n)) named.add(n);
  }
  return named.size === 0 ? undefined : named;
}

/** What the gateway knows of the client connection, for the X-Forwarded-* fields. */
export interface ConnectionInfo {
  /** The peer address of the socket (not a forwarded one); undefined when unknown. */
  readonly remoteAddress: string | undefined;
  /** Whether the client connection is TLS. */
  readonly tls: boolean;
  /** The request's Host (HTTP/1.1) or :authority (HTTP/2), as the client sent it. */
  readonly host: string | undefined;
}

type OutHeaders = Record<string, HeaderValue | number>;

function joined(value: HeaderValue | number | undefined): string | undefined {
  if (value === undefined) return undefined;
  const s = Array.isArray(value) ? value.join(', ') : String(value);
  return s.trim() === '' ? undefined : s;
}

/**
 * The request headers the upstream receives, as a new object (the input is never changed):
 *
 * 1. the client's fields named in `rules.requestAllow`, less those its Connection header names;
 * 2. the policies' changes (`ex.upstreamHeaders`; `null` removes the field), e.g. the `auth`
 *    policy's Authorization. A policy may set any field: it is code, not client input;
 * 3. `content-length` made true to a body a policy rewrote (`ex.upstreamBody`);
 * 4. X-Forwarded-For / -Proto / -Host from the connection. From a peer in
 *    `server.trustedProxies` the client's X-Forwarded-For is kept and the peer appended, its
 *    X-Forwarded-Proto/-Host and Forwarded kept; from any other peer they are replaced (For, Proto,
 *    Host) or dropped (Forwarded): a client cannot choose the address an upstream sees.
 */
export function upstreamRequestHeaders(
  rules: HeaderRules,
  incoming: Readonly<Record<string, HeaderValue | number | undefined>>,
  ex: Exchange,
  conn: ConnectionInfo,
): Record<string, HeaderValue | number> {
  const changes = ex.upstreamHeaders;
  const allow = rules.requestAllow;
  const named = incoming.connection === undefined ? undefined : connectionNamed(incoming.connection);
  const out: OutHeaders = {};
  for (const name in incoming) {
    const value = incoming[name];
    if (value === undefined || !allow.has(name) || named?.has(name) === true || Object.hasOwn(changes, name)) continue;
    out[name] = value;
  }
  for (const name in changes) {
    const value = changes[name];
    if (value !== null && value !== undefined) out[name] = value;
  }
  if (ex.upstreamBody !== undefined && out['content-length'] !== undefined) out['content-length'] = String(ex.upstreamBody.length);
  const trusted = forwardingHeaders(rules, incoming, conn, out);
  if (!trusted) unsampled(out);
  return out;
}

/**
 * W3C Trace Context: the sampled flag (trace-flags bit 0) asks every system downstream to record
 * the trace, so a client that sets it on every request makes the upstream's tracing store
 * everything. It is honoured only from a trusted proxy; from anyone else the
 * ids are kept (logs still join) and the flags cleared, as for a trace the gateway starts.
 */
function unsampled(out: OutHeaders): void {
  const tp = out.traceparent;
  if (typeof tp !== 'string' || tp.length !== 55 || (Number.parseInt(tp.slice(53), 16) & 1) === 0) return;
  out.traceparent = `${tp.slice(0, 53)}00`;
}

/** Sets the X-Forwarded-* fields; returns whether the peer is a trusted proxy. */
function forwardingHeaders(
  rules: HeaderRules,
  incoming: Readonly<Record<string, HeaderValue | number | undefined>>,
  conn: ConnectionInfo,
  out: OutHeaders,
): boolean {
  const peer = conn.remoteAddress;
  const trusted = peer !== undefined && rules.trusted(peer);
  const priorFor = trusted ? joined(incoming['x-forwarded-for']) : undefined;
  if (peer !== undefined) out['x-forwarded-for'] = priorFor === undefined ? peer : `${priorFor}, ${peer}`;
  else if (priorFor !== undefined) out['x-forwarded-for'] = priorFor;
  out['x-forwarded-proto'] = (trusted ? joined(incoming['x-forwarded-proto']) : undefined) ?? (conn.tls ? 'https' : 'http');
  // Only a Host of valid syntax is ever passed on (RFC 9110 section 7.2), a proxy's included.
  const prior = trusted ? joined(incoming['x-forwarded-host']) : undefined;
  const host = prior !== undefined && isValidHost(prior) ? prior : conn.host;
  if (host !== undefined && host !== '' && isValidHost(host)) out['x-forwarded-host'] = host;
  if (trusted) {
    const forwarded = joined(incoming.forwarded);
    if (forwarded !== undefined) out.forwarded = forwarded;
  }
  return trusted;
}

/** What of the exchange the client's headers depend on. */
export interface ClientView {
  /** Headers every response of the exchange carries. */
  readonly responseHeaders: Readonly<Record<string, string>>;
  /** Who made the request, when a policy identified them (src/core/facts.ts, `Declarations`). */
  readonly consumerId: string | undefined;
}

/**
 * The headers the client gets for an upstream response, as a new object: the upstream's fields
 * named in `rules.responseAllow` (less those its Connection header names), then the exchange's own
 * (`ex.responseHeaders`, e.g. Deprecation) set over them, Vary merged with the upstream's. `withoutLength` is for a body the
 * gateway rewrote: the upstream's content-length and content-encoding describe other bytes, so
 * both are left out and the front frames the new body.
 */
export function clientResponseHeaders(
  rules: HeaderRules,
  upstreamHeaders: Readonly<Record<string, HeaderValue | number | undefined>>,
  ex: ClientView,
  withoutLength = false,
): Record<string, HeaderValue | number> {
  const allow = rules.responseAllow;
  const named = upstreamHeaders.connection === undefined ? undefined : connectionNamed(upstreamHeaders.connection);
  const out: OutHeaders = {};
  for (const name in upstreamHeaders) {
    const value = upstreamHeaders[name];
    if (value === undefined || !allow.has(name) || named?.has(name) === true) continue;
    if (withoutLength && (name === 'content-length' || name === 'content-encoding')) continue;
    out[name] = value;
  }
  // Every answer of an operation is to an authenticated request (auth runs first); RFC 9111
  // section 3.5: a shared cache must not reuse it for another consumer.
  if (ex.consumerId !== undefined && out['cache-control'] !== undefined) out['cache-control'] = privateCacheControl(out['cache-control']);
  const own = ex.responseHeaders;
  for (const name in own) out[name] = name === 'vary' && out.vary !== undefined ? mergeVary(out.vary, own.vary) : own[name];
  return out;
}
