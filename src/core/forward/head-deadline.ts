/**
 * The response-head deadline: an upstream that has not sent its status and headers `ms` after the
 * request left fails the call with `headers_timeout` (504 when nothing was sent to the client). A
 * retried read stays under the same deadline: this layer is outside the retry layer.
 */
import { REAL_CLOCK, type Clock } from '../deadlines.js';
import type { HeaderValue } from '../policy.js';
import { DeadlineLink, deadlineList } from './deadline-call.js';
import type { CallClass, Layer, Outcome } from './layer.js';

export function headDeadline(ms: number, clock: Clock = REAL_CLOCK): Layer {
  const list = deadlineList(ms, clock, 'headers_timeout');
  return {
    extend: (Outer: CallClass): CallClass =>
      class HeadDeadline extends Outer {
        readonly headLink = new DeadlineLink(this);

        override begin(): void {
          list.add(this.headLink);
          super.begin();
        }

        override onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
          list.remove(this.headLink);
          return super.onHead(status, headers, errorCode);
        }

        protected override settle(outcome: Outcome): void {
          list.remove(this.headLink);
          super.settle(outcome);
        }
      },
  };
}
