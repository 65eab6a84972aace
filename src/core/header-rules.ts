/**
 * Which header fields may cross the gateway, both ways, by ALLOWLIST: the fields never forwarded
 * whatever the operator says, the defaults, the `headers:` section's schema and type, and the
 * rules compiled from them once, when the config loads (`compileHeaderRules`). Applying them to a
 * message is headers.ts.
 */
import proxyAddr from 'proxy-addr';
import type { SchemaType } from './options.js';
import type { Problem } from './policy.js';

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
  // Age and Cache-Status (RFC 9111 section 5.1, RFC 9211): an HTTP cache's account of an answer,
  // the upstream's or a wrapper of send's (`SendWrapper.trailing`, `account`).
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
