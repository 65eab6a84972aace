/**
 * The body idle deadline: once the head arrived, the upstream may pause at most `ms` between two
 * body chunks, else the call fails with `body_timeout` (504 when nothing was sent yet; the client
 * connection is closed when the body was streaming). While the gateway itself holds the upstream
 * back (the client reads slowly: `pause`), the wait is not counted against the upstream.
 */
import { DeadlineList, REAL_CLOCK, type Clock } from '../deadlines.js';
import type { HeaderValue } from '../policy.js';
import { UpstreamFailure } from '../upstream.js';
import { DeadlineLink } from './deadline-call.js';
import type { CallClass, Layer, Outcome } from './layer.js';

/** A call's place on the idle list, with when its body last moved and whether the gateway holds it back. */
class IdleLink extends DeadlineLink {
  last = 0;
  held = false;
}

/** Due: the next due time when the body moved since (or is held back), else the call fails. */
function idleDue(link: IdleLink, now: number, ms: number): number | undefined {
  const next = link.held ? now + ms : link.last + ms;
  if (next > now) return next;
  link.call.fail(new UpstreamFailure('body_timeout'));
  return undefined;
}

export function bodyIdle(ms: number, clock: Clock = REAL_CLOCK): Layer {
  const list = new DeadlineList<IdleLink>(ms, (link, now) => idleDue(link, now, ms), clock);
  return {
    extend: (Outer: CallClass): CallClass =>
      class BodyIdle extends Outer {
        readonly idleLink = new IdleLink(this);

        override onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
          if (!this.done) {
            const link = this.idleLink;
            link.last = clock.now();
            list.add(link, link.last + ms);
          }
          return super.onHead(status, headers, errorCode);
        }

        override onData(chunk: Buffer): void {
          this.idleLink.last = clock.now();
          super.onData(chunk);
        }

        override pause(): void {
          this.idleLink.held = true;
          super.pause();
        }

        override resume(): void {
          const link = this.idleLink;
          link.held = false;
          link.last = clock.now();
          super.resume();
        }

        protected override settle(outcome: Outcome): void {
          list.remove(this.idleLink);
          super.settle(outcome);
        }
      },
  };
}
