/**
 * A circuit breaker for one upstream: after `failures` consecutive failed calls (connection errors,
 * timeouts, 502-504 answers: the rule is in src/core/forward/breaker.ts) it opens, and for
 * `coolDownMs` the gateway answers 503 at once instead of queueing clients behind a dead backend.
 * Then one request is let through (half-open): its success closes the circuit, its failure opens
 * it again. Framework-free; the exchange admits, the breaker layer accounts, whatever the engine.
 */
import { GatewayError } from './errors.js';

export interface BreakerConfig {
  readonly failures: number;
  readonly coolDownMs: number;
}

export class CircuitBreaker {
  private consecutive = 0;
  private openUntil = 0;
  private probing = false;

  constructor(
    private readonly config: BreakerConfig,
    private readonly now: () => number = Date.now,
  ) {}

  /** Undefined when a request may go upstream; else the 503 to answer (with Retry-After). */
  admit(): GatewayError | undefined {
    if (this.openUntil === 0) return undefined;
    const t = this.now();
    if (t >= this.openUntil && !this.probing) {
      this.probing = true; // half-open: this one request probes the upstream
      return undefined;
    }
    const seconds = Math.max(1, Math.ceil((this.openUntil - t) / 1000));
    return new GatewayError('service_unavailable', { message: 'The upstream service is failing: retry later.', headers: { 'retry-after': String(seconds) } });
  }

  /** Records the outcome of an exchange that went upstream. */
  record(ok: boolean): void {
    this.probing = false;
    if (ok) {
      this.consecutive = 0;
      this.openUntil = 0;
      return;
    }
    this.consecutive++;
    if (this.consecutive >= this.config.failures) this.openUntil = this.now() + this.config.coolDownMs;
  }

  /** An admitted request that ended without telling anything (its client left): frees the probe slot. */
  release(): void {
    this.probing = false;
  }

  get open(): boolean {
    return this.openUntil !== 0;
  }

  /**
   * Whether calls are refused now: open and still cooling down. After the cool-down the breaker
   * lets a probe through (half-open), so readiness must not stay 503 waiting for traffic that a
   * load balancer honouring that 503 would never send.
   */
  get rejecting(): boolean {
    return this.openUntil !== 0 && this.now() < this.openUntil;
  }
}
