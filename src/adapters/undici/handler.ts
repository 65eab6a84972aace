/**
 * The undici engine, the standalone gateway's default: node:http for the client, an undici `Pool`
 * for the upstream, and nothing between them but the chain. It is the forwarding path tuned for
 * cost per request: one dispatch per upstream call with a handler object (no stream objects, no
 * per-chunk timers, no framework routing), response bytes written to the client as they arrive
 * unless a policy must read them. It only translates, like the other adapters: the client side
 * is `shared/node-front.ts`, shared with the http-proxy-3 engine.
 *
 * @example
 *   import { createServer } from 'node:http';
 *   import { createGateway, createUndiciHandler, loadPolicyFile } from 'petstore-gateway';
 *   const env = { env: process.env };
 *   const loaded = loadPolicyFile('policies/upstream.yaml', env);
 *   if (!loaded.ok) throw new Error('bad policy');
 *   const { handler } = createUndiciHandler(createGateway(loaded.config, env));
 *   createServer(handler).listen(8080);
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { Pool, type Dispatcher } from 'undici';
import { GatewayError } from '../../core/errors.js';
import { describeCause, fromTransportError, isConnectionFailure } from '../../core/failures.js';
import { clientResponseHeaders, tooManyHeaders, upstreamRequestHeaders } from '../../core/headers.js';
import { operationPath } from '../../core/operations.js';
import type { Exchange, PolicyLog, UpstreamResponse } from '../../core/policy.js';
import { GatewayHolder, type Gateway } from '../../gateway.js';
import { createFront, type Front } from '../shared/node-front.js';
import { bodyTimeoutError, IdleTimer } from '../shared/streams.js';
import { UpstreamCall } from '../shared/upstream-call.js';

export interface UndiciHandler {
  /** The request handler for node:http's createServer. */
  readonly handler: (req: IncomingMessage, res: ServerResponse) => void;
  /** The upstream connection pool (undefined with the built-in backend). */
  readonly pool: Pool | undefined;
  /** Closes the pool once its in-flight requests are done. */
  close(): Promise<void>;
}

export interface UndiciHandlerOptions {
  /** Where failures are logged (5xx with their cause); nothing is logged when absent. */
  readonly log?: PolicyLog;
}

/** What every upstream call of one handler shares. */
interface Upstream {
  readonly front: Front;
  readonly log: PolicyLog | undefined;
  readonly breaker: GatewayHolder['breaker'];
  readonly headersMs: number;
  readonly bodyMs: number;
  readonly maxBufferedBytes: number;
  readonly retryIdempotent: boolean;
  dispatch(call: Call): void;
}

/** Request headers the adapter sets itself: undici writes the upstream's own host. */
const SET_BY_ADAPTER: ReadonlySet<string> = new Set(['host', 'content-length']);

/** The reason the gateway gives undici when it stops a call itself (never shown to a client). */
const STOPPED = new Error('stopped by the gateway');

/**
 * One upstream call of one client request (and its single retry, if the policy allows one): the
 * undici dispatch handler. Its methods are on the prototype; per request only this object and the
 * client's `close` listener are allocated.
 */
class Call implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private head: UpstreamResponse | undefined;
  /** Set when the body is buffered for a policy; undefined while it is streamed. */
  private chunks: Buffer[] | undefined;
  private size = 0;
  private truncated = false;
  private idle: IdleTimer | undefined;
  private attempt = 0;
  readonly book: UpstreamCall;
  readonly method: string;

  constructor(
    private readonly up: Upstream,
    private readonly gw: Gateway,
    private readonly ex: Exchange,
    private readonly res: ServerResponse,
    readonly path: string,
    readonly headers: Record<string, string | string[]>,
    readonly body: Buffer | undefined,
  ) {
    this.method = ex.operation!.method;
    // Past headersMs the client gets 504, the upstream request is aborted, a late answer dropped.
    this.book = new UpstreamCall(up.breaker, up.headersMs, () => {
      this.stop();
      this.up.front.sendError(this.res, this.ex, new GatewayError('upstream_timeout'));
    });
  }

  /** The client went away before its answer was complete: abort, and tell the breaker nothing. */
  readonly onClientClose = (): void => {
    if (this.res.writableFinished) return;
    this.book.abandon();
    this.stop();
  };

  private stop(reason: Error = STOPPED): void {
    this.idle?.stop();
    if (this.controller !== undefined && !this.controller.aborted) this.controller.abort(reason);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.book.settled) controller.abort(STOPPED);
  }

  onResponseStart(controller: Dispatcher.DispatchController, status: number, headers: Record<string, string | string[] | undefined>): void {
    if (status < 200) return; // informational: the final answer follows
    const { book, ex, res } = this;
    if (book.settled) return controller.abort(STOPPED);
    book.headersArrived();
    if (tooManyHeaders(headers)) {
      book.finish(false);
      controller.abort(STOPPED);
      return this.up.front.sendError(res, ex, new GatewayError('bad_gateway'));
    }
    const head: UpstreamResponse = { status, headers: headers as UpstreamResponse['headers'] };
    this.head = head;
    this.idle = new IdleTimer(this.up.bodyMs, this.onIdle);
    if (this.gw.chain.wantsResponseBody(ex, head)) {
      this.chunks = [];
      return;
    }
    try {
      res.writeHead(status, clientResponseHeaders(head.headers, ex) as OutgoingHttpHeaders);
    } catch (err) {
      // A header value node will not write (the upstream's fault): 502, nothing forwarded.
      book.finish(false);
      this.stop();
      this.up.front.sendError(res, ex, new GatewayError('bad_gateway', undefined, {}, err));
    }
  }

  /** The body paused too long: undici reports the abort to onResponseError, which answers. */
  private readonly onIdle = (): void => this.stop(bodyTimeoutError());

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.idle!.touch();
    const chunks = this.chunks;
    if (chunks === undefined) {
      if (!this.res.write(chunk)) {
        controller.pause();
        this.res.once('drain', () => controller.resume());
      }
      return;
    }
    const cap = this.up.maxBufferedBytes;
    if (this.size + chunk.length > cap) {
      // More than any policy may buffer: the chain decides on what it has (truncated).
      chunks.push(chunk.subarray(0, cap - this.size));
      this.size = cap;
      this.truncated = true;
      this.complete();
      this.stop();
      return;
    }
    chunks.push(chunk);
    this.size += chunk.length;
  }

  onResponseEnd(): void {
    this.idle?.stop();
    this.complete();
  }

  private complete(): void {
    const { book, head } = this;
    if (book.settled) return;
    book.finish(head!.status < 500);
    if (this.chunks === undefined) {
      this.res.end();
      return;
    }
    const chunks = this.chunks;
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.size);
    this.up.front.finish(this.gw, this.ex, { status: head!.status, headers: head!.headers, body, truncated: this.truncated }, this.res);
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    this.idle?.stop();
    const { book, ex, res } = this;
    if (book.settled) return; // answered already: timed out, truncated, or the client left
    // Never on an answer, never createPet: listPets and getPet once when the connection failed
    // before any answer, if the policy allows it.
    if (this.head === undefined && this.up.retryIdempotent && this.attempt === 0 && !ex.operation!.hasBody && isConnectionFailure(err)) {
      this.attempt++;
      this.controller = undefined;
      this.up.dispatch(this);
      return;
    }
    book.finish(false);
    const error = fromTransportError(err);
    if (res.headersSent) {
      // The status is out (a streamed body broke off or paused too long): close the connection.
      this.up.log?.warn({ code: error.code, cause: describeCause(err) }, 'upstream body failed; connection closed');
      res.destroy();
      return;
    }
    this.up.front.sendError(res, ex, error);
  }
}

export function createUndiciHandler(gateway: Gateway | GatewayHolder, options: UndiciHandlerOptions = {}): UndiciHandler {
  const holder = gateway instanceof GatewayHolder ? gateway : new GatewayHolder(gateway);
  const { upstream, upstreamOrigin, upstreamBasePath, backend } = holder.current;
  const { timeouts } = upstream;
  const breaker = holder.breaker;
  const log = options.log;
  // undici's own timeouts stay as a backstop; the gateway's timers are the exact ones.
  const pool =
    backend === undefined
      ? new Pool(upstreamOrigin!, {
          connections: upstream.connections,
          connectTimeout: timeouts.connectMs,
          headersTimeout: timeouts.headersMs,
          bodyTimeout: timeouts.bodyMs,
        })
      : undefined;

  function forward(gw: Gateway, ex: Exchange, req: IncomingMessage, res: ServerResponse, body: Buffer | undefined): void {
    const closed = breaker?.admit();
    if (closed !== undefined) return front.sendError(res, ex, closed);
    const headers = upstreamRequestHeaders(req.headers, ex, SET_BY_ADAPTER) as Record<string, string | string[]>;
    if (body !== undefined) headers['content-length'] = String(body.length);
    const path = upstreamBasePath + operationPath(ex.operation!, ex.petId) + (ex.upstreamQuery === '' ? '' : `?${ex.upstreamQuery}`);
    const call = new Call(up, gw, ex, res, path, headers, body);
    res.once('close', call.onClientClose);
    up.dispatch(call);
  }

  const front = createFront(holder, log, forward);
  const up: Upstream = {
    front,
    log,
    breaker,
    headersMs: timeouts.headersMs,
    bodyMs: timeouts.bodyMs,
    maxBufferedBytes: upstream.maxBufferedBytes,
    retryIdempotent: upstream.retryIdempotent,
    dispatch: (call) => {
      pool!.dispatch({ path: call.path, method: call.method, headers: call.headers, body: call.body }, call);
    },
  };

  return {
    handler: front.handler,
    pool,
    close: async () => {
      await pool?.close();
    },
  };
}
