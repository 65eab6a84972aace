/**
 * The contract between the core and the policy modules, free of any HTTP framework.
 *
 * Shaped after Envoy's HTTP filters and Kong's plugin phases: the config of a policy is checked
 * once and frozen; per request a policy only returns a decision: `undefined` to continue, or a
 * GatewayError to stop the chain with that error, or (request phase only) a `LocalReply`: a
 * non-error answer the gateway gives itself, as Envoy's local reply (a CORS preflight). Policies
 * never throw and never write to a socket.
 */
import type { RequestTrace } from './trace.js';
import type { GatewayError } from './errors.js';
import type { HeaderValue, ResponseBody } from './message.js';
import type { Declarations, FactReader, Slot } from './facts.js';
import type { Interface, Operation, RouteMatch } from './operations.js';
import type { SecretSet } from './redact.js';
import type { RateLimitStore, StoreConfig } from './store.js';

export type { HeaderValue, ResponseBody } from './message.js';

/** Request headers as node:http gives them: lower-case names. */
export type IncomingHeaders = Readonly<Record<string, HeaderValue>>;

/** What a front knows of a request before reading its body. */
export interface RequestHead {
  readonly method: string;
  /** The raw request-target: path and query, as sent. */
  readonly target: string;
  readonly headers: IncomingHeaders;
  /** The peer address of the connection (not a forwarded one), when known. */
  readonly remoteAddress?: string | undefined;
  /** True when the client's connection is TLS (X-Forwarded-Proto: https towards the upstream). */
  readonly tls?: boolean | undefined;
  /** The HTTP version the client spoke: '1.1', '1.0' or '2.0' (node's `httpVersion`). */
  readonly httpVersion?: string | undefined;
}

/**
 * One request as it goes through the chain: what was asked, and what the policies decided should
 * reach the upstream and the client. The exchange reads it; only policies write it. What a policy
 * learns of the request for itself or for others (a key id, a validated page size) is not a field
 * here but a fact in the policy's own slot (`get`/`set`, src/core/facts.ts).
 */
export interface Exchange extends FactReader {
  readonly head: RequestHead;
  readonly route: RouteMatch;
  /** The operation, when the route names one (also before authentication has run). */
  readonly operation: Operation | undefined;
  /** The raw query string of the client, without '?'. */
  readonly rawQuery: string;
  /** The query string the upstream receives (without '?'); policies may rewrite it. */
  upstreamQuery: string;
  /**
   * Request headers to set for the upstream; `null` removes the header. `traceparent` and
   * `tracestate` read `null` until the upstream request is built, when the gateway's trace
   * context fills them; a policy that wants other values sets them.
   */
  readonly upstreamHeaders: Record<string, string | null>;
  /** Headers added to every response of this exchange, errors included. */
  readonly responseHeaders: Record<string, string>;
  /** The body the upstream receives, when a policy rewrote it; otherwise the client's bytes. */
  upstreamBody: Buffer | undefined;
  /** The request id: the client's when valid, else one the gateway made; echoed and forwarded. */
  requestId?: string;
  /** The policy that denied the request, when one did (for the access log and metrics). */
  deniedBy?: string;
  /** Records a fact of this request in a slot; `undefined` clears it. */
  set<T>(slot: Slot<T>, value: T | undefined): void;
  /**
   * True on a copy of an exchange whose response phase runs for an answer no client gets (a
   * comparison of two upstreams' answers, `ForwardHandler.aside`): a policy logs and counts
   * nothing of it.
   */
  readonly aside?: boolean;
  /**
   * The request's trace, when tracing is on (src/core/trace.ts): a policy records what it decided
   * with `ex.trace?.event(...)`. Absent on an `aside` copy.
   */
  readonly trace?: RequestTrace | undefined;
}

/** What the gateway knows of an API key besides its id: when it expires, what it may call, its scopes. */
export interface Consumer {
  readonly id: string;
  /** RFC 3339, as the policy file gives it; undefined: never expires. */
  readonly expires: string | undefined;
  /** The operationIds the key may call; undefined: every operation. */
  readonly operations: readonly string[] | undefined;
  /** What else the key may do (SCOPES_SCHEMA), read by the policies that need a scope; undefined: none. */
  readonly scopes: readonly string[] | undefined;
}

/** A key's scopes as every source takes them (a policy file's keys, the key registry's CLI and admin API). */
export const SCOPES_SCHEMA = {
  type: 'array',
  uniqueItems: true,
  maxItems: 32,
  items: { type: 'string', pattern: '^[A-Za-z0-9:._-]+$', maxLength: 64 },
} as const;

/** A decision: continue (`undefined`) or stop with an error. */
export type Decision = GatewayError | undefined;

/**
 * A request-phase decision to answer without the upstream and without an error: a status with no
 * body (e.g. 204), its own fields added to the exchange's response headers (the request id, CORS).
 * Not a denial: nothing is counted as a rejection.
 */
export class LocalReply {
  constructor(
    readonly status: number,
    readonly headers: Readonly<Record<string, string>>,
  ) {}
}

/** What the request phase may decide: continue, deny, or answer locally. */
export type RequestDecision = Decision | LocalReply;

/**
 * An upstream response on its way to the client. The response phase polices what an upstream
 * sends; the built-in reference backend is not an upstream (its answers conform by construction)
 * and does not go through it.
 */
export interface UpstreamResponse {
  status: number;
  /** Response headers, lower-case names; policies may rewrite them. */
  headers: Record<string, HeaderValue | number>;
}

export interface Policy {
  readonly name: string;
  /** The facts it offers observers: access-log fields, the slot naming the consumer. */
  readonly declares?: Declarations;
  /**
   * Runs first, for every exchange, before any decision: sets response headers that every response
   * of the operation carries, denials included (e.g. a deprecated operation's Deprecation). Cannot deny.
   */
  annotate?(ex: Exchange): void;
  /**
   * Runs once the request line and headers are known, before any body is read. A policy that must
   * ask shared state (a Redis rate limit) returns a promise; every other stays synchronous.
   */
  onRequest?(ex: Exchange): RequestDecision | Promise<RequestDecision>;
  /** Runs on the complete raw body of an operation that has one, before it is forwarded. */
  onBody?(ex: Exchange, body: Buffer): Decision;
  /**
   * Runs when the upstream's status and headers arrive. Returns true when the policy must see the
   * whole body before anything is sent; otherwise the body streams through untouched.
   */
  wantsResponseBody?(ex: Exchange, res: UpstreamResponse): boolean;
  /** Runs on a buffered upstream body (only when some policy asked for it); may rewrite it. */
  onResponseBody?(ex: Exchange, res: ResponseBody): ResponseBody;
}

/** Where policies report what an operator should know (e.g. a redacted upstream error page). */
export interface PolicyLog {
  warn(fields: Record<string, unknown>, message: string): void;
  /** What the operator must act on (e.g. the upstream refused the gateway's credential); warn when absent. */
  error?(fields: Record<string, unknown>, message: string): void;
}

/**
 * How the upstream is authenticated, from the `auth` policy's `upstreamAuthorization`: `client`
 * when the client's own Authorization is forwarded, `gateway` when the gateway sends its own
 * credential (`fromEnv`) or none (`drop`). `realm` is the realm of the gateway's challenges.
 */
export interface UpstreamAuth {
  readonly credential: 'client' | 'gateway';
  readonly realm: string;
}

/** What a policy may read of the world when it is created; injected so tests need no globals. */
export interface PolicyEnv {
  /** Environment variables, e.g. PETSTORE_API_KEYS. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The clock in milliseconds since the epoch; Date.now when absent. */
  readonly now?: () => number;
  /** The operator log; nothing is logged when absent. */
  readonly log?: PolicyLog;
  /**
   * Every secret the gateway holds in plaintext (client keys from the environment, the upstream
   * credential), masked exactly in relayed and logged upstream text. Built by `gatewayPolicyEnv`.
   */
  readonly secrets?: SecretSet;
  /** Whose credential the upstream sees; `gateway` when absent. Built by `gatewayPolicyEnv`. */
  readonly upstreamAuth?: UpstreamAuth;
  /**
   * `server.trustedProxies`: whose X-Forwarded-For names the real client (the auth policy's
   * brute-force lock). None trusted when absent. Built by `gatewayPolicyEnv`.
   */
  readonly trustedProxies?: readonly string[];
  /**
   * Opens (or shares) the store a policy file names; the process-wide stores of src/stores when
   * absent. Injected so tests can give a fake clock, and so a reload reuses the open connection.
   */
  readonly openStore?: (config: StoreConfig) => RateLimitStore;
  /** The interface the policies enforce (src/api compiles it); the shipped one when absent. */
  readonly api?: Interface;
}

/** A problem found in a policy file: a JSON path (e.g. `$.policies.auth.keys[0]`) and a plain message. */
export interface Problem {
  readonly path: string;
  readonly message: string;
}

/**
 * What a running gateway needs beyond a valid file, as the loader was asked (`LoadOptions.keys`):
 * `serve` refuses a config that accepts no API key; `check` applies the same rule;
 * `ephemeral-allowed` is `serve --ephemeral-key`; `not-checked` (default) asks nothing.
 */
export type RunRequirement = 'not-checked' | 'required' | 'ephemeral-allowed';

/**
 * What a module's `check` may read beyond its own section, so that a rule across policies lives in
 * the policy it belongs to and the loader names none.
 */
export interface CheckContext {
  /**
   * The whole `policies:` section as read, defaults filled, possibly with schema errors elsewhere:
   * another policy's section is read defensively (`unknown` until proven otherwise).
   */
  readonly policies: Readonly<Record<string, unknown>>;
  /** Whether the schema accepted this module's section: only then is `config` exactly its type. */
  readonly accepted: boolean;
  readonly run: RunRequirement;
}

/**
 * A policy module: the name an operator writes under `policies:` in a policy file, the JSON Schema
 * of its config (with defaults), optional cross-field rules, and a factory.
 *
 * `N` ties the module to its key in `PolicyConfig['policies']`, so the registry
 * (src/policies/index.ts) can hand each module its own section with no cast. `check` and `create`
 * are methods, not function properties, on purpose: method parameters are bivariant, which lets a
 * union of modules be called with the union of their configs (see `createPolicy` in src/gateway.ts).
 */
export interface PolicyModule<C, N extends string = string> {
  readonly name: N;
  readonly description: string;
  readonly schema: Readonly<Record<string, unknown>>;
  /**
   * Cross-field rules that a JSON Schema cannot say; return problems, never throw. Without
   * `context` (a unit test of the section alone) the rules across policies and the run's
   * requirements are not checked.
   */
  check?(config: C, path: string, env: PolicyEnv, context?: CheckContext): Problem[];
  create(config: C, env: PolicyEnv): Policy;
}
