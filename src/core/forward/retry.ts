/**
 * The retry rule: a read (GET) is sent once more when its connection failed before any byte of an
 * answer (`refused` or `reset`): never a write, never on an answer such as a 503, never after a
 * timeout, at most once. As Envoy splits them, the retry state (this layer's part of the call) and
 * the retry (the second call to the transport, `Retry`) are separate; the first call reports to the state.
 */
import type { GatewayError } from '../errors.js';
import type { HeaderValue } from '../policy.js';
import type { UpstreamControl, UpstreamFailure } from '../upstream.js';
import type { CallClass, ForwardHandler, Layer } from './layer.js';

/** What the retry reports to: the retry state of its call. */
interface RetryState {
  retryStarted(control: UpstreamControl): void;
  relayHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number;
  relayData(chunk: Buffer): void;
  relayBody(body: Buffer, truncated: boolean): void;
  relayEnd(): void;
  relayFailure(failure: UpstreamFailure): void;
  relayRefused(err: GatewayError): void;
}

/**
 * The second call to the upstream, the retry: passes its callbacks on to the state. (The first
 * call reports to the call object itself, so a request that is not retried, nearly all, costs no
 * object here.)
 */
class Retry implements ForwardHandler {
  constructor(private readonly state: RetryState) {}

  onStart(control: UpstreamControl): void {
    this.state.retryStarted(control);
  }

  onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    return this.state.relayHead(status, headers, errorCode);
  }

  onData(chunk: Buffer): void {
    this.state.relayData(chunk);
  }

  onBody(body: Buffer, truncated: boolean): void {
    this.state.relayBody(body, truncated);
  }

  onEnd(): void {
    this.state.relayEnd();
  }

  onFailure(failure: UpstreamFailure): void {
    this.state.relayFailure(failure);
  }

  onRefused(err: GatewayError): void {
    this.state.relayRefused(err);
  }
}

/**
 * The retry state of one request, and the handler of its first call. Once the retry is sent, what
 * the first call still reports (a late callback) is ignored: only the retry's callbacks pass.
 */
export function retryReads(): Layer {
  return {
    extend: (Outer: CallClass): CallClass =>
      class RetryReads extends Outer implements RetryState {
        /** The first call got a head: a failure after it is not retried. */
        answered = false;
        retry: Retry | undefined = undefined;

        // ---- The first call ------------------------------------------------------------------

        override onStart(control: UpstreamControl): void {
          if (this.retry !== undefined) return control.abort();
          super.onStart(control);
        }

        override onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
          this.answered = true;
          return this.retry === undefined ? super.onHead(status, headers, errorCode) : 0;
        }

        override onData(chunk: Buffer): void {
          if (this.retry === undefined) super.onData(chunk);
        }

        override onBody(body: Buffer, truncated: boolean): void {
          if (this.retry === undefined) super.onBody(body, truncated);
        }

        override onEnd(): void {
          if (this.retry === undefined) super.onEnd();
        }

        override onRefused(err: GatewayError): void {
          if (this.retry === undefined) super.onRefused(err);
        }

        override onFailure(failure: UpstreamFailure): void {
          if (this.retry !== undefined) return;
          if (!this.done && !this.answered && this.request.method === 'GET' && (failure.kind === 'refused' || failure.kind === 'reset')) {
            // The one retry (at most two calls per request): its control is where pause, resume and
            // abort go once it starts.
            this.retry = new Retry(this);
            this.control = undefined;
            this.below(this.request, this.retry);
            return;
          }
          super.onFailure(failure);
        }

        // ---- The retry (through Retry) -------------------------------------------------------

        retryStarted(control: UpstreamControl): void {
          super.onStart(control);
        }

        relayHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
          return super.onHead(status, headers, errorCode);
        }

        relayData(chunk: Buffer): void {
          super.onData(chunk);
        }

        relayBody(body: Buffer, truncated: boolean): void {
          super.onBody(body, truncated);
        }

        relayEnd(): void {
          super.onEnd();
        }

        relayFailure(failure: UpstreamFailure): void {
          super.onFailure(failure);
        }

        relayRefused(err: GatewayError): void {
          super.onRefused(err);
        }
      },
  };
}
