/**
 * The total deadline: from sending the request to the last byte of the answer, at most `ms`, however
 * steadily the upstream drips. The body idle deadline is per gap, so an upstream sending one byte
 * every 100 ms would otherwise hold a request, its connection and its buffer for ever. Past it, the
 * call fails with `total_timeout`: 504 when nothing was sent to the client yet, the client
 * connection closed when the body was streaming.
 */
import { DeadlineList, REAL_CLOCK, type Clock, type Deadlined, type DeadlineOwner } from '../deadlines.js';
import { UpstreamFailure, type AbortReason } from '../upstream.js';
import { start, Wrapper, type ForwardHandler, type Layer, type Send } from './layer.js';

class TotalDeadline extends Wrapper implements Deadlined {
  deadlinePrev: Deadlined | undefined = undefined;
  deadlineNext: Deadlined | undefined = undefined;
  deadlineAt = 0;
  deadlineList: DeadlineOwner | undefined = undefined;

  override onBody(body: Buffer, truncated: boolean): void {
    this.deadlineList?.remove(this);
    super.onBody(body, truncated);
  }

  override onEnd(): void {
    this.deadlineList?.remove(this);
    super.onEnd();
  }

  override onFailure(failure: UpstreamFailure): void {
    this.deadlineList?.remove(this);
    super.onFailure(failure);
  }

  override abort(reason?: AbortReason): void {
    this.deadlineList?.remove(this);
    super.abort(reason);
  }

  expire(): void {
    this.fail(new UpstreamFailure('total_timeout'));
  }
}

function totalDue(call: TotalDeadline): undefined {
  call.expire();
  return undefined;
}

export function totalDeadline(ms: number, clock: Clock = REAL_CLOCK): Layer {
  const list = new DeadlineList<TotalDeadline>(ms, totalDue, clock);
  return (next: Send): Send =>
    (request, handler: ForwardHandler) => {
      const call = new TotalDeadline(handler);
      list.add(call);
      start(next, request, call);
    };
}
