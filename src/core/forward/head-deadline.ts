/**
 * The response-head deadline: an upstream that has not sent its status and headers `ms` after the
 * request left fails the call with `headers_timeout` (504 when nothing was sent to the client).
 * One deadline list for every call (src/core/deadlines.ts): nothing per call but the wrapper. A
 * retried read stays under the same deadline: this layer sits above the retry layer.
 */
import { DeadlineList, REAL_CLOCK, type Clock, type Deadlined, type DeadlineOwner } from '../deadlines.js';
import type { HeaderValue } from '../policy.js';
import { UpstreamFailure, type AbortReason } from '../upstream.js';
import { start, Wrapper, type ForwardHandler, type Layer, type Send } from './layer.js';

class HeadDeadline extends Wrapper implements Deadlined {
  deadlinePrev: Deadlined | undefined = undefined;
  deadlineNext: Deadlined | undefined = undefined;
  deadlineAt = 0;
  deadlineList: DeadlineOwner | undefined = undefined;

  override onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    this.deadlineList?.remove(this);
    return super.onHead(status, headers, errorCode);
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
    this.fail(new UpstreamFailure('headers_timeout'));
  }
}

function headDue(call: HeadDeadline): undefined {
  call.expire();
  return undefined;
}

export function headDeadline(ms: number, clock: Clock = REAL_CLOCK): Layer {
  const list = new DeadlineList<HeadDeadline>(ms, headDue, clock);
  return (next: Send): Send =>
    (request, handler: ForwardHandler) => {
      const call = new HeadDeadline(handler);
      list.add(call);
      start(next, request, call);
    };
}
