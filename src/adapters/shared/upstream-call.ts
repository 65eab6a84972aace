/**
 * The bookkeeping of one upstream call, the same in every adapter: the response-headers deadline,
 * and what the circuit breaker learns of it, once, when the exchange ends. A success is a complete
 * answer below 500; a failure is a transport error, a timeout, a 5xx, or a body that stalls or dies.
 * A client that hangs up tells nothing about the upstream: the call is abandoned, not failed.
 */
import type { Readable } from 'node:stream';
import type { CircuitBreaker } from '../../core/breaker.js';

export class UpstreamCall {
  private ended = false;
  private readonly deadline: NodeJS.Timeout;

  /**
   * @param onTimeout runs when no response headers arrived within `headersMs` (undici checks
   *   timeouts over a second on a 500 ms clock, http-proxy-3 1.x has none: this timer is exact).
   */
  constructor(
    private readonly breaker: CircuitBreaker | undefined,
    headersMs: number,
    onTimeout: () => void,
  ) {
    this.deadline = setTimeout(() => {
      if (this.ended) return;
      this.finish(false);
      onTimeout();
    }, headersMs);
  }

  /** True once the call has ended (answered, failed, timed out or abandoned). */
  get settled(): boolean {
    return this.ended;
  }

  /** The response headers arrived: the headers deadline no longer applies. */
  headersArrived(): void {
    clearTimeout(this.deadline);
  }

  /** The exchange ended; the breaker records it once. */
  finish(ok: boolean): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.deadline);
    this.breaker?.record(ok);
  }

  /** The client went away before the end: nothing is recorded against the upstream. */
  abandon(): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.deadline);
    this.breaker?.release();
  }

  /** A streamed body: the call ends with it, well when it ends, badly when it breaks off. */
  watch(stream: Readable, status: number): void {
    stream.once('end', () => this.finish(status < 500));
    stream.once('error', () => this.finish(false));
    stream.once('close', () => this.finish(false)); // after 'end' this is a no-op
  }
}
