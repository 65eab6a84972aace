/**
 * The pipeline of one front: one per server, shared by its requests. It composes the upstream's
 * `send` with the forwarding layers once (src/core/forward), chooses how the upstream's answers are
 * treated (policed, or trusted as they are), and starts one `ActiveRequest` per client request.
 */
import type { CircuitBreaker } from '../breaker.js';
import type { ConsumerGate } from '../consumer-gate.js';
import { forwarding, type Send } from '../forward/index.js';
import type { RequestHead } from '../policy.js';
import type { ExchangeObserver } from '../record.js';
import type { Tracing } from '../tracing.js';
import type { Upstream } from '../upstream.js';
import type { ClientResponse, ForwardSettings, FrontHooks, GatewaySource, OperatorLog, PipelineOptions } from './ports.js';
import { POLICED, TRUSTED, type Answers, type RequestPipeline } from './reply.js';
import { ActiveRequest } from './request.js';

const NONE: readonly string[] = Object.freeze([]);

/** Two observers as one: the second hears of each exchange even when the first throws. */
function both(first: ExchangeObserver, second: ExchangeObserver): ExchangeObserver {
  return {
    onEnd(record) {
      try {
        first.onEnd(record);
      } finally {
        second.onEnd(record);
      }
    },
  };
}

/** The pipeline of one front: one per server, shared by its requests. */
export class Pipeline implements RequestPipeline {
  readonly gateways: GatewaySource;
  readonly upstream: Upstream;
  readonly settings: ForwardSettings;
  readonly front: FrontHooks;
  readonly log: OperatorLog | undefined;
  readonly observer: ExchangeObserver | undefined;
  /** The upstream's `send` with the forwarding layers it needs around it (src/core/forward). */
  readonly send: Send;
  readonly answers: Answers;
  readonly trailing: readonly string[];
  readonly account: readonly string[];
  /** The breaker that admits calls; none for an upstream the layers do not guard. */
  readonly breaker: CircuitBreaker | undefined;
  /** The per-consumer in-flight bound; none when `consumerBound` is off. */
  readonly gate: ConsumerGate | undefined;
  readonly tracing: Tracing | undefined;

  constructor(options: PipelineOptions) {
    this.gateways = options.gateways;
    this.upstream = options.upstream;
    this.settings = options.settings;
    this.front = options.front;
    this.log = options.log;
    const tracing = options.gateways.tracing;
    this.tracing = tracing;
    // Tracing receives every finished exchange after the other observers.
    this.observer = tracing === undefined ? options.observer : options.observer === undefined ? tracing : both(options.observer, tracing);
    const f = forwarding(options.upstream, options.settings, options.gateways.breaker, options.clock, options.gateways.sendWrapper, tracing === undefined ? undefined : (send) => tracing.wrapSend(send));
    this.send = f.send;
    this.breaker = f.breaker;
    this.answers = f.policed ? POLICED : TRUSTED;
    const wrapper = f.policed ? options.gateways.sendWrapper : undefined;
    this.trailing = wrapper?.trailing ?? NONE;
    this.account = wrapper?.account ?? NONE;
    this.gate = options.gateways.gate;
  }

  /**
   * Starts the exchange of one request: runs its request phase (synchronously unless a policy must
   * wait), then answers a denial or hands the request to the front to read its body and forward.
   */
  handle(head: RequestHead, res: ClientResponse, native: unknown): ActiveRequest {
    const request = new ActiveRequest(this, head, res, native);
    request.start();
    return request;
  }

  /** An exchange not started yet, for a front that must keep it before `start` may call back. */
  open(head: RequestHead, res: ClientResponse, native: unknown): ActiveRequest {
    return new ActiveRequest(this, head, res, native);
  }

  /** Answers an error for a request the chain never saw (e.g. a front's own failure). */
  reject(head: RequestHead, res: ClientResponse, native: unknown, err: unknown): ActiveRequest {
    const request = new ActiveRequest(this, head, res, native);
    request.failBody(err);
    return request;
  }

  /** Logs an exception the barrier caught: once, with its stack. */
  crashed(err: unknown, where: string): void {
    const stack = err instanceof Error ? err.stack : String(err);
    this.log?.error({ where, stack }, 'unexpected error; answered 500 internal_error');
  }
}
