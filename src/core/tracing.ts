/**
 * The port tracing plugs into (src/telemetry implements it): apart from trace.ts, which the
 * exchange's own types (the policy's `Exchange`, the record) name, so that none of them imports
 * the forwarding layers or the observers through it.
 */
import type { Send } from './forward/layer.js';
import type { RequestHead } from './policy.js';
import type { ExchangeObserver } from './record.js';
import type { RequestTrace } from './trace.js';

/**
 * What the composition root hands the exchange when tracing is on (src/telemetry): it starts each
 * request's trace, wraps the transport's send so that every attempt is a CLIENT span whose id the
 * upstream receives as its parent, and receives every finished exchange.
 */
export interface Tracing extends ExchangeObserver {
  /** The trace of a new request; `trusted`: the peer is a trusted proxy (its sampled flag counts). */
  start(head: RequestHead, trusted: boolean): RequestTrace;
  /** `send` (the transport's) with a CLIENT span per attempt; `origin`: the upstream it reaches, when not the gateway's own. */
  wrapSend(send: Send, origin?: string): Send;
}
