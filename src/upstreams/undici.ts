/**
 * An undici `Pool` behind the Upstream port: one `dispatch` per call with a small handler object,
 * no stream objects, no per-chunk timers. The exchange's timers are the exact deadlines; undici's
 * own timeouts stay as a backstop.
 */
import { Pool, type Dispatcher } from 'undici';
import type { UpstreamConfig } from './config.js';
import { UpstreamFailure, type FailureKind, type Upstream, type UpstreamControl, type UpstreamHandler, type UpstreamRequest } from '../core/upstream.js';
import { upstreamTlsOrThrow } from '../tls/upstream.js';
import { failureKind } from './errors.js';

const UNDICI_KINDS: ReadonlyMap<string, FailureKind> = new Map<string, FailureKind>([
  ['UND_ERR_CONNECT_TIMEOUT', 'connect_timeout'],
  ['UND_ERR_HEADERS_TIMEOUT', 'headers_timeout'],
  ['UND_ERR_BODY_TIMEOUT', 'body_timeout'],
  ['HTTPParserError', 'invalid_response'],
  ['UND_ERR_HEADERS_OVERFLOW', 'invalid_response'],
  ['UND_ERR_RES_CONTENT_LENGTH_MISMATCH', 'invalid_response'],
  ['UND_ERR_SOCKET', 'reset'],
  ['UND_ERR_CLOSED', 'reset'],
]);

/** The reason the exchange gives undici when it stops a call (never shown to a client). */
const STOPPED = new Error('stopped by the gateway');

/** One call: undici's dispatch handler on one side, the exchange's UpstreamHandler on the other. */
class UndiciCall implements Dispatcher.DispatchHandler, UpstreamControl {
  private controller: Dispatcher.DispatchController | undefined;
  private stopped = false;

  constructor(private readonly handler: UpstreamHandler) {}

  pause(): void {
    this.controller?.pause();
  }

  resume(): void {
    this.controller?.resume();
  }

  abort(): void {
    this.stopped = true;
    const c = this.controller;
    if (c !== undefined && !c.aborted) c.abort(STOPPED);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.stopped) controller.abort(STOPPED);
    else this.handler.onStart(this);
  }

  onResponseStart(_c: Dispatcher.DispatchController, status: number, headers: Record<string, string | string[] | undefined>): void {
    // Informational answers (100, 103) precede the final one; a 101 nobody asked for is not one.
    if (status < 200 && status !== 101) return;
    if (!this.stopped) this.handler.onHead(status, headers);
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.stopped) this.handler.onData(chunk);
  }

  onResponseEnd(): void {
    if (!this.stopped) this.handler.onEnd();
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    if (this.stopped) return;
    this.stopped = true;
    this.handler.onFailure(new UpstreamFailure(failureKind(err, UNDICI_KINDS), err));
  }
}

/**
 * The undici Pool options of `upstream`: its pool size, its timeouts (undici's own, a backstop
 * behind the exchange's deadlines) and, for an https:// upstream only, the CA, client pair and
 * name of `upstream.tls` (verification stays on). The one source for this engine's Pool and for
 * the Pool reply-from sends through.
 */
export function poolOptions(config: UpstreamConfig): Pool.Options {
  const { timeouts } = config;
  const tls = upstreamTlsOrThrow(config);
  return {
    connections: config.connections,
    connectTimeout: timeouts.connectMs,
    headersTimeout: timeouts.headersMs,
    bodyTimeout: timeouts.bodyMs,
    ...(tls === undefined ? {} : { connect: { ...tls } }),
  };
}

export function undiciUpstream(origin: string, config: UpstreamConfig): Upstream {
  const pool = new Pool(origin, poolOptions(config));
  return {
    name: 'undici',
    conforms: false,
    send(request: UpstreamRequest, handler: UpstreamHandler): void {
      pool.dispatch({ path: request.path, method: request.method, headers: request.headers, body: request.body }, new UndiciCall(handler));
    },
    close: () => pool.close(),
  };
}
