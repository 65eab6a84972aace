/**
 * The response-head deadline: an upstream that has not sent its status and headers `ms` after the
 * request left fails the call with `headers_timeout` (504 when nothing was sent to the client). A
 * retried read stays under the same deadline: this layer sits above the retry layer.
 */
import { REAL_CLOCK, type Clock } from '../deadlines.js';
import type { HeaderValue } from '../policy.js';
import type { FailureKind } from '../upstream.js';
import { deadlineList, DeadlinedCall } from './deadline-call.js';
import type { ForwardHandler, Layer, Send } from './layer.js';

class HeadDeadline extends DeadlinedCall {
  protected get kind(): FailureKind {
    return 'headers_timeout';
  }

  override onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    this.met();
    return super.onHead(status, headers, errorCode);
  }
}

export function headDeadline(ms: number, clock: Clock = REAL_CLOCK): Layer {
  const list = deadlineList(ms, clock);
  return (next: Send): Send =>
    (request, handler: ForwardHandler) => {
      const call = new HeadDeadline(handler);
      list.add(call);
      handler.onStart(call);
      next(request, call);
    };
}
