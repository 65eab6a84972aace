/**
 * The total deadline: from sending the request to the last byte of the answer, at most `ms`, however
 * steadily the upstream drips. The body idle deadline is per gap, so an upstream sending one byte
 * every 100 ms would otherwise hold a request, its connection and its buffer for ever. Past it, the
 * call fails with `total_timeout`: 504 when nothing was sent to the client yet, the client
 * connection closed when the body was streaming.
 */
import { REAL_CLOCK, type Clock } from '../deadlines.js';
import type { FailureKind } from '../upstream.js';
import { deadlineList, DeadlinedCall } from './deadline-call.js';
import type { ForwardHandler, Layer, Send } from './layer.js';

class TotalDeadline extends DeadlinedCall {
  protected get kind(): FailureKind {
    return 'total_timeout';
  }

  override onBody(body: Buffer, truncated: boolean): void {
    this.met();
    super.onBody(body, truncated);
  }

  override onEnd(): void {
    this.met();
    super.onEnd();
  }
}

export function totalDeadline(ms: number, clock: Clock = REAL_CLOCK): Layer {
  const list = deadlineList(ms, clock);
  return (next: Send): Send =>
    (request, handler: ForwardHandler) => {
      const call = new TotalDeadline(handler);
      list.add(call);
      handler.onStart(call);
      next(request, call);
    };
}
