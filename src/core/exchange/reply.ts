/**
 * Writing the client's answer: the first part of `ActiveRequest` (one object per request, its
 * methods in three files by what they do: this one, call.ts, request.ts, each class extending the
 * one before). `Reply` holds what the request is (its exchange, the gateway it arrived under) and
 * what it answered (status, error code, bytes), and writes every answer the exchange gives: an
 * error in the Error shape (`sendError`, the one renderer), a policy's local reply, what the
 * response phase made of an upstream answer, and a finished answer a wrapper of `send` hands it,
 * with the header assembly each needs.
 */
import type { Chain, OpenExchange } from '../chain.js';
import type { ConsumerGate } from '../consumer-gate.js';
import { ERROR_CONTENT_TYPE, type GatewayError, renderError } from '../errors.js';
import { fieldAt, flatFields, type FieldPlan, type FinishedAnswer } from '../forward/answer.js';
import { ONE_WRITE_MAX, type Send } from '../forward/index.js';
import { clientResponseHeaders, mergeVary, type HeaderRules } from '../headers.js';
import type { HeaderValue, LocalReply, RequestHead, ResponseBody } from '../policy.js';
import type { ExchangeObserver } from '../record.js';
import type { Tracing } from '../tracing.js';
import type { ClientResponse, ForwardSettings, FrontHooks, GatewaySource, OperatorLog } from './ports.js';

/**
 * What a request reads of its pipeline. `Pipeline` (pipeline.ts) implements it; the request's
 * files know it by this interface, since the pipeline creates the requests and no module may
 * reach itself through its imports.
 */
export interface RequestPipeline {
  readonly gateways: GatewaySource;
  readonly settings: ForwardSettings;
  readonly front: FrontHooks;
  readonly log: OperatorLog | undefined;
  readonly observer: ExchangeObserver | undefined;
  /** The upstream's `send` with the forwarding layers it needs around it (src/core/forward). */
  readonly send: Send;
  /** The wrapper of send's trailing fields of a finished answer (`SendWrapper.trailing`); none without one. */
  readonly trailing: readonly string[];
  /** The wrapper of send's account fields on an upstream head (`SendWrapper.account`); none without one. */
  readonly account: readonly string[];
  readonly answers: Answers;
  /** The per-consumer in-flight bound; none when `consumerBound` is off. */
  readonly gate: ConsumerGate | undefined;
  /** Tracing, when it is on: each request's trace starts with it (src/core/trace.ts). */
  readonly tracing: Tracing | undefined;
  /** Logs an exception the barrier caught: once, with its stack. */
  crashed(err: unknown, where: string): void;
}

/** Ends `res` with `chunk` as its last bytes (with the head, when node has not written it yet). */
export function endWith(res: ClientResponse, chunk: Buffer): void {
  if (chunk.length <= ONE_WRITE_MAX) res.end(chunk.toString('latin1'), 'latin1');
  else res.end(chunk);
}

/**
 * Sets the fields of `from` on `out`, one by one (Vary merged), and returns `out`. Header objects are built with
 * it, not with `{ ...from }`: the spread's clone, given fields afterwards, cost the built-in
 * backend a large share of its CPU per request, and the one-object answers serve more requests with
 * this loop (co-scheduled A/B, bench/ab.mjs).
 */
function assignHeaders(out: Record<string, HeaderValue | number>, from: Readonly<Record<string, HeaderValue | number | undefined>>): Record<string, HeaderValue | number> {
  for (const name in from) {
    const value = from[name];
    // Vary is a list (RFC 9110 section 12.5.5): the gateway's Origin joins the answer's, never replaces it.
    if (value !== undefined) out[name] = name === 'vary' && out.vary !== undefined ? mergeVary(out.vary, value) : value;
  }
  return out;
}

/**
 * A finished answer's field list from its plan: a copy of the plan's list with this request's own
 * values and the wrapper's `trailing` values in their places; undefined when the request's own
 * field names are not the plan's (another route's or consumer's policies), and the list is made
 * field by field.
 */
function plannedFields(plan: FieldPlan, own: Readonly<Record<string, HeaderValue>>, trailing: readonly string[]): (string | string[])[] | undefined {
  const names = plan.names;
  const at = plan.at;
  const out = plan.fields.slice();
  let n = 0;
  for (const name in own) {
    const value = own[name];
    if (value === undefined) continue;
    if (names[n] !== name) return undefined;
    const i = at[n++] ?? 0;
    // Vary is a list (RFC 9110 section 12.5.5): the exchange's joins a kept one.
    out[i] = i < plan.stored && name === 'vary' ? mergeVary(out[i], value) : value;
  }
  if (n !== names.length) return undefined;
  // The trailing pairs end the list, in the wrapper's order.
  for (let k = 0, i = out.length - 2 * trailing.length + 1; k < trailing.length; k++, i += 2) out[i] = trailing[k] as string;
  return out;
}

/**
 * A finished answer's field list made field by field: its fields (the first `end` items of
 * `fields`), the request's own (one replaces a field of its name; Vary merged), then the wrapper's
 * trailing fields (`names`, with `values`).
 */
function mergedFields(fields: readonly (string | string[])[], end: number, own: Readonly<Record<string, HeaderValue>>, names: readonly string[], values: readonly string[]): (string | string[])[] {
  const out = fields.slice(0, end);
  for (const name in own) {
    const value = own[name];
    if (value === undefined) continue;
    const at = fieldAt(out, end, name);
    if (at < 0) out.push(name, value);
    else out[at + 1] = name === 'vary' ? mergeVary(out[at + 1], value) : value;
  }
  for (let k = 0; k < names.length; k++) out.push(names[k] as string, values[k] ?? '');
  return out;
}

/** Most bytes of a non-2xx upstream body kept for the error mapping; the rest is not buffered. */
export const ERROR_BODY_CAP = 16 * 1024;

/**
 * How the exchange treats an upstream's answers, chosen with the layers when the pipeline is built:
 * an upstream's are policed (the header allowlist, the response phase when a policy asks); the
 * reference backend's conform by construction and are written as they are.
 */
export interface Answers {
  /** How many bytes of the body to hold for the response phase (0: it streams). */
  hold(request: Reply, status: number, headers: Readonly<Record<string, HeaderValue>>): number;
  /** The head the client gets for a streamed answer. */
  headers(request: Reply, headers: Readonly<Record<string, HeaderValue>>): Record<string, HeaderValue | number>;
}

export const POLICED: Answers = {
  hold(request, status, headers) {
    if (!request.chain.wantsResponseBody(request.ex, { status, headers: headers as Record<string, HeaderValue | number> })) return 0;
    // A 2xx a policy reads (a list) is held up to maxBufferedBytes; an error page only as far as
    // the error mapping reads it: the rest is not buffered.
    const max = request.pipeline.settings.maxBufferedBytes;
    return status < 300 ? max : Math.min(ERROR_BODY_CAP, max);
  },
  headers(request, headers) {
    return clientResponseHeaders(request.rules, headers as Record<string, HeaderValue | number>, request.ex);
  },
};

export const TRUSTED: Answers = {
  hold: () => 0,
  headers: (request, headers) => assignHeaders(assignHeaders({}, headers), request.ex.responseHeaders),
};

/** What the operator log gets of a cause: its code and message, never a request header. */
export function describeCause(cause: unknown): string | undefined {
  if (!(cause instanceof Error)) return undefined;
  const code = (cause as { code?: unknown }).code;
  const inner = cause.cause instanceof Error && cause.cause !== cause ? ` (${describeCause(cause.cause)})` : '';
  return `${typeof code === 'string' ? code + ': ' : ''}${cause.message}${inner}`;
}

/** The request and the answer it is given: `ActiveRequest`'s first part (see the file's head). */
export abstract class Reply {
  readonly ex: OpenExchange;
  readonly startedAt = Date.now();
  protected readonly t0 = performance.now();
  /** The chain of the gateway in force when the request arrived: a reload does not change it. */
  readonly chain: Chain;
  readonly rules: HeaderRules;
  readonly bodyLimit: number;
  /** The gateway's answer rules when the request arrived (`GatewayView.answerRules`). */
  readonly answerRulesOf: string | undefined;

  protected status = 0;
  protected errorCode: string | undefined = undefined;
  protected bytesOut = 0;

  constructor(
    readonly pipeline: RequestPipeline,
    readonly head: RequestHead,
    readonly res: ClientResponse,
    /** The front's own request object (IncomingMessage, FastifyReply...). */
    readonly native: unknown,
  ) {
    const gw = pipeline.gateways.current;
    this.chain = gw.chain;
    this.rules = gw.headerRules;
    this.bodyLimit = gw.bodyLimit;
    this.answerRulesOf = gw.answerRules;
    this.ex = gw.chain.open(head);
  }

  get requestId(): string {
    return this.ex.requestId ?? '';
  }

  /** Sends what the response phase made of an upstream answer. */
  protected answer(out: ResponseBody, upstreamHeaders: Record<string, HeaderValue | number>): void {
    if (out.code !== undefined) this.errorCode = out.code;
    // A response a policy built itself (an Error) carries the gateway's own headers (a challenge,
    // Retry-After): they are not the upstream's, so the upstream allowlist does not apply to them.
    const headers = out.headers === upstreamHeaders ? clientResponseHeaders(this.rules, out.headers, this.ex, true) : TRUSTED.headers(this, out.headers as Readonly<Record<string, HeaderValue>>);
    // A wrapper of send's account of the call (its `account` fields) is the gateway's own, not the
    // upstream's, so an answer a policy rewrote (a 404 into an error of the catalogue) keeps it.
    if (out.headers !== upstreamHeaders) {
      const account = this.pipeline.account;
      for (let k = 0; k < account.length; k++) {
        const name = account[k] as string;
        const value = upstreamHeaders[name];
        if (value !== undefined) headers[name] = value;
      }
    }
    this.send(out.status, headers, out.body);
  }

  protected send(status: number, headers: Record<string, HeaderValue | number>, body: Buffer): void {
    const res = this.res;
    if (res.headersSent || res.destroyed) return;
    headers['content-length'] = body.length;
    this.status = status;
    this.bytesOut = body.length;
    res.writeHead(status, headers);
    endWith(res, body);
  }

  /**
   * Writes a finished answer: its fields (Content-Length included) as they are, then the
   * exchange's own (request id, CORS, deprecation, rate limit; Vary merged), then the wrapper's
   * trailing fields with `trailing`; the body as it is, with the head in one write when it is small.
   */
  protected writeFinished(answer: FinishedAnswer, trailing: readonly string[]): void {
    const res = this.res;
    if (res.headersSent || res.destroyed) return;
    // A flat list, not an object: node writes a list's fields without an own-property check and a
    // lookup by name per field, so the fields a wrapper adds cost about what the object form
    // saved (instructions counted under valgrind).
    const own = this.ex.responseHeaders;
    const plan = answer.plan;
    let out = plan === undefined ? undefined : plannedFields(plan, own, trailing);
    if (out === undefined) {
      const fields = plan?.fields ?? answer.fields ?? flatFields(answer.headers);
      out = mergedFields(fields, plan?.stored ?? fields.length, own, this.pipeline.trailing, trailing);
    }
    this.status = answer.status;
    this.bytesOut = answer.body.length;
    res.writeHead(answer.status, out);
    // A small body kept as a string: joined with the head in one write, copied into no new string.
    if (answer.text !== undefined) res.end(answer.text, 'latin1');
    else endWith(res, answer.body);
  }

  /** Answers a policy's local reply: its status, no body, the exchange's own headers and its own. */
  protected reply(r: LocalReply): void {
    const res = this.res;
    if (res.headersSent || res.destroyed) return;
    const headers = assignHeaders(assignHeaders({}, this.ex.responseHeaders), r.headers);
    // RFC 9110 section 8.6: no Content-Length in a 204; any other status says its empty body.
    if (r.status !== 204) headers['content-length'] = 0;
    this.status = r.status;
    res.writeHead(r.status, headers);
    res.end();
  }

  /** Answers `err` in the Error shape with the exchange's own headers (e.g. deprecation). */
  sendError(err: GatewayError): void {
    const res = this.res;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (res.destroyed) return;
    this.errorCode = err.code;
    if (err.status >= 500 && err.code !== 'internal_error') {
      this.pipeline.log?.warn({ requestId: this.requestId, code: err.code, cause: describeCause(err.cause) }, 'gateway error');
    }
    const headers = assignHeaders(assignHeaders({}, this.ex.responseHeaders), err.headers);
    headers['content-type'] = ERROR_CONTENT_TYPE;
    try {
      this.send(err.status, headers, Buffer.from(renderError(err)));
    } catch (e) {
      this.pipeline.crashed(e, 'sendError');
      res.destroy();
    }
  }
}
