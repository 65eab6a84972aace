/**
 * Bounded buffering: when the handler asks for the body held (a policy must read it: a list, an
 * error page), the chunks are kept up to the cap the handler gave and delivered whole by `onBody`;
 * past the cap, what was kept is delivered as truncated and the rest is not read (the call below is
 * stopped). A body the handler does not ask for streams through untouched.
 */
import type { HeaderValue } from '../policy.js';
import { start, Wrapper, type ForwardHandler, type Layer, type Send } from './layer.js';

class Buffering extends Wrapper {
  private chunks: Buffer[] | undefined = undefined;
  private size = 0;
  private cap = 0;

  override onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    const cap = super.onHead(status, headers, errorCode);
    if (cap > 0 && !this.done) {
      this.cap = cap;
      this.chunks = [];
    }
    return 0;
  }

  override onData(chunk: Buffer): void {
    const chunks = this.chunks;
    if (chunks === undefined) return super.onData(chunk);
    if (this.done) return;
    if (this.size + chunk.length > this.cap) {
      chunks.push(chunk.subarray(0, this.cap - this.size));
      this.size = this.cap;
      this.control?.abort();
      this.deliver(true);
      return;
    }
    chunks.push(chunk);
    this.size += chunk.length;
  }

  override onEnd(): void {
    if (this.chunks === undefined) return super.onEnd();
    this.deliver(false);
  }

  private deliver(truncated: boolean): void {
    const chunks = this.chunks;
    if (chunks === undefined || this.done) return;
    this.chunks = undefined;
    const first = chunks[0];
    const body = chunks.length === 1 && first !== undefined ? first : Buffer.concat(chunks, this.size);
    super.onBody(body, truncated);
  }
}

export function buffering(): Layer {
  return (next: Send): Send =>
    (request, handler: ForwardHandler) => {
      start(next, request, new Buffering(handler));
    };
}
