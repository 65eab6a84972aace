/**
 * The exchange: the life of one client request, in one place, whatever front received it and
 * whatever transport reaches the upstream (Envoy's router is the model):
 *
 *   client request -> request policies -> [body -> body policies] -> forwarding layers -> Upstream port
 *                  -> response policies -> client  -> observers (access log, metrics)
 *
 * Fronts (src/fronts) only turn their framework's request into a `RequestHead` and read the body
 * when asked; transports (src/upstreams) only move bytes and name failures with a `FailureKind`.
 * What happens to one call on its way (deadlines, the retry rule, breaker accounting, bounded
 * buffering) is a stack of small layers around the port (src/core/forward). What is left here: the
 * request id, the policy phases, the breaker's admission, error mapping to the catalogue, writing
 * the answer, the error barrier, and the record observers read when it ends.
 *
 * Error barrier: an exception from a policy, a transport or a hook becomes a 500 `internal_error`
 * for that request, logged once with its stack; the process keeps serving.
 */
import type { CircuitBreaker } from './breaker.js';
import { isValidUpstreamStatus } from './contract.js';
import type { Chain, OpenExchange } from './chain.js';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from './errors.js';
import type { Clock } from './deadlines.js';
import type { ConsumerGate, GateEntry, Waiting } from './consumer-gate.js';
import { forwarding, ONE_WRITE_MAX, type AnswerKeeper, type ForwardHandler, type Send, type SendWrapper } from './forward/index.js';
import { fieldAt, storedFields, type CacheEntry, type HitPlan } from './forward/answer.js';
import { requestIdOf, traceContextOf } from './request-id.js';
import { clientResponseHeaders, mergeVary, tooManyHeaders, upstreamRequestHeaders, type HeaderRules } from './headers.js';
import { operationPath, paramOf, type Operation, type OperationId } from './operations.js';
import { LocalReply, type Exchange, type HeaderValue, type RequestDecision, type RequestHead, type ResponseBody } from './policy.js';
import type { ExchangeObserver, ExchangeRecord, RouteLabel } from './record.js';
import type { FailureKind, Upstream, UpstreamControl, UpstreamFailure, UpstreamRequest } from './upstream.js';

/**
 * The client's response as the exchange writes it: node's ServerResponse has this shape (the
 * Fastify front passes `reply.raw`), so the core needs no import of node:http.
 */
export interface ClientResponse {
  readonly headersSent: boolean;
  readonly writableFinished: boolean;
  readonly destroyed: boolean;
  writeHead(status: number, headers: Record<string, HeaderValue | number>): unknown;
  /** node's raw form, a flat list `[name, value, ...]`: what a cache hit writes. */
  writeHead(status: number, headers: (string | string[])[]): unknown;
  write(chunk: Buffer): boolean;
  end(chunk?: Buffer): unknown;
  end(chunk: string, encoding: 'latin1'): unknown;
  destroy(): unknown;
  once(event: 'close' | 'drain', listener: () => void): unknown;
  on(event: 'close', listener: () => void): unknown;
  setHeader(name: string, value: string): unknown;
}

/** The gateway in force (swapped whole on a reload) and what outlives reloads. */
export interface GatewayView {
  readonly chain: Chain;
  readonly bodyLimit: number;
  readonly headerRules: HeaderRules;
  /** A fingerprint of the policies and header rules: the response cache keys stored answers by it. */
  readonly answerRules?: string | undefined;
}

export interface GatewaySource {
  readonly current: GatewayView;
  readonly breaker: CircuitBreaker | undefined;
  /**
   * The response cache in front of the upstream (the `cache` policy, src/policies/cache), as a
   * wrapper of the composed send: it may answer a call itself (`onStored`). It outlives reloads.
   */
  readonly cacheLayer?: SendWrapper | undefined;
  /** The per-consumer in-flight bound (`server.maxInFlightPerConsumer`); it outlives reloads. */
  readonly gate?: ConsumerGate | undefined;
}

/** What forwarding is built from; fixed for the life of the process (a reload cannot change it). */
export interface ForwardSettings {
  /** The upstream's base path (`/v1`, no trailing slash), prefixed to every operation path. */
  readonly basePath: string;
  readonly headersMs: number;
  readonly bodyMs: number;
  /** From sending the request to the answer's last byte. */
  readonly totalMs: number;
  /** Most bytes of a 2xx body held for a policy that must read it (lists); past it, truncated. */
  readonly maxBufferedBytes: number;
  readonly retryIdempotent: boolean;
}

/** Where the exchange reports what an operator must know. */
export interface OperatorLog {
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** How a front takes part: it reads the body when the exchange asks, and drains one it refused. */
export interface FrontHooks {
  /**
   * The request passed its request phase. The front calls `request.forward(body)`: at once for an
   * operation without a body, once it has read the body (within `request.bodyLimit`) otherwise,
   * or `request.failBody(err)` when reading failed.
   */
  proceed(request: ActiveRequest): void;
  /** The request was answered before its body was read: drain or discard it. */
  discard(request: ActiveRequest): void;
  /**
   * The request waits for a place of its consumer (src/core/consumer-gate.ts): stop reading the
   * connection it came on (HTTP/1.1), so the client's further bytes stay unread.
   */
  hold?(request: ActiveRequest): void;
  /** The request no longer waits: the connection may be read again, as far as it is concerned. */
  release?(request: ActiveRequest): void;
}

export interface PipelineOptions {
  readonly gateways: GatewaySource;
  readonly upstream: Upstream;
  readonly settings: ForwardSettings;
  readonly front: FrontHooks;
  readonly log?: OperatorLog | undefined;
  readonly observer?: ExchangeObserver | undefined;
  /** The forwarding layers' clock (tests move it by hand); the real one by default. */
  readonly clock?: Clock | undefined;
}


/** Ends `res` with `chunk` as its last bytes (with the head, when node has not written it yet). */
function endWith(res: ClientResponse, chunk: Buffer): void {
  if (chunk.length <= ONE_WRITE_MAX) res.end(chunk.toString('latin1'), 'latin1');
  else res.end(chunk);
}

/**
 * Sets the fields of `from` on `out`, one by one (Vary merged), and returns `out`. Header objects are built with
 * it, not with `{ ...from }`: the spread's clone, given fields afterwards, cost the built-in
 * backend a large share of its CPU per request, and getPet and createPet serve more requests with
 * this loop (co-scheduled A/B, bench/ab.mjs).
 */
function assignHeaders(out: Record<string, HeaderValue | number>, from: Readonly<Record<string, HeaderValue | number | undefined>>): Record<string, HeaderValue | number> {
  for (const name in from) {
    const value = from[name];
    // Vary is a list (RFC 9110 section 12.5.5): the gateway's Origin joins the answer's, never replaces it.
    if (value !== undefined) out[name] = name === 'vary' && out.vary !== undefined ? mergeVary(out.vary, value) : value;
  }
  return out;
}

/**
 * A hit's field list from its entry's plan: a copy of the plan's list with this request's own
 * values, Age and Cache-Status in their places; undefined when the request's own field names are
 * not the plan's (another route's or consumer's policies), and the list is made field by field.
 */
function plannedFields(plan: HitPlan, own: Readonly<Record<string, HeaderValue>>, age: string, cacheStatus: string): (string | string[])[] | undefined {
  const names = plan.names;
  const at = plan.at;
  const out = plan.fields.slice();
  let n = 0;
  for (const name in own) {
    const value = own[name];
    if (value === undefined) continue;
    if (names[n] !== name) return undefined;
    const i = at[n++] ?? 0;
    // Vary is a list (RFC 9110 section 12.5.5): the exchange's joins a stored one.
    out[i] = i < plan.stored && name === 'vary' ? mergeVary(out[i], value) : value;
  }
  if (n !== names.length) return undefined;
  out[out.length - 3] = age;
  out[out.length - 1] = cacheStatus;
  return out;
}

/**
 * A hit's field list made field by field: the stored fields (the first `storedEnd` items of
 * `stored`), the request's own (one replaces a stored one of its name; Vary merged), Age and
 * Cache-Status.
 */
function mergedFields(stored: readonly (string | string[])[], storedEnd: number, own: Readonly<Record<string, HeaderValue>>, age: string, cacheStatus: string): (string | string[])[] {
  const out = stored.slice(0, storedEnd);
  for (const name in own) {
    const value = own[name];
    if (value === undefined) continue;
    const at = fieldAt(out, storedEnd, name);
    if (at < 0) out.push(name, value);
    else out[at + 1] = name === 'vary' ? mergeVary(out[at + 1], value) : value;
  }
  out.push('age', age, 'cache-status', cacheStatus);
  return out;
}

/** No fields of a request: the view of the headers every client gets of a stored answer. */
const NO_FIELDS: Readonly<Record<string, string>> = Object.freeze({});

/** Most bytes of a non-2xx upstream body kept for the error mapping; the rest is not buffered. */
export const ERROR_BODY_CAP = 16 * 1024;

const ROUTE_LABEL: Readonly<Record<OperationId, RouteLabel>> = {
  listPets: '/v1/pets',
  createPet: '/v1/pets',
  getPet: '/v1/pets/{petId}',
};

function errorFor(kind: FailureKind, cause: unknown): GatewayError {
  const code = kind === 'connect_timeout' || kind === 'headers_timeout' || kind === 'body_timeout' || kind === 'total_timeout' ? 'upstream_timeout' : kind === 'invalid_response' ? 'bad_gateway' : kind === 'tls' ? 'upstream_tls_error' : 'upstream_unavailable';
  return new GatewayError(code, { cause });
}

/** What the operator log gets of a cause: its code and message, never a request header. */
export function describeCause(cause: unknown): string | undefined {
  if (!(cause instanceof Error)) return undefined;
  const code = (cause as { code?: unknown }).code;
  const inner = cause.cause instanceof Error && cause.cause !== cause ? ` (${describeCause(cause.cause)})` : '';
  return `${typeof code === 'string' ? code + ': ' : ''}${cause.message}${inner}`;
}


/** The route label: the operation's template, or one value for every other path (bounded). */
function routeOf(ex: Exchange): RouteLabel {
  const op = ex.operation;
  if (op !== undefined) return ROUTE_LABEL[op.id];
  return ex.route.kind === 'method_not_allowed' ? (ex.route.allow === 'GET' ? '/v1/pets/{petId}' : '/v1/pets') : 'unknown';
}

/**
 * How the exchange treats an upstream's answers, chosen with the layers when the pipeline is built:
 * an upstream's are policed (the header allowlist, the response phase when a policy asks); the
 * reference backend's conform by construction and are written as they are.
 */
interface Answers {
  /** How many bytes of the body to hold for the response phase (0: it streams). */
  hold(request: ActiveRequest, status: number, headers: Readonly<Record<string, HeaderValue>>): number;
  /** The head the client gets for a streamed answer. */
  headers(request: ActiveRequest, headers: Readonly<Record<string, HeaderValue>>): Record<string, HeaderValue | number>;
}

const POLICED: Answers = {
  hold(request, status, headers) {
    if (!request.chain.wantsResponseBody(request.ex, { status, headers: headers as Record<string, HeaderValue | number> })) return 0;
    // A 2xx a policy reads (a list) is held up to maxBufferedBytes; an error page only as far as
    // the error mapping reads it: the rest is not buffered.
    const max = request.pipeline.settings.maxBufferedBytes;
    return status < 300 ? max : Math.min(ERROR_BODY_CAP, max);
  },
  headers(request, headers) {
    return clientResponseHeaders(request.rules, headers as Record<string, HeaderValue | number>, request.ex);
  },
};

const TRUSTED: Answers = {
  hold: () => 0,
  headers: (request, headers) => assignHeaders(assignHeaders({}, headers), request.ex.responseHeaders),
};

/** The pipeline of one front: one per server, shared by its requests. */
export class Pipeline {
  readonly gateways: GatewaySource;
  readonly upstream: Upstream;
  readonly settings: ForwardSettings;
  readonly front: FrontHooks;
  readonly log: OperatorLog | undefined;
  readonly observer: ExchangeObserver | undefined;
  /** The upstream's `send` with the forwarding layers it needs around it (src/core/forward). */
  readonly send: Send;
  readonly answers: Answers;
  /** The breaker that admits calls; none for an upstream the layers do not guard. */
  readonly breaker: CircuitBreaker | undefined;
  /** The per-consumer in-flight bound; none when `consumerBound` is off. */
  readonly gate: ConsumerGate | undefined;

  constructor(options: PipelineOptions) {
    this.gateways = options.gateways;
    this.upstream = options.upstream;
    this.settings = options.settings;
    this.front = options.front;
    this.log = options.log;
    this.observer = options.observer;
    const f = forwarding(options.upstream, options.settings, options.gateways.breaker, options.clock, options.gateways.cacheLayer);
    this.send = f.send;
    this.breaker = f.breaker;
    this.answers = f.policed ? POLICED : TRUSTED;
    this.gate = options.gateways.gate;
  }

  /**
   * Starts the exchange of one request: runs its request phase (synchronously unless a policy must
   * wait), then answers a denial or hands the request to the front to read its body and forward.
   */
  handle(head: RequestHead, res: ClientResponse, native: unknown): ActiveRequest {
    const request = new ActiveRequest(this, head, res, native);
    request.start();
    return request;
  }

  /** An exchange not started yet, for a front that must keep it before `start` may call back. */
  open(head: RequestHead, res: ClientResponse, native: unknown): ActiveRequest {
    return new ActiveRequest(this, head, res, native);
  }

  /** Answers an error for a request the chain never saw (e.g. a front's own failure). */
  reject(head: RequestHead, res: ClientResponse, native: unknown, err: unknown): ActiveRequest {
    const request = new ActiveRequest(this, head, res, native);
    request.failBody(err);
    return request;
  }

  /** Logs an exception the barrier caught: once, with its stack. */
  crashed(err: unknown, where: string): void {
    const stack = err instanceof Error ? err.stack : String(err);
    this.log?.error({ where, stack }, 'unexpected error; answered 500 internal_error');
  }
}

/**
 * The upstream request of one client request. Its headers are built when first read: a transport
 * reads them as it sends, while a request the response cache answers from an entry is never sent.
 * Built (the path rebuilt from the operation, never copied from the client) once the request and
 * body phases passed.
 */
class Outgoing implements UpstreamRequest {
  readonly method: 'GET' | 'POST';
  readonly operation: OperationId;
  readonly param: string | undefined;
  readonly query: string;
  readonly pathname: string;
  readonly path: string;
  readonly native: unknown;
  readonly answerRules: string | undefined;
  private built: Record<string, string | string[]> | undefined = undefined;
  private forwarded: Record<string, string | string[]> | undefined = undefined;

  constructor(
    private readonly active: ActiveRequest,
    op: Operation,
    basePath: string,
    readonly body: Buffer | undefined,
  ) {
    const ex = active.ex;
    this.method = op.method;
    this.operation = op.id;
    this.param = paramOf(ex.route);
    this.query = ex.upstreamQuery;
    this.pathname = basePath + operationPath(op, this.param);
    this.path = this.query === '' ? this.pathname : `${this.pathname}?${this.query}`;
    this.native = active.native;
    this.answerRules = active.answerRulesOf;
  }

  get headers(): Record<string, string | string[]> {
    return (this.built ??= this.active.upstreamHeaders(this.body));
  }

  get keyFields(): Readonly<Record<string, string | string[]>> {
    return this.built ?? (this.forwarded ??= this.active.forwardedFields());
  }
}

/** Where a response keeps its request, for the one shared 'close' listener. */
const ACTIVE = Symbol('petstore-gateway request');

function onResponseClose(this: ClientResponse & { [ACTIVE]?: ActiveRequest }): void {
  this[ACTIVE]?.closed();
}

/**
 * One client request (Envoy's router side): the exchange the policies write (`ex`), the answer
 * written to the client, and the handler of its upstream call at the top of the forwarding layers.
 * Each attempt and the retry state live in the layers (src/core/forward/retry.ts); what observers
 * read is a value built once when the response closes (`record`).
 */
export class ActiveRequest implements ForwardHandler, GateEntry {
  readonly ex: OpenExchange;
  readonly startedAt = Date.now();
  private readonly t0 = performance.now();
  /** The chain of the gateway in force when the request arrived: a reload does not change it. */
  readonly chain: Chain;
  readonly rules: HeaderRules;
  readonly bodyLimit: number;
  /** The gateway's answer rules when the request arrived (`GatewayView.answerRules`). */
  readonly answerRulesOf: string | undefined;

  private status = 0;
  private errorCode: string | undefined = undefined;
  private upstreamStatus: number | undefined = undefined;
  private upstreamFailure: FailureKind | undefined = undefined;
  private upstreamT0 = 0;
  private upstreamT1 = 0;
  private bytesIn = 0;
  private bytesOut = 0;

  private control: UpstreamControl | undefined = undefined;
  /** A streamed body's announced length (-1 when not announced), and whether it was ended with its last chunk. */
  private expected = -1;
  private ended = false;
  private headers: Readonly<Record<string, HeaderValue>> | undefined = undefined;
  /** The upstream call has ended (answered, failed, timed out or abandoned): nothing more counts. */
  private settled = true;
  private closedSeen = false;
  /** The consumer whose place of the in-flight bound this request holds, if any. */
  private placeOf: string | undefined = undefined;
  /** While the request waits for such a place: its entry on the queue. */
  private waiting: Waiting | undefined = undefined;

  constructor(
    readonly pipeline: Pipeline,
    readonly head: RequestHead,
    readonly res: ClientResponse,
    /** The front's own request object (IncomingMessage, FastifyReply...). */
    readonly native: unknown,
  ) {
    const gw = pipeline.gateways.current;
    this.chain = gw.chain;
    this.rules = gw.headerRules;
    this.bodyLimit = gw.bodyLimit;
    this.answerRulesOf = gw.answerRules;
    this.ex = gw.chain.open(head);
    // One listener shared by every request (no closure per request): it finds the request on `res`.
    // `on`, not `once`: a response closes once, and `once` would wrap the listener per request.
    (res as ClientResponse & { [ACTIVE]?: ActiveRequest })[ACTIVE] = this;
    res.on('close', onResponseClose);
  }

  get requestId(): string {
    return this.ex.requestId ?? '';
  }

  /** What observers read: one value, built when the response closed. */
  private record(endedAt: number): ExchangeRecord {
    const ex = this.ex;
    return {
      startedAt: this.startedAt,
      durationMs: endedAt - this.t0,
      requestId: this.requestId,
      method: this.head.method,
      route: routeOf(ex),
      operation: ex.operation?.id,
      status: this.status,
      errorCode: this.errorCode,
      rejectedBy: ex.deniedBy,
      upstreamStatus: this.upstreamStatus,
      upstreamMs: this.upstreamT0 === 0 ? undefined : this.upstreamT1 - this.upstreamT0,
      upstreamFailure: this.upstreamFailure,
      bytesIn: this.bytesIn,
      bytesOut: this.bytesOut,
      clientAddress: this.head.remoteAddress,
      protocol: this.head.httpVersion,
      consumer: ex.consumerId,
      // The exchange itself: its facts are final now, and handing it over copies nothing.
      facts: ex,
    };
  }

  // ---- Request phase ---------------------------------------------------------------------------

  /** Runs the request phase; a denial is answered, a pass handed to the front. */
  start(): void {
    try {
      this.identify();
    } catch (err) {
      return this.crash(err, 'request id');
    }
    let d: RequestDecision | Promise<RequestDecision>;
    try {
      d = this.chain.decide(this.ex);
    } catch (err) {
      return this.crash(err, 'request phase');
    }
    if (d instanceof Promise) {
      d.then(
        (r) => this.decided(r),
        (err: unknown) => this.crash(err, 'request phase'),
      );
      return;
    }
    this.decided(d);
  }

  /**
   * The request id (the client's when valid, else a new one) on every response and to the
   * upstream, and W3C trace context to the upstream, so upstream logs correlate. The trace context
   * is made when the upstream request's fields are (`traced`): a request answered without a call
   * (a denial, a cache hit, the built-in backend) never needs it. Its two fields are placed now
   * (null: no value yet), so the upstream gets them in the same order among the policies' own; a
   * policy that sets one keeps its value.
   */
  private identify(): void {
    const ex = this.ex;
    const h = this.head.headers;
    const id = requestIdOf(h['x-request-id']);
    ex.requestId = id;
    ex.responseHeaders['x-request-id'] = id;
    const up = ex.upstreamHeaders;
    up['x-request-id'] = id;
    up.traceparent = null;
    up.tracestate = null;
  }

  /**
   * Puts the trace context in the places `identify` kept, unless a policy set the fields itself.
   * Once per request: `Outgoing` builds the upstream fields once, and retries reuse them.
   */
  private traced(): void {
    const up = this.ex.upstreamHeaders;
    const trace = traceContextOf(this.head.headers);
    if (up.traceparent === null) up.traceparent = trace.traceparent;
    if (up.tracestate === null) up.tracestate = trace.tracestate ?? null;
  }

  private decided(d: RequestDecision): void {
    if (d !== undefined) {
      this.pipeline.front.discard(this);
      return d instanceof LocalReply ? this.reply(d) : this.sendError(d);
    }
    if (this.res.destroyed) return; // the client left while a policy was deciding
    const gate = this.pipeline.gate;
    const consumer = gate === undefined ? undefined : this.ex.consumerId;
    if (consumer !== undefined) {
      const waiting = gate?.enter(consumer, this);
      if (waiting !== undefined) {
        this.waiting = waiting;
        this.pipeline.front.hold?.(this);
        return;
      }
      this.placeOf = consumer;
    }
    this.proceed();
  }

  private proceed(): void {
    try {
      this.pipeline.front.proceed(this);
    } catch (err) {
      this.crash(err, 'front');
    }
  }

  /** The request got its consumer's place after waiting (GateEntry). */
  admitted(): void {
    const w = this.waiting;
    if (w === undefined) return;
    this.waiting = undefined;
    this.placeOf = w.consumer;
    this.pipeline.front.release?.(this);
    // On the next turn of the event loop: a place freed by an answer that ended at once would
    // otherwise start the next waiting request in the same chain of callbacks, and one consumer's
    // queue would hold the loop until it is empty.
    setImmediate(() => {
      if (!this.closedSeen && !this.res.destroyed) this.proceed();
    });
  }

  /** The request waited `queueMs` for a place (GateEntry): 429, its body not read. */
  expired(): void {
    if (this.waiting === undefined) return;
    this.waiting = undefined;
    const front = this.pipeline.front;
    front.release?.(this);
    front.discard(this);
    // A place frees as soon as one of the consumer's own requests ends: the smallest Retry-After.
    this.sendError(new GatewayError('too_many_in_flight', { headers: { 'retry-after': '1' } }));
  }

  /** Reading the body failed: 413 (and close the connection), or the client went away. */
  failBody(err: unknown): void {
    if (err instanceof GatewayError) {
      // 413 before the body is read whole: close the connection rather than drain it.
      if (err.status === 413 && !this.res.headersSent) this.res.setHeader('connection', 'close');
      return this.sendError(err);
    }
    if (this.res.headersSent || this.res.destroyed) {
      this.res.destroy();
      return;
    }
    this.crash(err, 'request body');
  }

  /** Forwards a request that passed the request phase; `body` for an operation that has one. */
  forward(body: Buffer | undefined): void {
    try {
      const ex = this.ex;
      const op = ex.operation;
      if (op === undefined) return this.sendError(new GatewayError('not_found'));
      if (body !== undefined) {
        this.bytesIn = body.length;
        const denied = this.chain.acceptBody(ex, body);
        if (denied !== undefined) return this.sendError(denied);
        body = ex.upstreamBody ?? body;
      } else if (op.hasBody) {
        return this.sendError(new GatewayError('invalid_request', { message: 'The request body is missing.' }));
      }
      const pipeline = this.pipeline;
      const request = new Outgoing(this, op, pipeline.settings.basePath, body);
      this.settled = false;
      this.upstreamT0 = performance.now();
      pipeline.send(request, this);
    } catch (err) {
      this.crash(err, 'forward');
    }
  }

  /** The fields the upstream is sent but the trace context, which `upstreamHeaders` makes first (a cache hit never needs one). */
  forwardedFields(): Record<string, string | string[]> {
    const h = this.head.headers;
    return upstreamRequestHeaders(this.rules, h, this.ex, { remoteAddress: this.head.remoteAddress, tls: this.head.tls === true, host: h.host as string | undefined }) as Record<string, string | string[]>;
  }

  /** The request headers the upstream receives, for a request with `body` (`Outgoing`). */
  upstreamHeaders(body: Buffer | undefined): Record<string, string | string[]> {
    this.traced();
    const headers = this.forwardedFields();
    if (body !== undefined) headers['content-length'] = String(body.length);
    else delete headers['content-length'];
    return headers;
  }

  // ---- Upstream call (ForwardHandler) ----------------------------------------------------------

  onStart(control: UpstreamControl): void {
    this.control = control;
    if (this.settled) control.abort();
  }

  onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    if (this.settled) {
      this.control?.abort();
      return 0;
    }
    if (errorCode !== undefined) this.errorCode = errorCode;
    this.upstreamStatus = status;
    try {
      if (!isValidUpstreamStatus(status) || tooManyHeaders(headers)) {
        // 999, 600, a 101 nobody asked for, or a header flood: not an answer to relay.
        this.refuseAnswer(new Error(`upstream answered status ${status}`));
        return 0;
      }
      const answers = this.pipeline.answers;
      let hold: number;
      try {
        hold = answers.hold(this, status, headers);
      } catch (err) {
        // A policy's fault, not the upstream's: 500 internal_error with its stack (the barrier).
        this.crash(err, 'response phase');
        return 0;
      }
      if (hold > 0) {
        this.headers = headers;
        return hold;
      }
      this.status = status;
      const length = headers['content-length'];
      this.expected = typeof length === 'string' ? Number(length) : -1;
      this.res.writeHead(status, answers.headers(this, headers));
    } catch (err) {
      // A header value node will not write (the upstream's fault): 502, nothing forwarded.
      this.status = 0;
      this.refuseAnswer(err);
    }
    return 0;
  }

  onData(chunk: Buffer): void {
    if (this.settled) return;
    this.bytesOut += chunk.length;
    if (this.bytesOut === this.expected) {
      // The last byte the upstream announced: headers, body and end in one write (a body in one
      // chunk, the common case, costs one write instead of two).
      this.ended = true;
      endWith(this.res, chunk);
      return;
    }
    if (!this.res.write(chunk)) {
      // The client reads slowly: hold the upstream back (the body-idle layer stops counting).
      this.control?.pause();
      this.res.once('drain', () => this.control?.resume());
    }
  }

  onEnd(): void {
    if (this.settled) return;
    this.settle();
    if (!this.ended) this.res.end();
  }

  /** The body the response phase reads, held by the buffering layer (whole, or cut at the cap). */
  onBody(body: Buffer, truncated: boolean): void {
    if (this.settled) return;
    this.settle();
    const status = this.upstreamStatus ?? 0;
    const upstreamHeaders = this.headers as Record<string, HeaderValue | number>;
    const out = this.respond({ status, headers: upstreamHeaders, body, truncated });
    if (out !== undefined) this.answer(out, upstreamHeaders);
  }

  /**
   * A whole upstream answer the response cache holds: the response phase runs on it, when a
   * policy asks as for any answer, and the cache is offered what the client would get. Kept, it
   * is written from the entry, as every later hit is: one way to write a cached answer.
   */
  onAnswer(status: number, headers: Readonly<Record<string, HeaderValue>>, body: Buffer, keeper: AnswerKeeper): void {
    if (this.settled) return;
    this.upstreamStatus = status;
    this.headers = headers;
    if (tooManyHeaders(headers)) return this.refuseAnswer(new Error('upstream answered too many header fields'));
    const upstreamHeaders = headers as Record<string, HeaderValue | number>;
    let hold: number;
    try {
      hold = this.pipeline.answers.hold(this, status, headers);
    } catch (err) {
      return this.crash(err, 'response phase');
    }
    this.settle();
    const res: ResponseBody = { status, headers: upstreamHeaders, body, truncated: false };
    const out = hold > 0 ? this.respond(res) : res;
    if (out === undefined) return;
    if (out.status === 200 && out.headers === upstreamHeaders) {
      // What every client gets of this answer: the allowlist and the `private` rule applied, none
      // of this request's own fields (they are added per request, as on a hit).
      const shared = clientResponseHeaders(this.rules, upstreamHeaders, { responseHeaders: NO_FIELDS, consumerId: this.ex.consumerId }, true);
      const entry = keeper.keep(200, shared, out.body, this.ex.responseHeaders);
      // The cache's head says this request's Age and Cache-Status (src/policies/cache/flight.ts, `answerHead`).
      if (entry !== undefined) return this.writeStored(entry, String(headers.age ?? '0'), String(headers['cache-status'] ?? ''));
    }
    this.answer(out, upstreamHeaders);
  }

  /** The response cache answers from an entry: the request's own fields on the stored answer. */
  onStored(entry: CacheEntry, age: string, cacheStatus: string, called: boolean): void {
    if (this.settled) return;
    // An answer no call went upstream for has no upstream status or duration (the access line
    // and the client histogram are for upstream calls), as for a call the breaker refused.
    if (called) {
      this.upstreamStatus = entry.status;
      this.settle();
    } else {
      this.upstreamT0 = 0;
      // No call to time: settled without reading the clock.
      this.settled = true;
    }
    this.writeStored(entry, age, cacheStatus);
  }

  /** The response phase on a held answer; undefined when it crashed (answered 500). */
  private respond(res: ResponseBody): ResponseBody | undefined {
    try {
      return this.chain.finishResponse(this.ex, res);
    } catch (err) {
      this.crash(err, 'response phase');
      return undefined;
    }
  }

  /** Sends what the response phase made of an upstream answer. */
  private answer(out: ResponseBody, upstreamHeaders: Record<string, HeaderValue | number>): void {
    if (out.code !== undefined) this.errorCode = out.code;
    // A response a policy built itself (an Error) carries the gateway's own headers (a challenge,
    // Retry-After): they are not the upstream's, so the upstream allowlist does not apply to them.
    const headers = out.headers === upstreamHeaders ? clientResponseHeaders(this.rules, out.headers, this.ex, true) : TRUSTED.headers(this, out.headers as Readonly<Record<string, HeaderValue>>);
    // The response cache's account of the call (RFC 9211: `fwd=uri-miss; fwd-status=404`) is the
    // gateway's own field, so an answer a policy rewrote (a 404 into pet_not_found) keeps it.
    if (out.headers !== upstreamHeaders && this.pipeline.gateways.cacheLayer !== undefined && upstreamHeaders['cache-status'] !== undefined) headers['cache-status'] = upstreamHeaders['cache-status'];
    this.send(out.status, headers, out.body);
  }

  /** The breaker refused the call (503 with Retry-After): nothing was sent upstream. */
  onRefused(err: GatewayError): void {
    if (this.settled) return;
    this.upstreamT0 = 0;
    this.settle();
    this.sendError(err);
  }

  onFailure(failure: UpstreamFailure): void {
    if (this.settled) return;
    this.upstreamFailure = failure.kind;
    this.fail(errorFor(failure.kind, failure.cause ?? failure));
  }

  // ---- Endings ---------------------------------------------------------------------------------

  private settle(): void {
    this.settled = true;
    this.upstreamT1 = performance.now();
  }

  /** The gateway will not relay this answer: the call stops, counted as the upstream's failure. */
  private refuseAnswer(cause: unknown): void {
    this.control?.abort('failed');
    this.fail(new GatewayError('bad_gateway', { cause }));
  }

  private fail(err: GatewayError): void {
    this.settle();
    if (this.res.headersSent) {
      // The status is out (a streamed body broke off or paused too long): close the connection.
      this.pipeline.log?.warn({ requestId: this.requestId, code: err.code, cause: describeCause(err.cause) }, 'upstream body failed; connection closed');
      this.res.destroy();
      return;
    }
    this.sendError(err);
  }

  /** The client went away, or the response is done: abandon what is pending, tell the observers. */
  closed(): void {
    if (this.closedSeen) return;
    this.closedSeen = true;
    if (this.placeOf !== undefined || this.waiting !== undefined) this.leaveGate();
    if (!this.settled) {
      this.settle();
      // Every announced byte was relayed (the response ended with its last chunk): the layers
      // learn the end from the transport. Otherwise a client that hangs up tells nothing about the
      // upstream: the call is abandoned, not failed.
      if (!this.ended) this.control?.abort();
    }
    const observer = this.pipeline.observer;
    if (observer === undefined) return;
    try {
      observer.onEnd(this.record(performance.now()));
    } catch (err) {
      this.pipeline.crashed(err, 'observer');
    }
  }

  /** Gives back this request's place of the in-flight bound, or takes it off the queue. */
  private leaveGate(): void {
    const gate = this.pipeline.gate;
    if (this.waiting !== undefined) {
      gate?.cancel(this.waiting);
      this.waiting = undefined;
      this.pipeline.front.release?.(this);
    }
    if (this.placeOf !== undefined) {
      gate?.leave(this.placeOf);
      this.placeOf = undefined;
    }
  }

  // ---- Writing to the client -------------------------------------------------------------------

  private send(status: number, headers: Record<string, HeaderValue | number>, body: Buffer): void {
    const res = this.res;
    if (res.headersSent || res.destroyed) return;
    headers['content-length'] = body.length;
    this.status = status;
    this.bytesOut = body.length;
    res.writeHead(status, headers);
    endWith(res, body);
  }

  /**
   * Writes a stored answer: its fields (Content-Length included) as stored, then the exchange's
   * own (request id, CORS, deprecation, rate limit; Vary merged), Age and Cache-Status; the body
   * as stored, with the head in one write when it is small.
   */
  private writeStored(entry: CacheEntry, age: string, cacheStatus: string): void {
    const res = this.res;
    if (res.headersSent || res.destroyed) return;
    // A flat list, not an object: node writes a list's fields without an own-property check and a
    // lookup by name per field, so the two fields a hit adds (Age, Cache-Status) cost about what
    // the object form saved (instructions counted under valgrind).
    const own = this.ex.responseHeaders;
    const plan = entry.plan;
    let out = plan === undefined ? undefined : plannedFields(plan, own, age, cacheStatus);
    if (out === undefined) {
      const stored = plan?.fields ?? entry.fields ?? storedFields(entry.headers);
      out = mergedFields(stored, plan?.stored ?? stored.length, own, age, cacheStatus);
    }
    this.status = entry.status;
    this.bytesOut = entry.body.length;
    res.writeHead(entry.status, out);
    // A small body kept as a string: joined with the head in one write, copied into no new string.
    if (entry.text !== undefined) res.end(entry.text, 'latin1');
    else endWith(res, entry.body);
  }

  /** Answers a policy's local reply: its status, no body, the exchange's own headers and its own. */
  private reply(r: LocalReply): void {
    const res = this.res;
    if (res.headersSent || res.destroyed) return;
    const headers = assignHeaders(assignHeaders({}, this.ex.responseHeaders), r.headers);
    // RFC 9110 section 8.6: no Content-Length in a 204; any other status says its empty body.
    if (r.status !== 204) headers['content-length'] = 0;
    this.status = r.status;
    res.writeHead(r.status, headers);
    res.end();
  }

  /** Answers `err` in the Error shape with the exchange's own headers (e.g. deprecation). */
  sendError(err: GatewayError): void {
    const res = this.res;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (res.destroyed) return;
    this.errorCode = err.code;
    if (err.status >= 500 && err.code !== 'internal_error') {
      this.pipeline.log?.warn({ requestId: this.requestId, code: err.code, cause: describeCause(err.cause) }, 'gateway error');
    }
    const headers = assignHeaders(assignHeaders({}, this.ex.responseHeaders), err.headers);
    headers['content-type'] = ERROR_CONTENT_TYPE;
    try {
      this.send(err.status, headers, Buffer.from(renderError(err)));
    } catch (e) {
      this.pipeline.crashed(e, 'sendError');
      res.destroy();
    }
  }

  /** The error barrier: an exception anywhere in the exchange answers 500, logged once. */
  private crash(err: unknown, where: string): void {
    this.pipeline.crashed(err, where);
    if (!this.settled) {
      this.settle();
      // The gateway's own fault: it tells nothing of the upstream, so the breaker does not count it.
      this.control?.abort();
    }
    this.sendError(new GatewayError('internal_error'));
  }
}
