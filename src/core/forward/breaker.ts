/**
 * Breaker accounting: the circuit breaker (src/core/breaker.ts) learns the outcome of each call
 * once: a failure of the upstream, a success, or nothing (the client left, or the gateway itself
 * failed: that tells nothing of the upstream, and frees the half-open probe). Admission (the 503
 * while open) is taken here too, when the call is about to be sent, below the response cache: a
 * hit never asks the breaker, and a refused miss may still be answered from a stale copy
 * (RFC 5861: an open breaker is an error reaching the origin). A refused call is no outcome.
 *
 * Only failures that are not one consumer's doing count, because the breaker refuses everyone:
 * the connection refused or reset, a timeout, an answer that is not HTTP, and 502, 503 or 504
 * (the upstream, or what stands before it, says it cannot serve: RFC 9110 section 15.6). A 4xx is
 * the request's fault, and a 500 may be one request's (a pet the backend cannot store): either
 * would let one consumer shut the gateway for all.
 */
import type { CircuitBreaker } from '../breaker.js';
import type { HeaderValue } from '../policy.js';
import type { AbortReason, UpstreamFailure } from '../upstream.js';
import { Wrapper, type ForwardHandler, type Layer, type Send } from './layer.js';

/** Whether an upstream answer with `status` counts as the upstream failing. */
export function failingStatus(status: number): boolean {
  return status >= 502 && status <= 504;
}

class BreakerAccount extends Wrapper {
  private status = 0;
  private told = false;

  constructor(
    handler: ForwardHandler,
    private readonly breaker: CircuitBreaker,
  ) {
    super(handler);
  }

  private tell(ok: boolean): void {
    if (this.told) return;
    this.told = true;
    this.breaker.record(ok);
  }

  override onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    this.status = status;
    return super.onHead(status, headers, errorCode);
  }

  override onBody(body: Buffer, truncated: boolean): void {
    if (!this.done) this.tell(!failingStatus(this.status));
    super.onBody(body, truncated);
  }

  override onEnd(): void {
    if (!this.done) this.tell(!failingStatus(this.status));
    super.onEnd();
  }

  override onFailure(failure: UpstreamFailure): void {
    if (!this.done) this.tell(false);
    super.onFailure(failure);
  }

  override abort(reason?: AbortReason): void {
    if (reason === 'failed') this.tell(false);
    else if (!this.told) {
      this.told = true;
      this.breaker.release();
    }
    super.abort(reason);
  }
}

export function breakerAccounting(breaker: CircuitBreaker): Layer {
  return (next: Send): Send =>
    (request, handler: ForwardHandler) => {
      const closed = breaker.admit();
      if (closed !== undefined) return handler.onRefused(closed);
      const call = new BreakerAccount(handler, breaker);
      handler.onStart(call);
      next(request, call);
    };
}
