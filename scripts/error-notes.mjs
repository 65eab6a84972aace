/**
 * When each catalogue code is sent, for docs/errors.md (scripts/gen-docs.mjs). The code, its
 * status and its default message come from CATALOGUE in src/core/errors.ts; this file only adds
 * the circumstances, which the catalogue does not hold. A code added to CATALOGUE needs a line
 * here: the docs test fails until it has one.
 */
export const ERROR_NOTES = {
  malformed_json:
    'createPet body empty, not JSON, not UTF-8, starting with a byte order mark, or with a name repeated with another value',
  invalid_body: 'createPet body is not a NewPet (every violation listed); an upstream 400 on createPet',
  invalid_request:
    'a request the gateway cannot parse (framing, `Content-Length`, URL encoding), an HTTP/1.1 request without `Host` or with two; an upstream 400 on listPets',
  invalid_query:
    "listPets `limit` or `status` out of bounds, not an integer, or repeated; an unknown parameter with `unknownParams: reject`",
  missing_api_key: 'no `Authorization` header',
  malformed_authorization: 'not `Bearer <token>` with an RFC 6750 token',
  invalid_api_key: 'a well-formed key that is not configured (with `upstreamAuthorization: forward`, also an upstream 401)',
  expired_api_key: "the key's `expires` has passed",
  forbidden: 'the key may not call this operation (`operations`)',
  not_found: 'no operation at this path',
  pet_not_found: 'getPet: no animal with this id, or a petId that is not an int64',
  method_not_allowed: 'known path, another method; `Allow` lists the methods',
  request_timeout: 'the request head or body was not received in time',
  conflict: 'an upstream 409 (outside createPet, where it maps to 400)',
  operation_removed: 'getPet after its sunset or during a brownout',
  payload_too_large: 'createPet body over `new-pet.maxBytes`',
  unsupported_media_type: 'createPet without `application/json`, or with a charset other than UTF-8',
  expectation_failed: '`Expect` other than `100-continue`; the connection is closed',
  too_many_requests: "an upstream 429 (its `Retry-After` kept)",
  rate_limited: "the consumer's rate limit is exceeded (`Retry-After`, `RateLimit` headers)",
  too_many_auth_failures: 'too many failed authentications from this client address (`Retry-After`)',
  too_many_in_flight:
    'the consumer had `server.maxInFlightPerConsumer` requests in progress and this one waited `server.consumerQueueMs` without a place (`Retry-After: 1`); its body was not read',
  headers_too_large: 'request head over `server.maxHeaderBytes`',
  internal_error: 'a fault in the gateway itself (never an upstream answer: an upstream 500 is `upstream_error`)',
  not_implemented: '`CONNECT`: the gateway tunnels nothing; the connection is closed',
  bad_gateway:
    "the upstream's answer is not one to relay (a status outside 200..599, 1xx included; more than 100 header fields; a header node cannot write), or an upstream 502",
  upstream_unavailable: 'the upstream refused or dropped the connection',
  upstream_contract_violation:
    "the upstream's answer is outside the interface (a 3xx, a list that is not an array, `response-contract: enforce`)",
  upstream_error: "an upstream 500, or an upstream error status no other code names (e.g. 418), sent with the upstream's status",
  upstream_tls_error:
    "the TLS handshake with the upstream failed or its certificate did not verify (`upstream.tls`); the reason is in the operator log only",
  upstream_auth_failed:
    "the upstream answered 401/403 to the gateway's own credential (`upstreamAuthorization: drop` or `fromEnv`)",
  service_unavailable:
    'an upstream 503 (`Retry-After` kept); the circuit breaker is open; the rate-limit store is down with `onStoreError: closed`',
  upstream_timeout:
    "the upstream did not connect, answer or send its body within the policy's timeouts (`upstream.timeouts`, `totalMs` included), or an upstream 504",
  store_full: 'the reference backend holds its maximum number of animals (100,000)',
};
