/**
 * Breaker accounting: the circuit breaker (src/core/breaker.ts) learns the outcome of each call
 * once: a failure of the upstream, a success, or nothing (the client left, or the gateway itself
 * failed: that tells nothing of the upstream, and frees the half-open probe). Admission (the 503
 * while open) is taken here too, when the call is about to be sent, below a wrapper of send: an
 * answer the wrapper gives without a call never asks the breaker, and the wrapper hears of a
 * refusal (`onRefused`) and may still answer it itself. A refused call is no outcome.
 *
 * Only failures that are not one consumer's doing count, because the breaker refuses everyone:
 * the connection refused or reset, a timeout, an answer that is not HTTP, and 502, 503 or 504
 * (the upstream, or what stands before it, says it cannot serve: RFC 9110 section 15.6). A 4xx is
 * the request's fault, and a 500 may be one request's (a pet the backend cannot store): either
 * would let one consumer shut the gateway for all.
 */
import type { CircuitBreaker } from '../breaker.js';
import type { HeaderValue } from '../policy.js';
import type { CallClass, Layer, Outcome } from './layer.js';

/** Whether an upstream answer with `status` counts as the upstream failing. */
export function failingStatus(status: number): boolean {
  return status >= 502 && status <= 504;
}

export function breakerAccounting(breaker: CircuitBreaker): Layer {
  return {
    admit: () => breaker.admit(),
    extend: (Outer: CallClass): CallClass =>
      class BreakerAccount extends Outer {
        breakerStatus = 0;

        override onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
          this.breakerStatus = status;
          return super.onHead(status, headers, errorCode);
        }

        /** The outcome, once: an answer by its status, a failure, or nothing for an abandoned call. */
        protected override settle(outcome: Outcome): void {
          if (outcome === 'abandoned') breaker.release();
          else breaker.record(outcome === 'answered' && !failingStatus(this.breakerStatus));
          super.settle(outcome);
        }
      },
  };
}
