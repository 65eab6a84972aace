/**
 * The Upstream port: how the exchange reaches the backend, whichever library does it (an undici
 * Pool, http-proxy-3, @fastify/reply-from, or the in-process reference backend). Shaped after
 * Envoy's router and its pluggable connection pools: the exchange and its forwarding layers
 * (src/core/forward) own everything that is policy (deadlines, the retry rule, the circuit breaker,
 * buffering and error mapping); a transport only moves bytes and names what went wrong with a
 * neutral failure kind, never its library's codes.
 */
import type { Exchange } from './policy.js';

/**
 * What went wrong with an upstream call, in words of the exchange, not of a library:
 * - `refused`: no connection could be opened (nothing listens, unreachable host);
 * - `reset`: the connection broke (reset, closed, socket error);
 * - `connect_timeout`: the connection was not open in time;
 * - `total_timeout`: the whole answer took longer than `upstream.timeouts.totalMs` (the layers' own);
 * - `headers_timeout` / `body_timeout`: the transport's own deadline fired (the exchange's timers
 *   are the exact ones; a transport reports these only as a backstop);
 * - `invalid_response`: the upstream answered something that is not HTTP, or too big to be one;
 * - `tls`: the TLS handshake failed or the upstream's certificate was not verified.
 */
export type FailureKind = 'refused' | 'reset' | 'connect_timeout' | 'headers_timeout' | 'body_timeout' | 'total_timeout' | 'invalid_response' | 'tls';

export const FAILURE_KINDS: ReadonlyArray<FailureKind> = ['refused', 'reset', 'connect_timeout', 'headers_timeout', 'body_timeout', 'total_timeout', 'invalid_response', 'tls'];

/** A transport failure, with the library's error kept as `cause` for the operator log. */
export class UpstreamFailure extends Error {
  constructor(
    readonly kind: FailureKind,
    cause?: unknown,
  ) {
    super(`upstream ${kind.replace('_', ' ')}`, cause === undefined ? undefined : { cause });
    this.name = 'UpstreamFailure';
  }
}

/** One upstream request, as the exchange built it. */
export interface UpstreamRequest {
  readonly method: string;
  /** The operation (for the in-process backend, which needs no path). */
  readonly operation: string;
  /**
   * The raw value of the operation's path parameter (`Operation.paramName`), for a transport that
   * needs no path (the in-process backend) and for a wrapper of send that keys answers by it.
   */
  readonly param: string | undefined;
  /** The upstream query, without '?'. */
  readonly query: string;
  /** The upstream's base path and the operation's path, without the query. */
  readonly pathname: string;
  /** The path the upstream receives: `pathname` and `?query`. */
  readonly path: string;
  /** Request headers, lower-case names, without host: the transport writes the upstream's. */
  readonly headers: Record<string, string | string[]>;
  /**
   * The same fields but those the gateway makes per call (W3C trace context), for a wrapper of send
   * that keys answers by them: read where it answers without a call, so no trace context is made
   * for it. Absent: `headers`.
   */
  readonly keyFields?: Readonly<Record<string, string | string[]>>;
  readonly body: Buffer | undefined;
  /** The front's own request object, for a transport that works through it (reply-from). */
  readonly native: unknown;
  /**
   * What identifies the rules that turn an upstream answer into the client's (the policies and
   * header rules in force): a wrapper of send that keeps answers after the response phase keys
   * them by these too. A transport ignores it.
   */
  readonly answerRules?: string | undefined;
  /**
   * The exchange of the client request the call is made for, for a wrapper of send that routes by
   * who asks and what the policies decided (its consumer, its header fields, its facts). Read only.
   */
  readonly exchange?: Exchange;
}

/** What a transport may do to the call it is running, handed to the handler at the start. */
export interface UpstreamControl {
  /** Stop delivering body chunks until `resume` (the client is not reading). */
  pause(): void;
  resume(): void;
  /**
   * Stop the call: nothing more is delivered to the handler. `reason` is for the layers between the
   * exchange and the transport (src/core/forward): `abandoned` (the default: the client left, which
   * tells nothing of the upstream) or `failed` (the gateway refused the answer, or failed itself).
   * A transport ignores it.
   */
  abort(reason?: AbortReason): void;
}

export type AbortReason = 'abandoned' | 'failed';

/**
 * The exchange's side of one call. A transport calls `onStart` once, then `onHead` once, then
 * `onData` per body chunk and `onEnd`; or `onFailure` at any point (then nothing else). After
 * `control.abort()` it calls nothing more.
 */
export interface UpstreamHandler {
  onStart(control: UpstreamControl): void;
  /** `errorCode`: the catalogue code of an answer that is an Error by construction (the reference backend). */
  onHead(status: number, headers: Readonly<Record<string, string | string[] | undefined>>, errorCode?: string): void;
  onData(chunk: Buffer): void;
  onEnd(): void;
  onFailure(failure: UpstreamFailure): void;
}

export interface Upstream {
  /** A name for logs and metrics: `undici`, `http-proxy-3`, `reply-from`, `builtin`. */
  readonly name: string;
  /**
   * True when the answers conform to the interface by construction (the reference backend): the
   * forwarding layers (src/core/forward) do not wrap it, and its answers are not policed.
   */
  readonly conforms: boolean;
  /** Starts one call; every outcome reaches `handler`. */
  send(request: UpstreamRequest, handler: UpstreamHandler): void;
  /** Closes idle connections once the calls in flight are done. */
  close(): Promise<void>;
}
