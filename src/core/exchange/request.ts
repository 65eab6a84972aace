/**
 * The request's side of `ActiveRequest`, its last part (see reply.ts): it starts the request (its
 * id, the request phase), answers a denial or takes a place of its consumer and hands the request
 * to the front, forwards it once the front read its body (the body phase, the upstream request),
 * and when the response closes gives the place back and tells the observers.
 */
import { GatewayError } from '../errors.js';
import type { GateEntry, Waiting } from '../consumer-gate.js';
import { LocalReply, type RequestDecision, type RequestHead } from '../policy.js';
import type { ExchangeRecord } from '../record.js';
import { requestIdOf } from '../request-id.js';
import { TRACE_EVENTS } from '../trace.js';
import { UpstreamCall } from './call.js';
import { Outgoing, routeOf } from './operation.js';
import type { ClientResponse, FrontRequest } from './ports.js';
import type { RequestPipeline } from './reply.js';

/** Where a response keeps its request, for the one shared 'close' listener. */
const ACTIVE = Symbol('petstore-gateway request');

function onResponseClose(this: ClientResponse & { [ACTIVE]?: ActiveRequest }): void {
  this[ACTIVE]?.closed();
}

/**
 * One client request (Envoy's router side): the exchange the policies write (`ex`), the answer
 * written to the client, and the handler of its upstream call at the top of the forwarding layers.
 * One object, its methods in three files by what they do (reply.ts, call.ts, this one). Each
 * attempt and the retry state live in the layers (src/core/forward/retry.ts); what observers read
 * is a value built once when the response closes (`record`).
 */
export class ActiveRequest extends UpstreamCall implements GateEntry, FrontRequest {
  private bytesIn = 0;
  private closedSeen = false;
  /** The consumer whose place of the in-flight bound this request holds, if any. */
  private placeOf: string | undefined = undefined;
  /** While the request waits for such a place: its entry on the queue. */
  private waiting: Waiting | undefined = undefined;

  constructor(pipeline: RequestPipeline, head: RequestHead, res: ClientResponse, native: unknown) {
    super(pipeline, head, res, native);
    // One listener shared by every request (no closure per request): it finds the request on `res`.
    // `on`, not `once`: a response closes once, and `once` would wrap the listener per request.
    (res as ClientResponse & { [ACTIVE]?: ActiveRequest })[ACTIVE] = this;
    res.on('close', onResponseClose);
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
      trace: ex.trace,
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
   * is made when the upstream request's fields are (`traced`, call.ts): a request answered without
   * a call (a denial, a finished answer a wrapper of send gives, the built-in backend) never needs
   * it. Its two fields are placed now (null: no value yet), so the upstream gets them in the same
   * order among the policies' own; a policy that sets one keeps its value.
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
    const tracing = this.pipeline.tracing;
    if (tracing !== undefined) {
      const peer = this.head.remoteAddress;
      ex.trace = tracing.start(this.head, peer !== undefined && this.rules.trusted(peer));
    }
  }

  private decided(d: RequestDecision): void {
    if (d !== undefined) {
      this.pipeline.front.discard(this);
      if (this.ex.trace !== undefined && !(d instanceof LocalReply)) this.ex.trace.event(TRACE_EVENTS.denied, { 'gateway.policy': this.ex.deniedBy ?? 'unknown', 'gateway.error.code': d.code });
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
    this.ex.trace?.event(TRACE_EVENTS.rateLimited, { 'gateway.limit': 'in_flight' });
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

  // ---- Endings ---------------------------------------------------------------------------------

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
}
