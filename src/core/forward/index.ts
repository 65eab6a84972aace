/**
 * Which layers an upstream gets, in which order (outermost, nearest the exchange, first):
 *
 *   exchange -> [wrapper of send] -> breaker accounting -> buffering -> total deadline -> body idle
 *            -> head deadline -> retry -> transport
 *
 * A wrapper of send, when the composition root hands one in (`SendWrapper`), is outermost, around
 * the composed call (src/core/forward/layer.ts): an answer it gives without a call is no upstream
 * call, so no other layer sees it, and a call it makes is under every deadline. The breaker admits
 * a call before it is made and learns each call's outcome once, whatever layer ended it; the head
 * deadline sits outside the retry, so a retried read stays under the one deadline its request
 * started with. An upstream whose answers conform by
 * construction (the in-process reference backend) gets no layer at all: it answers before `send`
 * returns, and is neither policed nor guarded.
 */
import type { CircuitBreaker } from '../breaker.js';
import type { Clock } from '../deadlines.js';
import type { Upstream } from '../upstream.js';
import { bodyIdle } from './body-idle.js';
import { breakerAccounting } from './breaker.js';
import { buffering } from './buffer.js';
import { headDeadline } from './head-deadline.js';
import { totalDeadline } from './total-deadline.js';
import { compose, type Layer, type Send, type SendWrapper } from './layer.js';
import { retryReads } from './retry.js';

export type { AnswerTaker, AsideAnswer, AsideRun, CallClass, ForwardHandler, Layer, Outcome, Send, SendWrapper } from './layer.js';
export { Call, ONE_WRITE_MAX, compose } from './layer.js';

export interface LayerSettings {
  readonly headersMs: number;
  readonly bodyMs: number;
  readonly totalMs: number;
  readonly retryIdempotent: boolean;
}

/** How the exchange reaches one upstream: the composed `send`, and whether its answers are policed. */
export interface Forwarding {
  readonly send: Send;
  /** False for an upstream whose answers conform by construction: no response phase, its headers as they are. */
  readonly policed: boolean;
  /** The breaker that admits calls, when the layers account for it. */
  readonly breaker: CircuitBreaker | undefined;
}

/**
 * `outer`: a wrapper of the composed call the caller hands in, outermost; the core knows only that
 * it wraps `send` and which fields it writes. `attempts`: a wrapper of the transport's own send,
 * innermost, which sees every attempt (tracing: a CLIENT span each); an upstream that conforms by
 * construction is in-process, no hop, and gets none.
 */
export function forwarding(upstream: Upstream, settings: LayerSettings, breaker: CircuitBreaker | undefined, clock?: Clock, outer?: SendWrapper, attempts?: (send: Send) => Send): Forwarding {
  const direct: Send = (request, handler) => upstream.send(request, handler);
  if (upstream.conforms) return { send: direct, policed: false, breaker: undefined };
  // Every call to the transport is an attempt (the retry's too).
  const send: Send = attempts === undefined ? direct : attempts(direct);
  const layers: Layer[] = [];
  if (breaker !== undefined) layers.push(breakerAccounting(breaker));
  layers.push(buffering(), totalDeadline(settings.totalMs, clock), bodyIdle(settings.bodyMs, clock), headDeadline(settings.headersMs, clock));
  if (settings.retryIdempotent) layers.push(retryReads());
  const call = compose(send, layers);
  return { send: outer === undefined ? call : outer.wrap(call), policed: true, breaker };
}
