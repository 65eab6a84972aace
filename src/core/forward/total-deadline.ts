/**
 * The total deadline: from sending the request to the last byte of the answer, at most `ms`, however
 * steadily the upstream drips. The body idle deadline is per gap, so an upstream sending one byte
 * every 100 ms would otherwise hold a request, its connection and its buffer for ever. Past it, the
 * call fails with `total_timeout`: 504 when nothing was sent to the client yet, the client
 * connection closed when the body was streaming.
 */
import { REAL_CLOCK, type Clock } from '../deadlines.js';
import { DeadlineLink, deadlineList } from './deadline-call.js';
import type { CallClass, Layer, Outcome } from './layer.js';

export function totalDeadline(ms: number, clock: Clock = REAL_CLOCK): Layer {
  const list = deadlineList(ms, clock, 'total_timeout');
  return {
    extend: (Outer: CallClass): CallClass =>
      class TotalDeadline extends Outer {
        readonly totalLink = new DeadlineLink(this);

        override begin(): void {
          list.add(this.totalLink);
          super.begin();
        }

        protected override settle(outcome: Outcome): void {
          list.remove(this.totalLink);
          super.settle(outcome);
        }
      },
  };
}
