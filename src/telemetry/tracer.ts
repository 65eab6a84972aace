/**
 * The tracer: the `Tracing` the exchange is handed (src/core/trace.ts). It starts each request's
 * trace (ids, the head decision), makes every upstream attempt a CLIENT span whose id the upstream
 * receives as its parent, and when the response closed decides at the end whether the trace is
 * kept: sampled at the head, or marked with a keep class (an error, a contract violation, a
 * deprecated call, a rate limit) whatever the head said. A kept trace becomes spans that follow
 * the HTTP semantic conventions (https://opentelemetry.io/docs/specs/semconv/http/http-spans/),
 * handed to the exporter's queue; nothing is encoded or sent on the request's path.
 */
import type { ForwardHandler, Send } from '../core/forward/index.js';
import type { GatewayError } from '../core/errors.js';
import type { HeaderValue, RequestHead } from '../core/policy.js';
import type { ExchangeRecord } from '../core/record.js';
import { newSpanId, newTraceId, parseTraceparent, parseTracestate } from '../core/request-id.js';
import { MARK, RequestTrace, traceNow, type KeepClass, type TraceEvent, type TraceValue, type UpstreamAttempt } from '../core/trace.js';
import type { Tracing } from '../core/tracing.js';
import type { AbortReason, UpstreamControl, UpstreamFailure } from '../core/upstream.js';
import { clientResolver } from '../policies/auth/client-address.js';
import { SPAN_FLAGS, SPAN_KIND, STATUS_CODE, type SpanData } from './span.js';

/** How the head decides: a trace-id ratio, under the parent's decision when `parentBased`. */
export interface Sampler {
  readonly parentBased: boolean;
  /** In [0, 1]. */
  readonly ratio: number;
}

export interface TracerOptions {
  readonly sampler: Sampler;
  readonly keep: readonly KeepClass[];
  /** Traces kept by `keep` alone, at most per second; undefined: no bound. */
  readonly maxTailPerSecond?: number | undefined;
  /** `server.trustedProxies`: the client address is resolved through them. */
  readonly trustedProxies: readonly string[];
  /** The upstream's origin (`http://host:port`): the CLIENT spans' server address and port; none for the built-in backend (no hop, no CLIENT span). */
  readonly upstreamOrigin: string | undefined;
  /** Where a kept span goes (the exporter's queue); never throws. */
  readonly sink: (span: SpanData) => void;
}

/** The methods HTTP defines (RFC 9110, RFC 5789): any other is `_OTHER` in a span, as the conventions say. */
const KNOWN_METHODS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE']);

/** The events of a span that has none: one array for all of them (a span's fields are read-only). */
const NO_EVENTS: readonly TraceEvent[] = Object.freeze([]);

/** Longest path or user-invented text a span carries: what a client sends is bounded here. */
const MAX_TEXT = 512;

/** 2^56: the ratio compares the trace id's last 56 bits, its random part in W3C Trace Context level 2. */
const TWO_56 = 2 ** 56;

/** Where an attempt goes: the CLIENT span's server address, port and the origin of its url.full. */
interface Peer {
  readonly origin: string;
  readonly address: string;
  readonly port: number;
}

function peerOf(origin: string): Peer {
  const url = new URL(origin);
  return { origin: url.origin, address: url.hostname.replace(/^\[|\]$/g, ''), port: url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port) };
}

function clip(text: string): string {
  return text.length <= MAX_TEXT ? text : text.slice(0, MAX_TEXT);
}

/**
 * The path of a request target, without its query. An absolute-form target (RFC 9112 section
 * 3.2.2) gives only its path: its authority may hold a `user:password@`. Anything else (`*`, a
 * target that is no URL) gives none.
 */
function pathOf(target: string): string | undefined {
  if (target.charCodeAt(0) !== 47) return URL.canParse(target) ? clip(new URL(target).pathname) : undefined;
  const q = target.indexOf('?');
  return clip(q === -1 ? target : target.slice(0, q));
}

export class Tracer implements Tracing {
  private sampler: Sampler;
  private keepMask = 0;
  /** The tail budget: a token bucket of `maxTailPerSecond` tokens, refilled continuously. */
  private tailRate = Infinity;
  private tailTokens = Infinity;
  private tailAt = 0;
  /** Spans of traces the tail budget did not keep. */
  tailLimited = 0;
  private readonly clientOf: (head: RequestHead) => string | undefined;
  private readonly upstream: Peer;
  private readonly sink: (span: SpanData) => void;

  constructor(options: TracerOptions) {
    this.sampler = options.sampler;
    this.configure(options.sampler, options.keep, options.maxTailPerSecond);
    this.clientOf = clientResolver(options.trustedProxies);
    this.upstream = peerOf(options.upstreamOrigin ?? 'http://in-process');
    this.sink = options.sink;
  }

  /** What a reload may change: the ratio and the keep classes. */
  configure(sampler: Sampler, keep: readonly KeepClass[], maxTailPerSecond?: number): void {
    this.sampler = sampler;
    this.tailRate = maxTailPerSecond ?? Infinity;
    this.tailTokens = Math.min(this.tailTokens, this.tailRate);
    this.tailAt = performance.now();
    let mask = 0;
    for (const k of keep) mask |= MARK[k];
    this.keepMask = mask;
  }

  /** Takes one token of the tail budget, if there is one. */
  private tailAllowed(): boolean {
    const now = performance.now();
    this.tailTokens = Math.min(this.tailRate, this.tailTokens + ((now - this.tailAt) / 1000) * this.tailRate);
    this.tailAt = now;
    if (this.tailTokens < 1) return false;
    this.tailTokens -= 1;
    return true;
  }

  /** The ratio on a fresh draw (a trace id the client chose does not count). */
  private byChance(): boolean {
    const r = this.sampler.ratio;
    return r >= 1 || (r > 0 && Math.random() < r);
  }

  /** Whether the trace-id ratio says yes: the id's last 56 bits below `ratio` of their range. */
  private byRatio(traceId: string): boolean {
    const r = this.sampler.ratio;
    if (r >= 1) return true;
    if (r <= 0) return false;
    return Number.parseInt(traceId.slice(18), 16) < r * TWO_56;
  }

  start(head: RequestHead, trusted: boolean): RequestTrace {
    const tp = head.headers.traceparent;
    const parsed = typeof tp === 'string' ? parseTraceparent(tp) : undefined;
    const client = this.clientOf(head);
    if (parsed === undefined) {
      const traceId = newTraceId();
      return new RequestTrace(traceId, newSpanId(), undefined, this.byRatio(traceId), undefined, client, head);
    }
    const traceId = parsed.slice(3, 35);
    // The parent's sampled flag counts only from a trusted proxy (src/core/headers.ts: from anyone
    // else it is cleared, so that no client can make every system behind the gateway record). Nor
    // does an untrusted client's trace id: one whose last 56 bits are zero is under any ratio, so
    // its ratio is drawn afresh.
    const sampled = !trusted ? this.byChance() : this.sampler.parentBased ? (Number.parseInt(parsed.slice(53, 55), 16) & 1) === 1 : this.byRatio(traceId);
    // What the upstream is sent (request-id.ts): a valid list, or none.
    return new RequestTrace(traceId, newSpanId(), parsed.slice(36, 52), sampled, parseTracestate(head.headers.tracestate), client, head);
  }

  wrapSend(send: Send, origin?: string): Send {
    const peer = origin === undefined ? this.upstream : peerOf(origin);
    return (request, handler) => {
      const trace = request.exchange?.trace;
      if (trace === undefined) return send(request, handler);
      const attempts = (trace.attempts ??= []);
      const attempt: UpstreamAttempt = { spanId: newSpanId(), resend: attempts.length, peer, target: clip(request.path), start: traceNow(), end: 0, status: undefined, failure: undefined, aborted: undefined };
      attempts.push(attempt);
      // The upstream's parent is this attempt's span; its sampled flag is the head decision.
      request.headers.traceparent = `00-${trace.traceId}-${attempt.spanId}-${trace.sampled ? '01' : '00'}`;
      send(request, new AttemptHandler(handler, attempt));
    };
  }

  onEnd(record: ExchangeRecord): void {
    const trace = record.trace;
    if (trace === undefined) return;
    const end = traceNow();
    let marks = trace.marks;
    if (isError(record, trace)) marks |= MARK.error;
    if (!trace.sampled) {
      if ((marks & this.keepMask) === 0) return;
      // Kept by its outcome alone: within the tail budget, so that no client's flood of
      // keep-class requests fills the queue for everyone else's traces.
      if (!this.tailAllowed()) {
        this.tailLimited += 1 + (trace.attempts?.length ?? 0);
        return;
      }
    }
    this.sink(this.serverSpan(record, trace, end));
    const attempts = trace.attempts;
    if (attempts === undefined) return;
    for (let i = 0; i < attempts.length; i++) this.sink(this.clientSpan(record, trace, attempts[i]!, i === attempts.length - 1, end));
  }

  private serverSpan(r: ExchangeRecord, trace: RequestTrace, end: number): SpanData {
    const known = KNOWN_METHODS.has(r.method);
    const method = known ? r.method : '_OTHER';
    const routed = r.route !== 'unknown';
    const a: Record<string, TraceValue> = { 'http.request.method': method };
    if (!known) a['http.request.method_original'] = clip(r.method);
    if (routed) a['http.route'] = r.route;
    const head = trace.head;
    const path = pathOf(head.target);
    if (path !== undefined) a['url.path'] = path;
    a['url.scheme'] = head.tls === true ? 'https' : 'http';
    if (r.status > 0) a['http.response.status_code'] = r.status;
    if (r.protocol !== undefined) a['network.protocol.version'] = r.protocol === '2.0' ? '2' : r.protocol;
    if (trace.client !== undefined) a['client.address'] = trace.client;
    const failed = r.status >= 500;
    if (failed) a['error.type'] = r.errorCode ?? String(r.status);
    a['gateway.request.id'] = r.requestId;
    if (r.operation !== undefined) a['gateway.operation'] = r.operation;
    if (r.consumer !== undefined) a['gateway.consumer.id'] = r.consumer;
    if (r.errorCode !== undefined) a['gateway.error.code'] = r.errorCode;
    a['gateway.sampling'] = trace.sampled ? 'head' : 'tail';
    const name = known ? (routed ? `${method} ${r.route}` : method) : routed ? `HTTP ${r.route}` : 'HTTP';
    return {
      traceId: trace.traceId,
      spanId: trace.spanId,
      parentSpanId: trace.parentSpanId,
      traceState: trace.tracestate,
      name,
      kind: SPAN_KIND.server,
      start: trace.start,
      end,
      attributes: a,
      events: trace.events ?? NO_EVENTS,
      status: failed ? STATUS_CODE.error : STATUS_CODE.unset,
      statusMessage: undefined,
      flags: (trace.sampled ? SPAN_FLAGS.sampled : 0) | SPAN_FLAGS.hasIsRemote | (trace.parentSpanId === undefined ? 0 : SPAN_FLAGS.isRemote),
    };
  }

  private clientSpan(r: ExchangeRecord, trace: RequestTrace, at: UpstreamAttempt, last: boolean, end: number): SpanData {
    const a: Record<string, TraceValue> = {
      'http.request.method': KNOWN_METHODS.has(r.method) ? r.method : '_OTHER',
      'server.address': (at.peer as Peer).address,
      'server.port': (at.peer as Peer).port,
      'url.full': (at.peer as Peer).origin + at.target,
      'network.protocol.version': '1.1',
    };
    if (at.resend > 0) a['http.request.resend_count'] = at.resend;
    if (at.status !== undefined) a['http.response.status_code'] = at.status;
    // The gateway's own deadlines end an attempt by stopping it: the request's record names which.
    const kind = at.failure ?? (at.aborted === 'failed' ? (last ? (r.upstreamFailure ?? 'aborted') : 'aborted') : undefined);
    let failed = kind !== undefined;
    if (kind !== undefined) a['error.type'] = kind;
    else if (at.status !== undefined && at.status >= 400) {
      a['error.type'] = String(at.status);
      failed = true;
    }
    if (at.aborted === 'abandoned') a['gateway.abandoned'] = true;
    return {
      traceId: trace.traceId,
      spanId: at.spanId,
      parentSpanId: trace.spanId,
      traceState: trace.tracestate,
      name: a['http.request.method'] as string,
      kind: SPAN_KIND.client,
      start: at.start,
      end: at.end === 0 ? end : at.end,
      attributes: a,
      events: NO_EVENTS,
      status: failed ? STATUS_CODE.error : STATUS_CODE.unset,
      statusMessage: undefined,
      flags: (trace.sampled ? SPAN_FLAGS.sampled : 0) | SPAN_FLAGS.hasIsRemote,
    };
  }
}

/** The `error` keep class: the client got a 5xx, or an upstream attempt failed (even one a retry mended). */
function isError(r: ExchangeRecord, trace: RequestTrace): boolean {
  if (r.status >= 500) return true;
  const attempts = trace.attempts;
  if (attempts === undefined) return false;
  for (let i = 0; i < attempts.length; i++) {
    const at = attempts[i]!;
    if (at.failure !== undefined || at.aborted === 'failed') return true;
  }
  return false;
}

/**
 * One attempt's handler and control, between the layers' call and the transport: it times the
 * attempt and keeps its status and failure, and passes everything on.
 */
class AttemptHandler implements ForwardHandler, UpstreamControl {
  private control: UpstreamControl | undefined = undefined;

  constructor(
    private readonly handler: ForwardHandler,
    private readonly attempt: UpstreamAttempt,
  ) {}

  private ended(): void {
    if (this.attempt.end === 0) this.attempt.end = traceNow();
  }

  onStart(control: UpstreamControl): void {
    this.control = control;
    this.handler.onStart(this);
  }

  onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    this.attempt.status = status;
    return this.handler.onHead(status, headers, errorCode);
  }

  onData(chunk: Buffer): void {
    this.handler.onData(chunk);
  }

  onBody(body: Buffer, truncated: boolean): void {
    this.ended();
    this.handler.onBody(body, truncated);
  }

  onEnd(): void {
    this.ended();
    this.handler.onEnd();
  }

  onFailure(failure: UpstreamFailure): void {
    if (this.attempt.end === 0) this.attempt.failure = failure.kind;
    this.ended();
    this.handler.onFailure(failure);
  }

  onRefused(err: GatewayError): void {
    this.ended();
    this.handler.onRefused(err);
  }

  pause(): void {
    this.control?.pause();
  }

  resume(): void {
    this.control?.resume();
  }

  abort(reason?: AbortReason): void {
    if (this.attempt.end === 0) {
      this.attempt.aborted = reason === 'failed' ? 'failed' : 'abandoned';
      this.attempt.end = traceNow();
    }
    this.control?.abort(reason);
  }
}
