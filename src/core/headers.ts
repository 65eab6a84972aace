/**
 * Which header fields cross the gateway. Both directions work by
 * ALLOWLIST: a field reaches the other side only when it is named in the compiled rules, so an
 * upstream's Set-Cookie, Server or `Access-Control-Allow-Origin: *`, and a client's
 * X-HTTP-Method-Override, X-Original-URL or Cookie, never cross unless an operator asks for them.
 *
 * The rules are compiled once, when the config loads (`compileHeaderRules`): per request the work is
 * one pass over the incoming fields with one Set lookup each, no regex and no split unless the
 * message carries a Connection header.
 */
import { isIPv6 } from 'node:net';
import proxyAddr from 'proxy-addr';
import type { SchemaType } from './options.js';
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

const FIELD_NAMES = (description: string) =>
  ({
    type: 'array',
    default: [],
    maxItems: 256,
    items: { type: 'string', pattern: FIELD_NAME_PATTERN, maxLength: 128, description: 'A header field name (RFC 9110 token), any case.' },
    description,
  }) as const;

export const HEADERS_SCHEMA = {
  type: 'object',
  description: 'Which header fields cross the gateway: both directions by allowlist.',
  additionalProperties: false,
  default: {},
  properties: {
    request: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        allow: FIELD_NAMES(
          `Client request fields forwarded to the upstream, ADDED to the defaults (${DEFAULT_REQUEST_ALLOW.join(', ')}). Hop-by-hop, method-override, URL-rewrite, forwarding fields, Host, Authorization and Accept-Encoding are never forwarded.`,
        ),
      },
    },
    response: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        allow: FIELD_NAMES(
          `Upstream response fields passed to the client, ADDED to the defaults (${DEFAULT_RESPONSE_ALLOW.join(', ')}). Hop-by-hop fields, Set-Cookie, Server, Via, X-Powered-By, X-AspNet-Version, Access-Control-*, Strict-Transport-Security and WWW-Authenticate never pass.`,
        ),
      },
    },
  },
} as const;

/** The `headers:` section of a policy file, defaults filled. */
export type HeadersConfig = SchemaType<typeof HEADERS_SCHEMA>;

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
    ['$.headers.request.allow', headers?.request?.allow, (n) => REQUEST_NEVER.has(n), 'is never forwarded to the upstream (hop-by-hop, method override, URL rewrite, forwarding or credential field; see docs/security.md)'],
    ['$.headers.response.allow', headers?.response?.allow, neverPasses, 'never reaches the client (hop-by-hop, cookie, banner, CORS or HSTS field; see docs/security.md)'],
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

/**
 * Fields a Connection header can never remove: those the gateway checked or
 * sets itself. RFC 9110 section 7.6.1 lets a sender name any field as hop-by-hop, so
 * `Connection: content-type` would otherwise strip the Content-Type the gateway checked before the
 * upstream parses the body, and an upstream's `Connection: content-type, cache-control` would
 * strip what the client must see. A field named here stays; a real hop-by-hop field is dropped anyway.
 */
export const CONNECTION_PROTECTED: ReadonlySet<string> = new Set([
  'content-type',
  'content-length',
  'content-encoding',
  'cache-control',
  'accept',
  'authorization',
  'x-request-id',
  'traceparent',
  'tracestate',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'forwarded',
]);

/**
 * Host (RFC 9110 section 7.2: uri-host [":" port], RFC 3986 section 3.2.2): an IP literal in
 * brackets, or a reg-name of unreserved characters, sub-delims and %-escapes (an IPv4 address is
 * one), then an optional port of digits. Empty is allowed (a target without authority).
 */
const HOST = /^(?:\[[0-9A-Fa-f:.]{2,45}\]|(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2}){0,253})(?::[0-9]{0,5})?$/;

/**
 * The last Host value found valid: nearly every request names the same host, and comparing two
 * short strings costs less than running the pattern again (bench/instr.mjs counts the pattern at
 * about 1,000 instructions per request). Only a valid value is kept, so a match is valid.
 */
let lastValidHost = '';

/**
 * Whether a Host header value is valid (RFC 9110 section 7.2). A repeated Host (an array) is not:
 * RFC 9112 section 3.2 requires a 400 for more than one Host line or an invalid value.
 */
export function isValidHost(value: string | string[] | undefined): boolean {
  if (value === undefined || value === lastValidHost) return true;
  if (typeof value !== 'string') return false;
  if (!HOST.test(value)) return false;
  if (value.charCodeAt(0) === 91) {
    // An IP literal: the bracketed part must be an IPv6 address (IPvFuture is not used on the web).
    const end = value.indexOf(']');
    if (!isIPv6(value.slice(1, end))) return false;
  }
  lastValidHost = value;
  return true;
}

/**
 * How many Host fields a request carried (RFC 9112 section 3.2: more than one is a 400). node keeps
 * only the first in `req.headers`, so the raw list is counted: one comparison of length per field,
 * a lower-casing only for the 4-letter names.
 */
export function hostFieldCount(rawHeaders: readonly string[]): number {
  let hosts = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!; // i < rawHeaders.length: noUncheckedIndexedAccess cannot follow the loop's bound
    if (name.length === 4 && name.toLowerCase() === 'host') hosts++;
  }
  return hosts;
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

/**
 * RFC 9111 section 3.5: a shared cache may store an answer to a request with Authorization only
 * when the answer says `public`, `s-maxage` or `must-revalidate`. An upstream that says so for one
 * consumer's answer would let a CDN serve it to another, so on an authenticated answer `public`
 * and `s-maxage` are removed and `private` added when any of the three is present; every other
 * directive (max-age, no-store, must-revalidate...) is kept.
 */
export function privateCacheControl(value: HeaderValue | number | undefined): HeaderValue | number | undefined {
  if (value === undefined || typeof value === 'number') return value;
  const kept: string[] = [];
  let invited = false;
  let isPrivate = false;
  for (const part of (Array.isArray(value) ? value.join(',') : value).split(',')) {
    const d = part.trim();
    const eq = d.indexOf('=');
    const name = (eq === -1 ? d : d.slice(0, eq)).trim().toLowerCase();
    if (name === '') continue;
    if (name === 'public' || name === 's-maxage') {
      invited = true;
      continue;
    }
    if (name === 'must-revalidate') invited = true;
    // `private="field"` (RFC 9111 section 5.2.2.7) still lets a shared cache store the rest.
    if (name === 'private' && eq === -1) isPrivate = true;
    kept.push(d);
  }
  if (!invited) return value;
  return isPrivate ? kept.join(', ') : ['private', ...kept].join(', ');
}

/** What of the exchange the client's headers depend on. */
export interface ClientView {
  /** Headers every response of the exchange carries. */
  readonly responseHeaders: Readonly<Record<string, string>>;
  /** Who made the request, when a policy identified them (src/core/facts.ts, `Declarations`). */
  readonly consumerId: string | undefined;
}

/**
 * Two Vary field values as one (RFC 9110 section 12.5.5): Vary is a list, so the gateway's own
 * `Origin` (CORS) is added to what the upstream said instead of replacing it, which would let a
 * shared cache hand an answer negotiated on another field (Accept-Encoding, say) to every client.
 * Names compare case-insensitively and appear once, the first spelling kept; `*` (the answer
 * varies on more than request fields) absorbs every name.
 */
export function mergeVary(first: HeaderValue | number | undefined, second: HeaderValue | number | undefined): string {
  const names: string[] = [];
  const seen = new Set<string>();
  for (const value of [first, second]) {
    if (value === undefined) continue;
    for (const part of (Array.isArray(value) ? value.join(',') : String(value)).split(',')) {
      const name = part.trim();
      if (name === '') continue;
      if (name === '*') return '*';
      const lower = name.toLowerCase();
      if (seen.has(lower)) continue;
      seen.add(lower);
      names.push(name);
    }
  }
  return names.join(', ');
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

/**
 * The content coding of an upstream answer (RFC 9110 section 8.4), lower-case; undefined for none
 * or `identity`. Several codings (`gzip, br`) are returned as written.
 */
export function contentCoding(value: HeaderValue | number | undefined): string | undefined {
  if (value === undefined || typeof value === 'number') return undefined;
  const text = (Array.isArray(value) ? value.join(',') : value).trim().toLowerCase();
  return text === '' || text === 'identity' ? undefined : text;
}

/**
 * Whether the client's Accept-Encoding (RFC 9110 section 12.5.3) accepts `coding`: named, or `*`,
 * with a q above 0. No Accept-Encoding accepts nothing here: RFC 9110 would allow any coding, but
 * a client that did not ask (curl without --compressed, most API clients) shows the bytes as they
 * come, so the gateway only passes a coding a client asked for.
 */
export function acceptsCoding(accept: HeaderValue | undefined, coding: string): boolean {
  if (accept === undefined) return false;
  let star: boolean | undefined;
  for (const part of (Array.isArray(accept) ? accept.join(',') : accept).split(',')) {
    const [name = '', ...params] = part.split(';').map((x) => x.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    const ok = q === undefined || Number(q.slice(2)) > 0;
    if (name === coding) return ok;
    if (name === '*') star = ok;
  }
  return star === true;
}

/** More response header fields than any pet store answer needs: a flood is a 502, not forwarded. */
export const MAX_UPSTREAM_HEADERS = 100;

export function tooManyHeaders(headers: Record<string, unknown>): boolean {
  let n = 0;
  for (const _ in headers) if (++n > MAX_UPSTREAM_HEADERS) return true;
  return false;
}
