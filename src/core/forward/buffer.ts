/**
 * Bounded buffering: when the handler asks for the body held (a policy must read it: a list, an
 * error page), the chunks are kept up to the cap the handler gave and delivered whole by `onBody`;
 * past the cap, what was kept is delivered as truncated and the rest is not read (the call below is
 * stopped). A body the handler does not ask for streams through untouched.
 */
import type { HeaderValue } from '../policy.js';
import type { CallClass, Layer, Outcome } from './layer.js';

/** No chunk yet: the body so far is empty. */
const EMPTY = Buffer.alloc(0);

export function buffering(): Layer {
  return {
    extend: (Outer: CallClass): CallClass =>
      class Buffering extends Outer {
        /** Holding: the body's first chunk (most answers arrive in one), and the later ones, if any. */
        holding = false;
        heldFirst: Buffer = EMPTY;
        heldRest: Buffer[] | undefined = undefined;
        heldSize = 0;
        holdCap = 0;

        override onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
          const cap = super.onHead(status, headers, errorCode);
          if (cap > 0 && !this.done) {
            this.holdCap = cap;
            this.holding = true;
          }
          return 0;
        }

        override onData(chunk: Buffer): void {
          if (!this.holding) return super.onData(chunk);
          if (this.done) return;
          if (this.heldSize + chunk.length > this.holdCap) {
            this.keep(chunk.subarray(0, this.holdCap - this.heldSize));
            this.control?.abort();
            this.deliver(true);
            return;
          }
          this.keep(chunk);
        }

        override onEnd(): void {
          if (!this.holding) return super.onEnd();
          this.deliver(false);
        }

        protected override settle(outcome: Outcome): void {
          this.holding = false;
          this.heldFirst = EMPTY;
          this.heldRest = undefined;
          super.settle(outcome);
        }

        keep(chunk: Buffer): void {
          if (this.heldSize === 0) this.heldFirst = chunk;
          else (this.heldRest ??= [this.heldFirst]).push(chunk);
          this.heldSize += chunk.length;
        }

        deliver(truncated: boolean): void {
          if (!this.holding || this.done) return;
          // One chunk (the common answer) is delivered as it is: no array, no copy.
          const body = this.heldRest === undefined ? this.heldFirst : Buffer.concat(this.heldRest, this.heldSize);
          super.onBody(body, truncated);
        }
      },
  };
}
