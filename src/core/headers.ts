/**
 * Which header fields cross the gateway (issue 12, findings 1 and 2). Both directions work by
 * ALLOWLIST: a field reaches the other side only when it is named in the compiled rules, so an
 * upstream's Set-Cookie, Server or `Access-Control-Allow-Origin: *`, and a client's
 * X-HTTP-Method-Override, X-Original-URL or Cookie, never cross unless an operator asks for them.
 *
 * The rules are compiled once, when the config loads (`compileHeaderRules`): per request the work is
 * one pass over the incoming fields with one Set lookup each, no regex and no split unless the
 * message carries a Connection header.
 */
import proxyAddr from 'proxy-addr';
import type { Exchange, HeaderValue, Problem } from './policy.js';

/**
 * Hop-by-hop fields describe one connection and are never forwarded by a proxy, in either
 * direction (RFC 9110 section 7.6.1; `proxy-connection` and `keep-alive` are the pre-standard ones
 * the RFC names too). The fields a Connection header names are removed per message.
 */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'proxy-authenticate', 'proxy-authorization'];

/**
 * Request fields that never reach the upstream, whatever `headers.request.allow` says:
 * - hop-by-hop fields (above) and `expect` (the gateway has read the body already);
 * - `host`: the upstream connection sets its own; the client's goes as X-Forwarded-Host;
 * - `authorization`: only the `auth` policy decides what the upstream gets (upstreamAuthorization),
 *   through `ex.upstreamHeaders`; the client's API key never leaks by a list entry;
 * - `accept-encoding`: deliberately not forwarded (unlike the suggested default), so the
 *   upstream answers in identity encoding and the policies can read the bodies they must check
 *   (list enforcement, error rewriting); the gateway does not decompress;
 * - method-override and URL-rewrite fields: a backend framework that honours them would run another
 *   method or path than the one the policies checked (e.g. a DELETE smuggled in a GET);
 * - forwarding fields: the gateway sets X-Forwarded-For/-Proto/-Host itself from the connection and
 *   passes Forwarded only from a trusted proxy (see `forwardingHeaders`).
 */
const REQUEST_NEVER = new Set([
  ...HOP_BY_HOP,
  'expect',
  'host',
  'authorization',
  'accept-encoding',
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
  'x-original-method',
  'x-original-url',
  'x-original-uri',
  'x-rewrite-url',
  'x-rewrite-uri',
  'x-override-url',
  'x-forwarded-path',
  'x-forwarded-uri',
  'x-forwarded-prefix',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-forwarded-server',
  'x-real-ip',
  'x-client-ip',
  'forwarded',
]);

/**
 * Request fields forwarded by default: content negotiation the pet store answers, the body's
 * framing, and the ids that let the upstream's logs and traces join the gateway's (X-Request-Id,
 * W3C Trace Context). `content-length` is replaced by the length of a body a policy rewrote.
 */
export const DEFAULT_REQUEST_ALLOW = ['accept', 'accept-language', 'content-type', 'content-length', 'user-agent', 'x-request-id', 'traceparent', 'tracestate'] as const;

/**
 * Response fields that never reach the client, whatever `headers.response.allow` says: hop-by-hop
 * fields, and those that speak for the gateway's own origin rather than the upstream's: cookies,
 * software banners, CORS and HSTS policy (an upstream's `Access-Control-Allow-Origin: *` or
 * `Strict-Transport-Security: max-age=0` would override the operator's), proxy chains.
 */
const RESPONSE_NEVER = new Set([
  ...HOP_BY_HOP,
  'set-cookie',
  'set-cookie2',
  'server',
  'via',
  'x-powered-by',
  'x-aspnet-version',
  'x-aspnetmvc-version',
  'x-backend-host',
  'x-backend-server',
  'strict-transport-security',
  'www-authenticate',
  'alt-svc',
]);
/** CORS belongs to the gateway's origin: `access-control-*` never passes (checked at compile time). */
const RESPONSE_NEVER_PREFIX = 'access-control-';

/**
 * Response fields passed by default: what describes the representation and its caching. The
 * framing pair `content-length` and `content-encoding` describe the upstream's bytes, so they pass
 * only with those bytes unchanged (`withoutLength` drops both); an upstream that gzips uninvited
 * keeps its label rather than sending mislabelled bytes.
 */
export const DEFAULT_RESPONSE_ALLOW = [
  'content-type',
  'content-length',
  'content-encoding',
  'cache-control',
  'etag',
  'last-modified',
  'expires',
  'retry-after',
  'vary',
  'content-language',
  // Caching metadata (RFC 9111 section 5.1, RFC 9211): the response cache layer sets both.
  'age',
  'cache-status',
] as const;

/** A header field name (RFC 9110 section 5.1: a token). */
export const FIELD_NAME_PATTERN = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

export interface HeadersConfig {
  readonly request: { readonly allow: readonly string[] };
  readonly response: { readonly allow: readonly string[] };
}

/** The header rules, compiled once from the config. */
export interface HeaderRules {
  /** Request fields forwarded: the defaults plus `headers.request.allow`, less REQUEST_NEVER. */
  readonly requestAllow: ReadonlySet<string>;
  /** Response fields passed: the defaults plus `headers.response.allow`, less RESPONSE_NEVER. */
  readonly responseAllow: ReadonlySet<string>;
  /** Whether the peer at this address is a trusted proxy (`server.trustedProxies`). */
  readonly trusted: (address: string) => boolean;
}

/** The parts of a policy file the header rules read (a PolicyConfig satisfies it). */
export interface HeaderRulesConfig {
  readonly headers: HeadersConfig;
  readonly server: { readonly trustedProxies: readonly string[] };
}

function neverPasses(name: string): boolean {
  return RESPONSE_NEVER.has(name) || name.startsWith(RESPONSE_NEVER_PREFIX);
}

/**
 * The problems of the `headers` section and of `server.trustedProxies` that a JSON Schema cannot
 * say: a field the gateway never forwards, and an address or CIDR that proxy-addr refuses. Never
 * throws; `parsePolicy` reports them with the schema's problems.
 */
export function checkHeaderRules(config: Partial<{ headers: unknown; server: unknown }>): Problem[] {
  const problems: Problem[] = [];
  const headers = config.headers as Partial<HeadersConfig> | undefined;
  const lists: [string, unknown, (n: string) => boolean, string][] = [
    ['$.headers.request.allow', headers?.request?.allow, (n) => REQUEST_NEVER.has(n), 'is never forwarded to the upstream (hop-by-hop, method override, URL rewrite, forwarding or credential field; see the README)'],
    ['$.headers.response.allow', headers?.response?.allow, neverPasses, 'never reaches the client (hop-by-hop, cookie, banner, CORS or HSTS field; see the README)'],
  ];
  for (const [path, list, never, why] of lists) {
    if (!Array.isArray(list)) continue;
    list.forEach((name, i) => {
      if (typeof name === 'string' && never(name.toLowerCase())) problems.push({ path: `${path}[${i}]`, message: `'${name}' ${why}` });
    });
  }
  const proxies = (config.server as { trustedProxies?: unknown } | undefined)?.trustedProxies;
  if (Array.isArray(proxies)) {
    proxies.forEach((entry, i) => {
      if (typeof entry !== 'string') return;
      try {
        proxyAddr.compile(entry);
      } catch {
        problems.push({ path: `$.server.trustedProxies[${i}]`, message: `'${entry.slice(0, 64)}' is not an IP address or CIDR range (e.g. 10.0.0.0/8, ::1, loopback)` });
      }
    });
  }
  return problems;
}

/**
 * Compiles the rules once, at config load. Throws (proxy-addr's TypeError) only on a trusted proxy
 * that `checkHeaderRules` would have reported: a validated config never throws here.
 *
 * @example
 *   const rules = compileHeaderRules(config); // once
 *   const up = upstreamRequestHeaders(rules, req.headers, ex, { remoteAddress, tls, host });
 */
export function compileHeaderRules(config: HeaderRulesConfig): HeaderRules {
  const requestAllow = new Set<string>();
  for (const name of [...DEFAULT_REQUEST_ALLOW, ...config.headers.request.allow]) {
    const n = name.toLowerCase();
    if (!REQUEST_NEVER.has(n)) requestAllow.add(n);
  }
  const responseAllow = new Set<string>();
  for (const name of [...DEFAULT_RESPONSE_ALLOW, ...config.headers.response.allow]) {
    const n = name.toLowerCase();
    if (!neverPasses(n)) responseAllow.add(n);
  }
  const proxies = config.server.trustedProxies;
  // proxy-addr's trust function, compiled once; an empty list trusts no one (no call per request).
  const trust = proxies.length === 0 ? undefined : proxyAddr.compile([...proxies]);
  return {
    requestAllow,
    responseAllow,
    trusted: trust === undefined ? () => false : (address) => trust(address, 0),
  };
}

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
    if (n !== '') named.add(n);
  }
  return named;
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
  forwardingHeaders(rules, incoming, conn, out);
  return out;
}

function forwardingHeaders(
  rules: HeaderRules,
  incoming: Readonly<Record<string, HeaderValue | number | undefined>>,
  conn: ConnectionInfo,
  out: OutHeaders,
): void {
  const peer = conn.remoteAddress;
  const trusted = peer !== undefined && rules.trusted(peer);
  const priorFor = trusted ? joined(incoming['x-forwarded-for']) : undefined;
  if (peer !== undefined) out['x-forwarded-for'] = priorFor === undefined ? peer : `${priorFor}, ${peer}`;
  else if (priorFor !== undefined) out['x-forwarded-for'] = priorFor;
  out['x-forwarded-proto'] = (trusted ? joined(incoming['x-forwarded-proto']) : undefined) ?? (conn.tls ? 'https' : 'http');
  const host = (trusted ? joined(incoming['x-forwarded-host']) : undefined) ?? conn.host;
  if (host !== undefined && host !== '') out['x-forwarded-host'] = host;
  if (trusted) {
    const forwarded = joined(incoming.forwarded);
    if (forwarded !== undefined) out.forwarded = forwarded;
  }
}

/**
 * The headers the client gets for an upstream response, as a new object: the upstream's fields
 * named in `rules.responseAllow` (less those its Connection header names), then the exchange's own
 * (`ex.responseHeaders`, e.g. Deprecation) set over them. `withoutLength` is for a body the
 * gateway rewrote: the upstream's content-length and content-encoding describe other bytes, so
 * both are left out and the front frames the new body.
 */
export function clientResponseHeaders(
  rules: HeaderRules,
  upstreamHeaders: Readonly<Record<string, HeaderValue | number | undefined>>,
  ex: Exchange,
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
  for (const name in ex.responseHeaders) out[name] = ex.responseHeaders[name];
  return out;
}

/** More response header fields than any pet store answer needs: a flood is a 502, not forwarded. */
export const MAX_UPSTREAM_HEADERS = 100;

export function tooManyHeaders(headers: Record<string, unknown>): boolean {
  let n = 0;
  for (const _ in headers) if (++n > MAX_UPSTREAM_HEADERS) return true;
  return false;
}
