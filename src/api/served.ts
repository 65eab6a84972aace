/**
 * The document clients see: the interface document (openapi/pet-store.yaml, or the operator's) as
 * clients get it through the gateway. The interface says what the upstream's operations are; the
 * gateway adds answers of its own to every operation (docs/errors.md), headers (RateLimit,
 * Deprecation, WWW-Authenticate...) and the bearer scheme, and serves no `x-` extension (its own
 * are internal; an operator's may carry internals). `servedDocument` writes that down, from the document and what the policy switched on
 * (`ServedOptions`): every status and header it lists is one the gateway can send, and every status
 * the gateway sends on an operation is listed (the upstream's other error statuses, which the
 * gateway relays in the Error shape, under `default`). Served on the admin port as /openapi.json and
 * printed by `petstore-gateway openapi` (docs/operations.md, docs/cli.md).
 *
 * What OpenAPI cannot say per operation is said in `info.description`: a path the document does not
 * list is 404, a method it does not list on a listed path 405 with Allow, and (with CORS) a
 * preflight OPTIONS is answered 204.
 */
import { CATALOGUE, type ErrorCode } from '../core/errors.js';
import { readShippedDocument } from './document.js';

/** The extensions the gateway compiles (src/api/model.ts): internal, never served. */
export const GATEWAY_EXTENSIONS: readonly string[] = Object.freeze(['x-list-limit', 'x-list-filter', 'x-error-code', 'x-sunset', 'x-successor', 'x-successor-description']);

/** What the policy in force changes in the served document (src/cli/openapi.ts reads it from a config). */
export interface ServedOptions {
  /**
   * Where clients reach the gateway's API listener, as OpenAPI Server Objects whose `url` is an
   * origin (`http://127.0.0.1:8080`, or with `{host}` variables); the base path is appended. The
   * base path alone (relative: whatever address reaches the gateway, a load balancer's) is always
   * listed after them.
   */
  readonly origins: ReadonlyArray<{ readonly url: string; readonly description?: string; readonly variables?: Readonly<Record<string, { readonly default: string; readonly description?: string }>> }>;
  /** `rate-limit` limits some consumer: RateLimit-Policy and RateLimit on its answers, 429 rate_limited. */
  readonly rateLimit: boolean;
  /** `rate-limit.onStoreError: closed` with a limit: 503 when the store is down. */
  readonly rateLimitStoreClosed: boolean;
  /** `auth.bruteForce` is on: 429 too_many_auth_failures. */
  readonly authFailureLock: boolean;
  /** Some key may call only some operations (`auth.keys[].operations`, or a key registry): 403 forbidden. */
  readonly scopedKeys: boolean;
  /** `server.maxInFlightPerConsumer` is set: 429 too_many_in_flight. */
  readonly consumerBound: boolean;
  /** The `cors` policy has origins: the Access-Control-* fields on answers to an allowed origin. */
  readonly cors: boolean;
  /** The response cache is on: Cache-Status and Age. */
  readonly cache: boolean;
  /** The largest request body (`new-pet.maxBytes`), for the 413's description. */
  readonly maxBodyBytes: number;
  /** The Deprecation, Sunset and Link values the gateway sends on each deprecated operation, by operationId (`deprecation`). */
  readonly deprecation: { readonly headers: Readonly<Record<string, Readonly<Partial<Record<'deprecation' | 'sunset' | 'link', string>>>>>; readonly removal: boolean };
}

/** The shipped interface document (openapi/pet-store.yaml), as read: JSON-compatible. */
export const shippedDocument = readShippedDocument;

type Json = Record<string, unknown>;
type Header = { readonly description: string; readonly required: boolean; readonly schema: Json };

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Keys whose value is a map of names (a property, a header, a component may be named `x-...`): kept. */
const NAME_MAPS = new Set(['paths', 'properties', 'patternProperties', '$defs', 'headers', 'content', 'responses', 'schemas', 'parameters', 'securitySchemes', 'requestBodies', 'examples', 'links', 'callbacks', 'variables', 'mapping', 'encoding', 'pathItems']);
/** Keys whose value is data, copied as it is. */
const DATA = new Set(['example', 'default', 'enum', 'const', 'value']);

/**
 * A copy without any `x-` extension, at any depth: the gateway's own (internal) and the operator's
 * (an extension may carry what a client must not see, such as another gateway's integration or a
 * credential). Names (of properties, headers, components) and data (examples, enums) are kept.
 */
function withoutGatewayExtensions(value: unknown, names = false): unknown {
  if (Array.isArray(value)) return value.map((v) => withoutGatewayExtensions(v));
  if (!isObject(value)) return value;
  const out: Json = {};
  for (const [k, v] of Object.entries(value)) {
    if (names) out[k] = withoutGatewayExtensions(v);
    else if (DATA.has(k)) out[k] = v;
    else if (!k.startsWith('x-')) out[k] = withoutGatewayExtensions(v, NAME_MAPS.has(k));
  }
  return out;
}

/** The object a local `$ref` (`#/components/...`) names, or the value itself. */
function deref(doc: Json, value: unknown): unknown {
  if (!isObject(value) || typeof value.$ref !== 'string' || !value.$ref.startsWith('#/')) return value;
  let at: unknown = doc;
  for (const part of value.$ref.slice(2).split('/')) at = isObject(at) ? at[part.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
  return at === undefined ? value : deref(doc, at);
}

/** The path prefix of the base address: the first server's path (`/v1`), or '' without one. */
function basePathOf(doc: Json): string {
  const first = Array.isArray(doc.servers) ? (doc.servers[0] as unknown) : undefined;
  const url = isObject(first) && typeof first.url === 'string' ? first.url : '';
  const path = /^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? new URL(url.replace(/\{[^}]*\}/g, 'x')).pathname : url;
  return path.replace(/\/+$/, '');
}

const ERROR_SCHEMA: Json = {
  type: 'object',
  required: ['code', 'message', 'status'],
  properties: {
    code: { type: 'string', description: 'Machine-readable error code.' },
    message: { type: 'string', description: 'Human-readable description.' },
    status: { type: 'integer', description: 'The HTTP status code.' },
  },
};

/** What every operation's answers may carry, and which of them are certain. */
interface HeaderPlan {
  readonly options: ServedOptions;
  /** The deprecation fields of a deprecated operation. */
  readonly deprecated: Readonly<Partial<Record<'deprecation' | 'sunset' | 'link', string>>> | undefined;
}

/**
 * The headers of one answer. `exchange`: the answer always comes out of the gateway's exchange (its
 * request id and the deprecation fields are certain); false for what node's parser or a timeout
 * answers before the request is known (400, 408, 417, 431) and for 500.
 */
function headersOf(plan: HeaderPlan, status: number | 'default', exchange: boolean, extra: Record<string, Header> = {}): Record<string, Header> {
  const o = plan.options;
  const h: Record<string, Header> = {
    'X-Request-Id': { description: "The request's id: the client's X-Request-Id when valid, else a new one (docs/operations.md).", required: exchange, schema: { type: 'string' } },
  };
  // Not on what is answered before the request is known. auth runs before rate-limit, so a key it
  // refuses is never counted; a 401 or 403 of the upstream (upstreamAuthorization: forward) is.
  const counted = status !== 408 && status !== 417 && status !== 431;
  if (o.rateLimit && counted) {
    h['RateLimit-Policy'] = {
      description: "The consumer's quota (draft-ietf-httpapi-ratelimit-headers): `q` requests per window of `w` seconds. On every answer to a limited consumer.",
      required: false,
      schema: { type: 'string', pattern: '^"default";q=[0-9]+;w=[0-9]+$' },
    };
    h.RateLimit = {
      description: 'Requests `r` remaining, and `t` seconds until the whole quota is back (on a 429, until one request is allowed). On every answer to a limited consumer.',
      required: false,
      schema: { type: 'string', pattern: '^"default";r=[0-9]+;t=[0-9]+$' },
    };
  }
  const d = plan.deprecated;
  if (d !== undefined) {
    h.Deprecation = { description: 'This operation is deprecated (RFC 9745): since this moment, as `@` Unix seconds.', required: exchange, schema: { type: 'string', const: d.deprecation } };
    if (d.sunset !== undefined) h.Sunset = { description: 'When this operation is removed (RFC 8594), an HTTP-date.', required: exchange, schema: { type: 'string', const: d.sunset } };
    if (d.link !== undefined) h.Link = { description: 'The successor (`rel="successor-version"`) and documentation links (RFC 8288).', required: exchange, schema: { type: 'string', const: d.link } };
  }
  if (o.cors) {
    h['Access-Control-Allow-Origin'] = { description: 'On answers to an allowed origin (the `cors` policy).', required: false, schema: { type: 'string' } };
    h['Access-Control-Allow-Credentials'] = { description: 'With `cors.credentials`, on answers to an allowed origin.', required: false, schema: { type: 'string', const: 'true' } };
    h['Access-Control-Expose-Headers'] = { description: 'The fields a page may read, on answers to an allowed origin.', required: false, schema: { type: 'string' } };
  }
  if (o.cache && (status === 'default' || status < 400 || status >= 500)) {
    h['Cache-Status'] = { description: 'What the response cache did (RFC 9211).', required: false, schema: { type: 'string' } };
    h.Age = { description: 'Seconds the answer spent in the cache (RFC 9111).', required: false, schema: { type: 'string', pattern: '^[0-9]+$' } };
  }
  return { ...h, ...extra };
}

/** A Markdown list of codes with their default messages. */
function codes(list: readonly ErrorCode[]): string {
  return list.map((c) => `- \`${c}\`: ${CATALOGUE[c].message}`).join('\n');
}

function errorAnswer(description: string, headers: Record<string, Header>): Json {
  return { description, headers, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
}

const RETRY_AFTER = (required: boolean, description: string): Header => ({ description, required, schema: { type: 'string' } });

const WWW_AUTHENTICATE: Header = {
  description: 'The Bearer challenge (RFC 6750 section 3), naming the error when a key was sent.',
  required: true,
  schema: { type: 'string', pattern: '^Bearer realm=' },
};

/** The operation's own description of a status (without its extensions), when the document gives one. */
function ownDescription(doc: Json, op: Json, status: string): string | undefined {
  const responses = isObject(op.responses) ? op.responses : {};
  const r = deref(doc, responses[status]);
  return isObject(r) && typeof r.description === 'string' ? r.description : undefined;
}

/** The served answers of one operation: the document's, with the gateway's headers, and the gateway's own. */
function servedResponses(doc: Json, item: Json, op: Json, options: ServedOptions): Json {
  const plan: HeaderPlan = { options, deprecated: op.deprecated === true ? (options.deprecation.headers[String(op.operationId)] ?? {}) : undefined };
  const hasBody = op.requestBody !== undefined;
  const params = [item.parameters, op.parameters].flatMap((list) => (Array.isArray(list) ? list.map((p) => deref(doc, p)) : []));
  const hasQuery = params.some((p) => isObject(p) && p.in === 'query');
  const own = isObject(op.responses) ? op.responses : {};
  const out: Json = {};

  // The document's answers: its successes as they are, with the headers every answer may carry.
  for (const [status, value] of Object.entries(own)) {
    const r = deref(doc, value);
    if (!isObject(r)) continue;
    const code = Number(status);
    const headers = isObject(r.headers) ? (r.headers as Record<string, Header>) : {};
    // `x-error-code` (internal, not served) is the gateway's code for this answer: said in its description.
    const named = typeof r['x-error-code'] === 'string' && r['x-error-code'] in CATALOGUE ? (r['x-error-code'] as ErrorCode) : undefined;
    const description = named === undefined || typeof r.description !== 'string' ? r.description : `${r.description}\n\n${codes([named])}`;
    out[status] = { ...r, description, headers: { ...headersOf(plan, Number.isInteger(code) ? code : 'default', true), ...headers } };
  }

  const add = (status: number, codeList: readonly ErrorCode[], lead: string, exchange: boolean, extra: Record<string, Header> = {}) => {
    const mine = ownDescription(doc, op, String(status));
    const description = `${mine === undefined ? lead : `${mine} ${lead}`}\n\n${codes(codeList)}`;
    out[String(status)] = errorAnswer(description, headersOf(plan, status, exchange, extra));
  };

  const bad: ErrorCode[] = ['invalid_request'];
  if (hasQuery) bad.unshift('invalid_query');
  if (hasBody) bad.unshift('malformed_json', 'invalid_body');
  add(400, bad, 'The request is refused (or the upstream refused it) before or without any change.', false);
  add(401, ['missing_api_key', 'malformed_authorization', 'invalid_api_key', 'expired_api_key'], 'No valid API key.', true, { 'WWW-Authenticate': WWW_AUTHENTICATE });
  if (options.scopedKeys) add(403, ['forbidden'], 'The API key may not call this operation.', true, { 'WWW-Authenticate': WWW_AUTHENTICATE });
  add(408, ['request_timeout'], 'The request was not received in time; the connection is closed.', false);
  if (plan.deprecated !== undefined && options.deprecation.removal) add(410, ['operation_removed'], 'The operation has been removed (after its sunset, or during a scheduled brownout).', true);
  if (hasBody) {
    add(413, ['payload_too_large'], `The request body is larger than ${options.maxBodyBytes} bytes.`, true);
    add(415, ['unsupported_media_type'], 'The request body is not `application/json` in UTF-8.', true);
  }
  add(417, ['expectation_failed'], 'An `Expect` other than `100-continue`; the connection is closed.', false);
  const tooMany: ErrorCode[] = ['too_many_requests'];
  if (options.rateLimit) tooMany.push('rate_limited');
  if (options.authFailureLock) tooMany.push('too_many_auth_failures');
  if (options.consumerBound) tooMany.push('too_many_in_flight');
  add(429, tooMany, 'Too many requests: retry after the time in Retry-After.', true, {
    'Retry-After': RETRY_AFTER(false, "Seconds to wait before retrying: always on the gateway's own 429s; an upstream's 429 carries the upstream's value, if it sent one."),
  });
  add(431, ['headers_too_large'], 'The request head is too large; the connection is closed.', false);
  add(500, ['internal_error'], 'A fault in the gateway itself.', false);
  add(502, ['bad_gateway', 'upstream_unavailable', 'upstream_contract_violation', 'upstream_error', 'upstream_auth_failed', 'upstream_tls_error'], 'The upstream could not be reached, or answered outside the interface.', true);
  add(503, ['service_unavailable'], `The service is unavailable: the upstream said so, or the circuit breaker is open${options.rateLimitStoreClosed ? ', or the rate-limit store is down' : ''}.`, true, {
    'Retry-After': RETRY_AFTER(false, "Seconds to wait before retrying: from the gateway's circuit breaker or rate-limit store, or the upstream's own value."),
  });
  add(504, ['upstream_timeout'], 'The upstream did not answer in time.', true);
  out.default = errorAnswer(
    `Any other error status of the upstream, relayed in the Error shape (docs/errors.md): e.g. \`upstream_error\` with the upstream's status (a 500, a 418), \`not_found\`, \`conflict\`.\n\n${codes(['upstream_error', 'not_found', 'conflict', 'method_not_allowed'])}`,
    headersOf(plan, 'default', true),
  );
  return out;
}

/** The bearer scheme's name in the document (a `type: http, scheme: bearer` one), or 'bearer'. */
function bearerSchemeName(doc: Json): string {
  const components = isObject(doc.components) ? doc.components : {};
  const schemes = isObject(components.securitySchemes) ? components.securitySchemes : {};
  for (const [name, s] of Object.entries(schemes)) if (isObject(s) && s.type === 'http' && typeof s.scheme === 'string' && s.scheme.toLowerCase() === 'bearer') return name;
  return 'bearer';
}

/**
 * The OpenAPI 3.1 document of what clients get through the gateway, from the interface `document`
 * (as read, JSON-compatible: not changed) and the policy's `gateway` options.
 *
 * @example
 *   const served = servedDocument(shippedDocument(), servedOptionsOf(config)); // src/cli/openapi.ts
 *   process.stdout.write(JSON.stringify(served, null, 2));
 */
export function servedDocument(document: object, gateway: ServedOptions): Json {
  const doc = structuredClone(document) as Json;
  const out = withoutGatewayExtensions(doc) as Json;
  const base = basePathOf(doc);
  out.servers = [
    ...gateway.origins.map((o) => ({ ...o, url: `${o.url.replace(/\/+$/, '')}${base}` })),
    { url: base === '' ? '/' : base, description: 'The base path on the address that reaches the gateway (a load balancer, an ingress).' },
  ];

  const scheme = bearerSchemeName(doc);
  const components = isObject(out.components) ? out.components : {};
  const schemes = isObject(components.securitySchemes) ? components.securitySchemes : {};
  const schemas = isObject(components.schemas) ? components.schemas : {};
  out.components = {
    ...components,
    securitySchemes: {
      ...schemes,
      [scheme]: isObject(schemes[scheme]) ? schemes[scheme] : { type: 'http', scheme: 'bearer', description: 'The API key as a bearer token: `Authorization: Bearer <API_KEY>`.' },
    },
    schemas: { ...schemas, Error: isObject(schemas.Error) ? schemas.Error : ERROR_SCHEMA },
  };
  // The gateway authenticates every operation, the same way.
  out.security = [{ [scheme]: [] }];

  const paths = isObject(doc.paths) ? doc.paths : {};
  const servedPaths: Json = {};
  for (const [path, item] of Object.entries(paths)) {
    if (!isObject(item)) continue;
    const servedItem = { ...(withoutGatewayExtensions(item) as Json) };
    for (const method of HTTP_METHODS) {
      const op = item[method];
      if (!isObject(op)) continue;
      const served = withoutGatewayExtensions(op) as Json;
      delete served.security;
      served.responses = withoutGatewayExtensions(servedResponses(doc, item, op, gateway));
      servedItem[method] = served;
    }
    servedPaths[path] = servedItem;
  }
  out.paths = servedPaths;

  const info = isObject(out.info) ? out.info : {};
  const notes = [
    'Served by petstore-gateway: the interface as clients get it through the gateway, with the answers the gateway adds (errors in the Error shape, docs/errors.md).',
    'A path this document does not list is answered 404 `not_found`; a method it does not list on a listed path, 405 `method_not_allowed` with `Allow`, after authentication (401 first).',
    ...(gateway.cors ? ['A CORS preflight (OPTIONS with Origin and Access-Control-Request-Method) from an allowed origin is answered 204 before authentication.'] : []),
  ];
  out.info = { ...info, description: [typeof info.description === 'string' ? info.description : '', ...notes].filter((s) => s !== '').join('\n\n') };
  return out;
}
