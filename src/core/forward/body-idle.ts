/**
 * The body idle deadline: once the head arrived, the upstream may pause at most `ms` between two
 * body chunks, else the call fails with `body_timeout` (504 when nothing was sent yet; the client
 * connection is closed when the body was streaming). While the gateway itself holds the upstream
 * back (the client reads slowly: `pause`), the wait is not counted against the upstream.
 */
import { DeadlineList, REAL_CLOCK, type Clock, type Deadlined, type DeadlineOwner } from '../deadlines.js';
import type { HeaderValue } from '../policy.js';
import { UpstreamFailure, type AbortReason } from '../upstream.js';
import { Wrapper, type ForwardHandler, type Layer, type Send } from './layer.js';

class BodyIdle extends Wrapper implements Deadlined {
  deadlinePrev: Deadlined | undefined = undefined;
  deadlineNext: Deadlined | undefined = undefined;
  deadlineAt = 0;
  deadlineList: DeadlineOwner | undefined = undefined;
  /** When the body last moved, and whether the gateway holds it back. */
  last = 0;
  held = false;

  constructor(
    handler: ForwardHandler,
    private readonly list: DeadlineList<BodyIdle>,
  ) {
    super(handler);
  }

  override onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    if (!this.done) {
      this.last = this.list.clock.now();
      this.list.add(this, this.last + this.list.ms);
    }
    return super.onHead(status, headers, errorCode);
  }

  override onData(chunk: Buffer): void {
    this.last = this.list.clock.now();
    super.onData(chunk);
  }

  override onBody(body: Buffer, truncated: boolean): void {
    this.list.remove(this);
    super.onBody(body, truncated);
  }

  override onEnd(): void {
    this.list.remove(this);
    super.onEnd();
  }

  override onFailure(failure: UpstreamFailure): void {
    this.list.remove(this);
    super.onFailure(failure);
  }

  override pause(): void {
    this.held = true;
    super.pause();
  }

  override resume(): void {
    this.held = false;
    this.last = this.list.clock.now();
    super.resume();
  }

  override abort(reason?: AbortReason): void {
    this.list.remove(this);
    super.abort(reason);
  }

  /** Due: the next due time when the body moved since (or is held back), else the call fails. */
  due(now: number): number | undefined {
    const ms = this.list.ms;
    const next = this.held ? now + ms : this.last + ms;
    if (next > now) return next;
    this.fail(new UpstreamFailure('body_timeout'));
    return undefined;
  }
}

function bodyDue(call: BodyIdle, now: number): number | undefined {
  return call.due(now);
}

export function bodyIdle(ms: number, clock: Clock = REAL_CLOCK): Layer {
  const list = new DeadlineList<BodyIdle>(ms, bodyDue, clock);
  return (next: Send): Send =>
    (request, handler: ForwardHandler) => {
      const call = new BodyIdle(handler, list);
      handler.onStart(call);
      next(request, call);
    };
}
