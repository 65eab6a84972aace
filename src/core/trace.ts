/**
 * What the gateway records of one request for its trace, when tracing is on (`Tracing`, tracing.ts,
 * handed in by the composition root; src/telemetry builds the spans and exports them): the ids, the head
 * sampling decision, what the policies decided (events, which also mark the outcomes a tail
 * decision keeps), and each upstream attempt. One object per request, made at its start; nothing
 * of it exists when tracing is off.
 *
 * Times are epoch milliseconds with the monotonic clock's fraction (`traceNow`), so a span's start
 * and end are ordered even when the wall clock steps.
 */
/** What a trace reads of its request (a `RequestHead` is one). */
export interface TracedHead {
  /** The raw request-target: path and query, as sent. */
  readonly target: string;
  readonly tls?: boolean | undefined;
}

export type TraceValue = string | number | boolean;
export type TraceAttributes = Readonly<Record<string, TraceValue>>;

/** `performance.timeOrigin`, read once (it is a getter). */
const TIME_ORIGIN = performance.timeOrigin;

/** Epoch milliseconds, sub-millisecond from the monotonic clock. */
export function traceNow(): number {
  return TIME_ORIGIN + performance.now();
}

/**
 * What the policies and layers record (span events), by name. The outcomes a tail decision may
 * keep are marks: an event of one of these names marks its request.
 */
export const TRACE_EVENTS = {
  /** A policy denied the request: `gateway.policy`, `gateway.error.code`. */
  denied: 'gateway.denied',
  /** A deprecated operation was called: `gateway.operation`. */
  deprecated: 'gateway.deprecated',
  /** A deprecated operation answered as removed during a brownout window. */
  brownout: 'gateway.brownout',
  /** The upstream's answer broke the interface: `gateway.violation.rule`, `gateway.violation.path`. */
  contractViolation: 'gateway.contract_violation',
  /** A rate limit refused the request: `gateway.limit`. */
  rateLimited: 'gateway.rate_limited',
  /** The response cache answered: `gateway.cache.status` (`hit`, `stale`). */
  cache: 'gateway.cache',
  /** The migration lane fell back to the legacy upstream: `gateway.fallback.reason`. */
  fallback: 'gateway.fallback',
} as const;

/** The outcomes a tail decision may keep whatever the head said (`telemetry.traces.keep`). */
export type KeepClass = 'error' | 'contract_violation' | 'deprecated' | 'rate_limited';
export const KEEP_CLASSES: readonly KeepClass[] = ['error', 'contract_violation', 'deprecated', 'rate_limited'];

/** The mark bit of each keep class. */
export const MARK: Readonly<Record<KeepClass, number>> = { error: 1, contract_violation: 2, deprecated: 4, rate_limited: 8 };

const MARK_OF_EVENT: Readonly<Record<string, number>> = {
  [TRACE_EVENTS.deprecated]: MARK.deprecated,
  [TRACE_EVENTS.contractViolation]: MARK.contract_violation,
  [TRACE_EVENTS.rateLimited]: MARK.rate_limited,
};

export interface TraceEvent {
  readonly name: string;
  /** Epoch milliseconds (`traceNow`). */
  readonly at: number;
  readonly attributes: TraceAttributes | undefined;
}

/**
 * One upstream attempt: a CLIENT span. `end` is set once, by the first of: its answer's end, its
 * failure, or an abort (the client left: `abandoned`; the gateway stopped it, a deadline or a
 * refused answer: `failed`, whose kind the request's record gives).
 */
export interface UpstreamAttempt {
  readonly spanId: string;
  /** 0 for the first attempt, 1 for the retry (`http.request.resend_count`). */
  readonly resend: number;
  /** Where it went, as the tracer that made it describes it (its address and port). */
  readonly peer: unknown;
  /** The path and query the upstream was sent. */
  readonly target: string;
  readonly start: number;
  end: number;
  status: number | undefined;
  /** The transport's `FailureKind` (upstream.ts, not imported: it names the exchange's types). */
  failure: string | undefined;
  aborted: 'abandoned' | 'failed' | undefined;
}

/** The trace of one request (the SERVER span and its attempts). */
export class RequestTrace {
  events: TraceEvent[] | undefined = undefined;
  attempts: UpstreamAttempt[] | undefined = undefined;
  /** The keep classes the events marked (`MARK` bits). */
  marks = 0;
  readonly start = traceNow();

  constructor(
    readonly traceId: string,
    /** The SERVER span's id. */
    readonly spanId: string,
    /** The client's span (its `traceparent` parent-id), when it continued a trace. */
    readonly parentSpanId: string | undefined,
    /** The head decision: record this trace (sent upstream as the sampled flag). */
    readonly sampled: boolean,
    /** The client's `tracestate`, forwarded as it came. */
    readonly tracestate: string | undefined,
    /** The client's address as resolved through the trusted proxies. */
    readonly client: string | undefined,
    /** The request as it came (its target and scheme, for the SERVER span). */
    readonly head: TracedHead,
  ) {}

  /** Records what a policy or layer decided; marks the request when the event is a keep class. */
  event(name: string, attributes?: TraceAttributes): void {
    (this.events ??= []).push({ name, at: traceNow(), attributes });
    const m = MARK_OF_EVENT[name];
    if (m !== undefined) this.marks |= m;
  }
}
