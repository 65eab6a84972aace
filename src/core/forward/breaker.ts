/**
 * Breaker accounting: the circuit breaker (src/core/breaker.ts) learns the outcome of each call
 * once: a failure of the upstream, a success, or nothing (the client left: that tells nothing of
 * the upstream, and frees the half-open probe). Admission (the 503 while open) is the exchange's
 * decision, taken before the call.
 */
import type { CircuitBreaker } from '../breaker.js';
import type { HeaderValue } from '../policy.js';
import type { AbortReason, UpstreamFailure } from '../upstream.js';
import { Wrapper, type ForwardHandler, type Layer, type Send } from './layer.js';

/** Whether an upstream answer with `status` counts as the upstream failing. */
export function failingStatus(status: number): boolean {
  return status >= 500;
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
      next(request, new BreakerAccount(handler, breaker));
    };
}
