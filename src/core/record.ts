/**
 * What one finished request leaves behind for operations: the access log line and the metrics
 * are both written from this, once, after the response (Envoy's access log, Kong's log phase).
 * The exchange builds it once, when the response closed; observers only read it.
 */
import type { RecordFacts } from './facts.js';
import type { RequestTrace } from './trace.js';
import type { FailureKind } from './upstream.js';

/** The route label: the operation's path template, or `unknown` for every other path (bounded by the interface). */
export type RouteLabel = string;

export interface ExchangeRecord {
  /** Epoch milliseconds when the request arrived. */
  readonly startedAt: number;
  /** From arrival to the last byte written (or the connection closed), milliseconds. */
  readonly durationMs: number;
  readonly requestId: string;
  /** The request method as sent (bounded for metrics by the observer: unknown methods fold). */
  readonly method: string;
  readonly route: RouteLabel;
  /** The operation's id (the document's operationId), when the request named one. */
  readonly operation: string | undefined;
  /** The status the client got; 0 when the connection closed before any status was sent. */
  readonly status: number;
  /** The catalogue code when the client got an Error. */
  readonly errorCode: string | undefined;
  /** The policy that denied the request (`auth`, `rate-limit`, ...), when one did. */
  readonly rejectedBy: string | undefined;
  /** The upstream's status, when it answered. */
  readonly upstreamStatus: number | undefined;
  /** From sending upstream to the end of its answer (or failure), milliseconds. */
  readonly upstreamMs: number | undefined;
  /** How the upstream call failed, when it did (a timeout of the gateway's own is `headers_timeout`, `body_timeout` or `total_timeout`). */
  readonly upstreamFailure: FailureKind | undefined;
  /** Request body bytes read, and response body bytes written. */
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly clientAddress: string | undefined;
  /** The HTTP version the client spoke ('1.1', '1.0', '2.0'), as node reports it. */
  readonly protocol: string | undefined;
  /**
   * Who made the request, from the slot a policy declared as naming the consumer (`auth`: the id of
   * the API key, never the key); undefined when no policy identified the client.
   */
  readonly consumer: string | undefined;
  /**
   * The facts the chain's policies declared for the access log (`list-pets`: each query parameter
   * as applied, such as `limit`), in the chain's order, and their values for this request.
   */
  readonly facts: RecordFacts;
  /** The request's trace, when tracing is on (src/core/trace.ts). */
  readonly trace: RequestTrace | undefined;
}

/** Receives every finished exchange (access log, metrics, deprecation report). Must not throw. */
export interface ExchangeObserver {
  onEnd(record: ExchangeRecord): void;
}
