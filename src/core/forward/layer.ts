/**
 * Forwarding as layers around the Upstream port. Each rule (the deadlines, the retry rule, breaker
 * accounting, bounded buffering) is one layer, in a module of its own; an upstream gets only the
 * layers it needs (the in-process reference backend gets none).
 *
 * A layer is a part of the call object: a subclass of the call made of the layers outside it
 * (`extend`), composed once per pipeline into one class. Per call there is one object, whatever the
 * number of layers; a callback from the transport enters at the innermost layer and each part
 * passes it outward with `super`, up to the handler (the exchange); a control call (pause, resume,
 * abort) from the handler reaches the transport. When the call ends, by any path, every part
 * `settle`s once (a deadline leaves its list, the breaker learns the outcome). The call sites of
 * `super` see one class each, which V8 inlines: a chain of one wrapper object per layer (undici's
 * interceptor shape) served about 1% fewer forwarded requests per second (docs/performance.md,
 * "Forwarding layers").
 *
 * A wrapper that answers some calls without making one (`SendWrapper`) wraps the composed `send`
 * instead; its per-request objects may be `Call`s with no layer's part.
 */
import type { GatewayError } from '../errors.js';
import type { HeaderValue } from '../policy.js';
import type { FinishedAnswer } from './answer.js';
import type { AbortReason, UpstreamControl, UpstreamFailure, UpstreamHandler, UpstreamRequest } from '../upstream.js';

/**
 * Bodies up to this size end the response as one latin1 string (the same bytes): node joins a
 * string with the response head, so head and body leave in one write instead of a writev of two
 * buffers. That pays for the copy into a string only while the body is small: one object of the
 * shipped interface is faster as a string, lists of 20 and 100 of them faster as buffers; larger limits
 * measured worse (co-scheduled, bench/ab.mjs).
 */
export const ONE_WRITE_MAX = 1024;

/**
 * The handler protocol between the layers and the exchange: the transport's (`UpstreamHandler`),
 * plus the two calls of bounded buffering. `onHead` answers how many bytes of the body the handler
 * wants held and delivered whole by `onBody` (0: the body streams through `onData`).
 */
export interface ForwardHandler extends UpstreamHandler {
  onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number;
  /** A held body: whole, or cut at the cap the handler gave (`truncated`; the call was stopped). */
  onBody(body: Buffer, truncated: boolean): void;
  /**
   * The two calls a wrapper of `send` (outermost: `SendWrapper`) may make instead of `onHead`;
   * only the handler above every layer (the exchange) has them, and a wrapper passes a handler
   * without them through. Nothing follows either.
   *
   * A whole upstream answer: the handler runs its response phase on it as on a held body, and
   * offers `taker` what it would send (see `AnswerTaker`). The head carries the wrapper's trailing
   * fields (`SendWrapper.trailing`) with this request's values.
   */
  onWhole?(status: number, headers: Readonly<Record<string, HeaderValue>>, body: Buffer, taker: AnswerTaker): void;
  /**
   * A finished answer (see answer.ts): written as it is, with the request's own fields, then the
   * wrapper's trailing fields with `trailing`, their values in the wrapper's order (read during
   * this call only: the wrapper may reuse the list). `called`: whether a call went upstream for
   * this request, or not (the answer was at hand, or the call was refused).
   */
  onFinished?(answer: FinishedAnswer, trailing: readonly string[], called: boolean): void;
  /**
   * The call was never sent: the gateway refuses it (the circuit breaker is open) and `err` is
   * the answer. Instead of `onStart`; nothing follows. Not an upstream failure: no observer counts it as one.
   */
  onRefused(err: GatewayError): void;
  /**
   * For a wrapper of `send` that compares another upstream's answer with this one (the handler
   * above every layer has it): a copy of the request's exchange as it stands now, before any
   * response phase, and a function that runs the response phase on an answer for a fresh copy of
   * it each time and returns what the client would have got. Nothing is written, logged or counted.
   */
  aside?(): AsideRun;
}

/** An answer as the client gets it: after the response phase (`AsideRun`). */
export interface AsideAnswer {
  readonly status: number;
  /** The catalogue code of an Error the gateway wrote; undefined for an upstream's own body. */
  readonly code: string | undefined;
  readonly body: Buffer;
  readonly truncated: boolean;
}

/** Runs the response phase on an upstream answer no client gets (see `ForwardHandler.aside`). */
export type AsideRun = (status: number, headers: Readonly<Record<string, HeaderValue>>, body: Buffer, truncated: boolean) => AsideAnswer;

export type Send = (request: UpstreamRequest, handler: ForwardHandler) => void;

/**
 * Offered a whole answer's result (`onWhole`): when what the handler would send is the shareable
 * answer (a 200 made of the upstream's fields), it gives it here with its client fields that do
 * not depend on the request. `take` returns the finished answer the handler then writes, as
 * `onFinished` would (the trailing values are those of the head it was given), or undefined when
 * the wrapper does not take it (the handler writes its answer as usual).
 */
export interface AnswerTaker {
  /** `own`: the offering request's own fields, whose names the answer's `FieldPlan` may be made for. */
  take(status: number, headers: Readonly<Record<string, HeaderValue | number>>, body: Buffer, own?: Readonly<Record<string, HeaderValue>>): FinishedAnswer | undefined;
}

/**
 * A `send` around the composed `send`, which the composition root hands in (`forwarding()`): it
 * may answer a call itself, with the two calls above, and says which fields are its own.
 */
export interface SendWrapper {
  /** Given the composed `send`, the one that wraps each call. */
  readonly wrap: (next: Send) => Send;
  /** The fields written after a finished answer's, in this order (`onFinished`: their values come with each). */
  readonly trailing: readonly string[];
  /**
   * Fields it sets on an upstream head it passes on, as its account of the call: they are the
   * gateway's, not the upstream's, so an answer the response phase rewrote keeps them.
   */
  readonly account: readonly string[];
}

/** How a call ended, for the parts' `settle`: an answer came whole, it failed, or the handler left it. */
export type Outcome = 'answered' | 'failed' | 'abandoned';

/** A call class: the base `Call`, or one made of layers' parts. */
export type CallClass = new (handler: ForwardHandler, request: UpstreamRequest, below: Send) => Call;

/**
 * One layer. A part sees the callbacks of every attempt only when it is outside the retry layer:
 * the retry's callbacks enter at the retry's part (`forwarding()` lists the retry last).
 */
export interface Layer {
  /** Its part of the call: a subclass of `Outer`, the call made of the layers outside this one. */
  readonly extend: (Outer: CallClass) => CallClass;
  /** Asked before a call is made: an error refuses it (`onRefused`), and no call is made. */
  readonly admit?: () => GatewayError | undefined;
}

/**
 * One upstream call with every layer's part: what the transport calls (the handler of the layer
 * below all layers) and what the handler holds as its control. Passes everything through by
 * default. Once the call ended (`done`: answered, failed, or abandoned by the handler), nothing more
 * is passed on, so a late callback from the transport never reaches the exchange.
 *
 * The handler gets the call as its control when the call is made, not when the transport reports
 * its own start: a client that leaves while the connection is still opening can then abandon the
 * call, and every part hears of it (the breaker, the deadline lists).
 */
export class Call implements ForwardHandler, UpstreamControl {
  /** Where pause, resume and abort go: the transport's control, once it started. */
  control: UpstreamControl | undefined = undefined;
  done = false;

  constructor(
    readonly handler: ForwardHandler,
    readonly request: UpstreamRequest,
    /** The transport's `send`: where the call (and a retry) goes. */
    readonly below: Send,
  ) {}

  /** Makes the call: a part that must act first (a deadline starts) does so, then calls `super.begin()`. */
  begin(): void {
    this.below(this.request, this);
  }

  /** The call ended, once, by any path: each part lets go of what it holds, then calls `super.settle`. */
  protected settle(_outcome: Outcome): void {}

  /** Ends the call for every part: false when it had ended already. */
  private end(outcome: Outcome): boolean {
    if (this.done) return false;
    this.done = true;
    this.settle(outcome);
    return true;
  }

  /** The transport started: its control is where pause, resume and abort go. */
  onStart(control: UpstreamControl): void {
    this.control = control;
    if (this.done) control.abort();
  }

  onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    if (this.done) return 0;
    return this.handler.onHead(status, headers, errorCode);
  }

  onData(chunk: Buffer): void {
    if (!this.done) this.handler.onData(chunk);
  }

  onBody(body: Buffer, truncated: boolean): void {
    if (this.end('answered')) this.handler.onBody(body, truncated);
  }

  onEnd(): void {
    if (this.end('answered')) this.handler.onEnd();
  }

  onFailure(failure: UpstreamFailure): void {
    if (this.end('failed')) this.handler.onFailure(failure);
  }

  /**
   * A transport never refuses (a layer's `admit` does, before any call): passed on as an end that
   * tells the breaker nothing, as a refusal by `admit` does.
   */
  onRefused(err: GatewayError): void {
    if (this.end('abandoned')) this.handler.onRefused(err);
  }

  pause(): void {
    this.control?.pause();
  }

  resume(): void {
    this.control?.resume();
  }

  abort(reason?: AbortReason): void {
    this.end(reason === 'failed' ? 'failed' : 'abandoned');
    this.control?.abort(reason);
  }

  /** A part ends the call (a deadline fell due): the transport stops, the handler learns `failure`. */
  fail(failure: UpstreamFailure): void {
    if (!this.end('failed')) return;
    this.control?.abort('failed');
    this.handler.onFailure(failure);
  }
}

/**
 * `send` with `layers` around it, the first listed outermost (nearest the exchange): one call class
 * made of their parts, once; per call, the layers' `admit`, then one object.
 */
export function compose(send: Send, layers: readonly Layer[]): Send {
  if (layers.length === 0) return send;
  let Made: CallClass = Call;
  for (const layer of layers) Made = layer.extend(Made);
  const Composed = Made;
  const admits = layers.flatMap((l) => (l.admit === undefined ? [] : [l.admit]));
  const admit = admits.length === 0 ? undefined : admits.length === 1 ? admits[0] : () => admits.reduce<GatewayError | undefined>((err, a) => err ?? a(), undefined);
  return (request, handler) => {
    if (admit !== undefined) {
      const refused = admit();
      if (refused !== undefined) return handler.onRefused(refused);
    }
    start(new Composed(handler, request, send));
  };
}

/**
 * Starts `call`: the handler holds it as its control, then it is made (`begin`), unless the handler
 * abandoned it already: then no part starts a deadline and nothing is sent.
 */
export function start(call: Call): void {
  call.handler.onStart(call);
  if (!call.done) call.begin();
}
