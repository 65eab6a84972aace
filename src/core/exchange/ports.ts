/**
 * What the exchange is given and what it gives: the types a front implements or hands in (the
 * client's response, its hooks, the request as it sees it), and what the composition root builds a
 * pipeline from (the gateway in force, the forwarding settings, the operator log). Nothing here
 * knows `Pipeline` or `ActiveRequest`: a front sees a request as a `FrontRequest`.
 */
import type { CircuitBreaker } from '../breaker.js';
import type { Chain, OpenExchange } from '../chain.js';
import type { ConsumerGate } from '../consumer-gate.js';
import type { Clock } from '../deadlines.js';
import type { SendWrapper } from '../forward/index.js';
import type { HeaderRules } from '../headers.js';
import type { HeaderValue } from '../policy.js';
import type { ExchangeObserver } from '../record.js';
import type { Tracing } from '../tracing.js';
import type { Upstream } from '../upstream.js';

/**
 * The client's response as the exchange writes it: node's ServerResponse has this shape (the
 * Fastify front passes `reply.raw`), so the core needs no import of node:http.
 */
export interface ClientResponse {
  readonly headersSent: boolean;
  readonly writableFinished: boolean;
  readonly destroyed: boolean;
  writeHead(status: number, headers: Record<string, HeaderValue | number>): unknown;
  /** node's raw form, a flat list `[name, value, ...]`: what a finished answer is written with. */
  writeHead(status: number, headers: (string | string[])[]): unknown;
  write(chunk: Buffer): boolean;
  end(chunk?: Buffer): unknown;
  end(chunk: string, encoding: 'latin1'): unknown;
  destroy(): unknown;
  once(event: 'close' | 'drain', listener: () => void): unknown;
  on(event: 'close', listener: () => void): unknown;
  setHeader(name: string, value: string): unknown;
}

/** The gateway in force (swapped whole on a reload) and what outlives reloads. */
export interface GatewayView {
  readonly chain: Chain;
  readonly bodyLimit: number;
  readonly headerRules: HeaderRules;
  /** A fingerprint of the policies and header rules: a wrapper of send that keeps finished answers keys them by it. */
  readonly answerRules?: string | undefined;
}

export interface GatewaySource {
  readonly current: GatewayView;
  readonly breaker: CircuitBreaker | undefined;
  /**
   * A wrapper of the composed send (src/core/forward/layer.ts, `SendWrapper`), outermost: it may
   * answer a call itself (`onFinished`) or have the response phase run on a whole answer
   * (`onWhole`). It outlives reloads.
   */
  readonly sendWrapper?: SendWrapper | undefined;
  /** The per-consumer in-flight bound (`server.maxInFlightPerConsumer`); it outlives reloads. */
  readonly gate?: ConsumerGate | undefined;
  /** Tracing (src/core/trace.ts), when it is on; it outlives reloads. */
  readonly tracing?: Tracing | undefined;
}

/** What forwarding is built from; fixed for the life of the process (a reload cannot change it). */
export interface ForwardSettings {
  /** The upstream's base path (`/v1`, no trailing slash), prefixed to every operation path. */
  readonly basePath: string;
  readonly headersMs: number;
  readonly bodyMs: number;
  /** From sending the request to the answer's last byte. */
  readonly totalMs: number;
  /** Most bytes of a 2xx body held for a policy that must read it (lists); past it, truncated. */
  readonly maxBufferedBytes: number;
  readonly retryIdempotent: boolean;
}

/** Where the exchange reports what an operator must know. */
export interface OperatorLog {
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** A client request as its front's hooks see it (`ActiveRequest`, src/core/exchange/request.ts). */
export interface FrontRequest {
  /** The front's own request object (IncomingMessage, FastifyReply...). */
  readonly native: unknown;
  readonly ex: OpenExchange;
  /** Most bytes of a body the front reads (413 past it), from the gateway in force when the request arrived. */
  readonly bodyLimit: number;
  /** Forwards the request; `body` for an operation that has one. */
  forward(body: Buffer | undefined): void;
  /** Reading the body failed (a `GatewayError` such as 413, or the client went away). */
  failBody(err: unknown): void;
}

/** How a front takes part: it reads the body when the exchange asks, and drains one it refused. */
export interface FrontHooks {
  /**
   * The request passed its request phase. The front calls `request.forward(body)`: at once for an
   * operation without a body, once it has read the body (within `request.bodyLimit`) otherwise,
   * or `request.failBody(err)` when reading failed.
   */
  proceed(request: FrontRequest): void;
  /** The request was answered before its body was read: drain or discard it. */
  discard(request: FrontRequest): void;
  /**
   * The request waits for a place of its consumer (src/core/consumer-gate.ts): stop reading the
   * connection it came on (HTTP/1.1), so the client's further bytes stay unread.
   */
  hold?(request: FrontRequest): void;
  /** The request no longer waits: the connection may be read again, as far as it is concerned. */
  release?(request: FrontRequest): void;
}

export interface PipelineOptions {
  readonly gateways: GatewaySource;
  readonly upstream: Upstream;
  readonly settings: ForwardSettings;
  readonly front: FrontHooks;
  readonly log?: OperatorLog | undefined;
  readonly observer?: ExchangeObserver | undefined;
  /** The forwarding layers' clock (tests move it by hand); the real one by default. */
  readonly clock?: Clock | undefined;
}
