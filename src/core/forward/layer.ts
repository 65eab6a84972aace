/**
 * Forwarding as layers around the Upstream port, the way undici composes interceptors
 * (`dispatch => dispatch`, each wrapping the handler it is given): a layer takes the `send` of the
 * layer below it (in the end, the transport's) and returns a `send` that wraps the handler in one
 * small object of its own. The deadlines, the retry rule, breaker accounting and bounded buffering
 * are each one such layer; an upstream gets only the layers it needs (the in-process reference
 * backend gets none).
 *
 * A layer's `send` is made once per pipeline; per request it allocates its wrapper and nothing
 * else (no closure), and each callback costs one method call.
 */
import type { GatewayError } from '../errors.js';
import type { HeaderValue } from '../policy.js';
import type { CacheEntry } from './cache.js';
import type { AbortReason, UpstreamControl, UpstreamFailure, UpstreamHandler, UpstreamRequest } from '../upstream.js';

/**
 * Bodies up to this size end the response as one latin1 string (the same bytes): node joins a
 * string with the response head, so head and body leave in one write instead of a writev of two
 * buffers. That pays for the copy into a string only while the body is small: getPet's body is
 * faster as a string, listPets' bodies (limit=20 and limit=100) faster as buffers; larger limits
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
   * The two calls of the response cache, which is outermost: only the handler above it (the
   * exchange) has them; a handler without them is not answered from the cache (it is passed
   * through). A whole upstream answer the cache holds to store: the handler runs its response
   * phase on it as on a held body, and offers `keeper` what it would send (see `AnswerKeeper`).
   * Instead of `onHead`; nothing follows.
   */
  onAnswer?(status: number, headers: Readonly<Record<string, HeaderValue>>, body: Buffer, keeper: AnswerKeeper): void;
  /**
   * The response cache answers with a finished answer it kept (a hit, a stale copy, or a waiter of
   * the miss that filled it): written as it is, with the request's own fields and these two.
   * `called`: whether a call went upstream for this request (a miss, its waiters, a stale copy for a
   * failed call), or not (a fresh hit, a stale copy while the breaker refuses calls).
   * Instead of `onHead`; nothing follows.
   */
  onStored?(entry: CacheEntry, age: string, cacheStatus: string, called: boolean): void;
  /**
   * The call was never sent: the gateway refuses it (the circuit breaker is open) and `err` is
   * the answer. Instead of `onStart`; nothing follows. Not an upstream failure: no observer counts it as one.
   */
  onRefused(err: GatewayError): void;
}

export type Send = (request: UpstreamRequest, handler: ForwardHandler) => void;

/**
 * Offered with a whole answer by the response cache: the handler runs its response phase, and when
 * what it would send is the shareable answer (a 200 made of the upstream's fields), gives it here
 * with its client fields that do not depend on the request. The cache stores that, and answers
 * with it: `keep` returns the entry the handler then writes (`onStored`), or undefined when the
 * cache does not keep it (the handler writes its answer as usual).
 */
export interface AnswerKeeper {
  /** `own`: the keeping request's own fields, whose names the entry's `HitPlan` is made for. */
  keep(status: number, headers: Readonly<Record<string, HeaderValue | number>>, body: Buffer, own?: Readonly<Record<string, HeaderValue>>): CacheEntry | undefined;
}

/** One layer: given the `send` below it, the `send` that wraps each call. */
export type Layer = (next: Send) => Send;

/**
 * The common part of a layer's per-call wrapper: it is the handler the layer below calls and the
 * control the layer above holds, and by default passes everything through. Once the call ended for
 * this layer (`done`: it failed the call, the handler aborted it, or it ended), nothing more is
 * passed on, so a late callback from below never reaches the exchange.
 *
 * The handler above gets the wrapper as its control when the call starts (`start`), not when the
 * transport reports its own start: a client that leaves while the connection is still opening
 * can then abandon the call, and every layer hears of it (the breaker, the deadline lists).
 */
export class Wrapper implements ForwardHandler, UpstreamControl {
  control: UpstreamControl | undefined = undefined;
  done = false;

  constructor(readonly handler: ForwardHandler) {}

  /** The layer below started: its control is where pause, resume and abort go. */
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
    if (this.done) return;
    this.done = true;
    this.handler.onBody(body, truncated);
  }


  onEnd(): void {
    if (this.done) return;
    this.done = true;
    this.handler.onEnd();
  }

  onFailure(failure: UpstreamFailure): void {
    if (this.done) return;
    this.done = true;
    this.handler.onFailure(failure);
  }

  onRefused(err: GatewayError): void {
    if (this.done) return;
    this.done = true;
    this.handler.onRefused(err);
  }

  pause(): void {
    this.control?.pause();
  }

  resume(): void {
    this.control?.resume();
  }

  abort(reason?: AbortReason): void {
    this.done = true;
    this.control?.abort(reason);
  }

  /** Ends the call from this layer: the layers below and the transport stop, the handler learns `failure`. */
  protected fail(failure: UpstreamFailure): void {
    if (this.done) return;
    this.done = true;
    this.control?.abort('failed');
    this.handler.onFailure(failure);
  }
}

/**
 * Starts one call through `wrapper`: the handler holds the wrapper as its control, then the layer
 * below gets the call. The layers every call passes write these two lines out in their own `send`
 * instead: there each call site sees one handler class and one `next`, which V8 inlines, while
 * the sites of this one shared function see every layer's.
 */
export function start(next: Send, request: UpstreamRequest, wrapper: Wrapper): void {
  wrapper.handler.onStart(wrapper);
  next(request, wrapper);
}

/** `send` with `layers` around it, the first listed outermost (nearest the exchange). */
export function compose(send: Send, layers: readonly Layer[]): Send {
  return layers.reduceRight<Send>((inner, layer) => layer(inner), send);
}
