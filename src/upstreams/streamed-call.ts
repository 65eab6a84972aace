/**
 * One call of a transport that hands its response over as a node Readable (http-proxy-3's
 * IncomingMessage, reply-from's undici body stream): the head, then the body's chunks, its end or
 * its error, fed to the exchange's handler; pause, resume and abort act on that stream.
 */
import type { Readable } from 'node:stream';
import { UpstreamFailure, type FailureKind, type UpstreamControl, type UpstreamHandler } from '../core/upstream.js';
import { failureKind } from './errors.js';

/** Where a response body keeps its call, for the listeners every call shares (no closures per call). */
const CALL = Symbol('petstore-gateway streamed call');
type WithCall = Readable & { [CALL]: StreamedCall };

function onBodyData(this: WithCall, chunk: Buffer): void {
  const call = this[CALL];
  if (!call.stopped) call.handler.onData(chunk);
}

function onBodyEnd(this: WithCall): void {
  const call = this[CALL];
  if (call.stopped) return;
  call.stopped = true;
  call.handler.onEnd();
}

function onBodyError(this: WithCall, err: Error): void {
  this[CALL].fail(err);
}

/** The call a body was fed to, for a transport's own shared listeners on that body. */
export function callOfBody(body: Readable): StreamedCall {
  return (body as WithCall)[CALL];
}

export class StreamedCall implements UpstreamControl {
  protected body: Readable | undefined;
  stopped = false;

  constructor(
    readonly handler: UpstreamHandler,
    /** The library's error codes as failure kinds (node's socket codes are the fallback). */
    private readonly kinds: ReadonlyMap<string, FailureKind>,
  ) {}

  pause(): void {
    this.body?.pause();
  }

  resume(): void {
    this.body?.resume();
  }

  abort(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.body?.destroy();
    this.stopRequest();
  }

  /** What else a transport must stop on abort (its request object). */
  protected stopRequest(): void {}

  fail(err: unknown): void {
    if (this.stopped) return;
    this.stopped = true;
    this.handler.onFailure(err instanceof UpstreamFailure ? err : new UpstreamFailure(failureKind(err, this.kinds), err));
  }

  /**
   * Feeds one response: its head, then its body as it streams. The listeners are `on`, not `once`:
   * `end` and `error` come once per stream, or not at all after `stopped`, and `once` would wrap
   * each listener in a closure per call.
   */
  protected feed(status: number, headers: Readonly<Record<string, string | string[] | undefined>>, body: Readable): void {
    this.body = body;
    if (this.stopped) return void body.destroy();
    this.handler.onHead(status, headers);
    if (this.stopped) return void body.destroy();
    (body as WithCall)[CALL] = this;
    body.on('data', onBodyData);
    body.on('end', onBodyEnd);
    body.on('error', onBodyError);
  }
}
