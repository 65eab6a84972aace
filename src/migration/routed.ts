/**
 * A request routed to `next` (split and next modes, or a tester's pick). A request safe to repeat
 * (GET, HEAD) has `next`'s answer held whole first: when `next` fails it (no connection, reset,
 * timeout, a 5xx, an answer that breaks the interface), legacy answers it instead and the fallback
 * is counted; nothing of `next`'s answer has reached the client then. Any other request (a
 * createPet) streams through as it comes: it is never repeated, as `next` may have acted on it. A
 * call `next`'s circuit breaker refused was never sent, so legacy answers it whatever its method.
 */
import type { ForwardHandler, Send } from '../core/forward/index.js';
import type { AbortReason, UpstreamControl, UpstreamFailure, UpstreamRequest } from '../core/upstream.js';
import type { HeaderValue } from '../core/policy.js';
import type { ApiOperation } from '../api/model.js';
import { contractRule } from './contract.js';
import type { FallbackReason, Recorder } from './types.js';
import { TRACE_EVENTS } from '../core/trace.js';

/** A failure kind in the words of a fallback reason. */
function reasonOf(kind: string): FallbackReason {
  if (kind.endsWith('timeout')) return 'timeout';
  return kind === 'refused' || kind === 'reset' || kind === 'invalid_response' || kind === 'tls' ? kind : 'reset';
}

export class Routed implements ForwardHandler, UpstreamControl {
  private control: UpstreamControl | undefined = undefined;
  /** Abandoned by the client, ended, or handed to legacy: nothing more of `next` counts. */
  private done = false;
  private status = 0;
  private headers: Readonly<Record<string, HeaderValue>> = {};
  private errorCode: string | undefined = undefined;
  private readonly t0 = performance.now();

  constructor(
    private readonly handler: ForwardHandler,
    /** The request as legacy gets it, for a fallback. */
    private readonly request: UpstreamRequest,
    private readonly op: ApiOperation,
    /** Safe to repeat: held whole, and answered by legacy when `next` fails it. */
    private readonly safe: boolean,
    private readonly legacy: Send,
    private readonly tally: Recorder,
    /** Most bytes of `next`'s answer held (its maxBufferedBytes). */
    private readonly max: number,
  ) {}

  /** Sends `nextRequest` to `next`: the handler holds this call as its control first. */
  start(next: Send, nextRequest: UpstreamRequest): void {
    this.handler.onStart(this);
    if (!this.done) next(nextRequest, this);
  }

  // ---- The handler's control -----------------------------------------------------------------

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

  // ---- `next`'s handler --------------------------------------------------------------------------

  onStart(control: UpstreamControl): void {
    this.control = control;
    if (this.done) control.abort();
  }

  onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    if (this.done) return 0;
    if (!this.safe) return this.handler.onHead(status, headers, errorCode);
    this.status = status;
    this.headers = headers;
    this.errorCode = errorCode;
    return this.max;
  }

  onData(chunk: Buffer): void {
    if (!this.done) this.handler.onData(chunk);
  }

  onEnd(): void {
    if (this.done) return;
    if (this.safe) return this.onBody(Buffer.alloc(0), false);
    this.answered();
    this.handler.onEnd();
  }

  onBody(body: Buffer, truncated: boolean): void {
    if (this.done) return;
    if (!this.safe) {
      this.answered();
      return this.handler.onBody(body, truncated);
    }
    const status = this.status;
    const rule = contractRule(this.op, status, this.headers, body, truncated);
    if (rule !== undefined) this.tally.nextViolation(this.op.id, rule);
    if (rule !== undefined || truncated) return this.fallBack('contract');
    if (status >= 500) return this.fallBack('server_error');
    this.answered();
    // The held answer, as the transport would have given it.
    const hold = this.handler.onHead(status, this.headers, this.errorCode);
    if (hold > 0) this.handler.onBody(body.length > hold ? body.subarray(0, hold) : body, body.length > hold);
    else {
      if (body.length > 0) this.handler.onData(body);
      this.handler.onEnd();
    }
  }

  onFailure(failure: UpstreamFailure): void {
    if (this.done) return;
    this.tally.nextFailed(this.op.id, failure.kind.endsWith('timeout') ? 'timeout' : failure.kind);
    if (this.safe) return this.fallBack(reasonOf(failure.kind));
    this.done = true;
    this.tally.routed(this.op.id, 'next', undefined);
    this.handler.onFailure(failure);
  }

  onRefused(): void {
    if (this.done) return;
    this.tally.nextFailed(this.op.id, 'open_circuit');
    this.fallBack('open_circuit');
  }

  private answered(): void {
    if (this.safe) this.done = true;
    this.tally.routed(this.op.id, 'next', performance.now() - this.t0);
  }

  /** Legacy answers instead: the handler's control becomes legacy's call. */
  private fallBack(reason: FallbackReason): void {
    this.done = true;
    this.control?.abort(reason === 'contract' || reason === 'server_error' ? undefined : 'failed');
    this.tally.fallback(this.op.id, reason);
    this.request.exchange?.trace?.event(TRACE_EVENTS.fallback, { 'gateway.fallback.reason': reason });
    this.legacy(this.request, this.handler);
  }
}
