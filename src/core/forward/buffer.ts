/**
 * Bounded buffering: when the handler asks for the body held (a policy must read it: a list, an
 * error page), the chunks are kept up to the cap the handler gave and delivered whole by `onBody`;
 * past the cap, what was kept is delivered as truncated and the rest is not read (the call below is
 * stopped). A body the handler does not ask for streams through untouched.
 */
import type { HeaderValue } from '../policy.js';
import { Wrapper, type ForwardHandler, type Layer, type Send } from './layer.js';

/** No chunk yet: the body so far is empty. */
const EMPTY = Buffer.alloc(0);

class Buffering extends Wrapper {
  /** Holding: the body's first chunk (most answers arrive in one), and the later ones, if any. */
  private holding = false;
  private first: Buffer = EMPTY;
  private rest: Buffer[] | undefined = undefined;
  private size = 0;
  private cap = 0;

  override onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    const cap = super.onHead(status, headers, errorCode);
    if (cap > 0 && !this.done) {
      this.cap = cap;
      this.holding = true;
    }
    return 0;
  }

  override onData(chunk: Buffer): void {
    if (!this.holding) return super.onData(chunk);
    if (this.done) return;
    if (this.size + chunk.length > this.cap) {
      this.keep(chunk.subarray(0, this.cap - this.size));
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

  private keep(chunk: Buffer): void {
    if (this.size === 0) this.first = chunk;
    else (this.rest ??= [this.first]).push(chunk);
    this.size += chunk.length;
  }

  private deliver(truncated: boolean): void {
    if (!this.holding || this.done) return;
    this.holding = false;
    // One chunk (the common answer) is delivered as it is: no array, no copy.
    const body = this.rest === undefined ? this.first : Buffer.concat(this.rest, this.size);
    this.first = EMPTY;
    this.rest = undefined;
    super.onBody(body, truncated);
  }
}

export function buffering(): Layer {
  return (next: Send): Send =>
    (request, handler: ForwardHandler) => {
      const call = new Buffering(handler);
      handler.onStart(call);
      next(request, call);
    };
}
