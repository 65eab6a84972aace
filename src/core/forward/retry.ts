/**
 * The retry rule: a read (GET) is sent once more when its connection failed before any byte of an
 * answer (`refused` or `reset`): never createPet, never on an answer such as a 503, never after a
 * timeout, at most once. As Envoy splits them, the retry state (one per request) and each attempt
 * (one per call to the layer below) are separate objects; the attempt is what the transport calls.
 */
import type { GatewayError } from '../errors.js';
import type { HeaderValue } from '../policy.js';
import type { AbortReason, UpstreamControl, UpstreamFailure, UpstreamRequest } from '../upstream.js';
import { Wrapper, type ForwardHandler, type Layer, type Send } from './layer.js';

/** Most calls one request makes: the first and one retry. */
const MAX_ATTEMPTS = 2;

/** One call to the upstream: passes its callbacks on while it is the state's current attempt. */
class Attempt implements ForwardHandler {
  answered = false;

  constructor(private readonly state: RetryState) {}

  onStart(control: UpstreamControl): void {
    this.state.started(this, control);
  }

  onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    this.answered = true;
    return this.state.current === this ? this.state.onHead(status, headers, errorCode) : 0;
  }

  onData(chunk: Buffer): void {
    if (this.state.current === this) this.state.onData(chunk);
  }

  onBody(body: Buffer, truncated: boolean): void {
    if (this.state.current === this) this.state.onBody(body, truncated);
  }

  onEnd(): void {
    if (this.state.current === this) this.state.onEnd();
  }

  onFailure(failure: UpstreamFailure): void {
    if (this.state.current === this) this.state.failed(this, failure);
  }

  onRefused(err: GatewayError): void {
    if (this.state.current === this) this.state.onRefused(err);
  }
}

/** The retry state of one request: how many attempts were made, and which one is current. */
class RetryState extends Wrapper {
  attempts = 0;
  current: Attempt | undefined = undefined;

  constructor(
    handler: ForwardHandler,
    private readonly next: Send,
    private readonly request: UpstreamRequest,
  ) {
    super(handler);
  }

  send(): void {
    this.attempts++;
    const attempt = new Attempt(this);
    this.current = attempt;
    this.control = undefined;
    this.next(this.request, attempt);
  }

  /** An attempt started: its control is where pause, resume and abort go now. */
  started(attempt: Attempt, control: UpstreamControl): void {
    if (attempt !== this.current || this.done) {
      control.abort();
      return;
    }
    this.control = control;
  }

  failed(attempt: Attempt, failure: UpstreamFailure): void {
    if (!this.done && !attempt.answered && this.attempts < MAX_ATTEMPTS && (failure.kind === 'refused' || failure.kind === 'reset')) {
      this.send();
      return;
    }
    this.onFailure(failure);
  }

  override abort(reason?: AbortReason): void {
    this.current = undefined;
    super.abort(reason);
  }
}

/** Retries reads per the rule above; other methods pass straight through (no wrapper). */
export function retryReads(): Layer {
  return (next: Send): Send =>
    (request, handler: ForwardHandler) => {
      if (request.method !== 'GET') return next(request, handler);
      const state = new RetryState(handler, next, request);
      handler.onStart(state);
      state.send();
    };
}
