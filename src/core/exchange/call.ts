/**
 * The upstream call of a request: the second part of `ActiveRequest` (see reply.ts). It makes the
 * fields the upstream is sent, and is the handler at the top of the forwarding layers
 * (`ForwardHandler`): it checks an answer's head, streams its body with back-pressure or runs the
 * response phase on a held or whole one, writes a finished answer a wrapper of `send` hands it,
 * and maps a failure to the catalogue. Its endings (`settle`, `fail`, `crash`: the error barrier) end the
 * call once, whichever way it went.
 */
import { isValidUpstreamStatus } from '../contract.js';
import { GatewayError, renderError } from '../errors.js';
import type { FinishedAnswer } from '../forward/answer.js';
import type { AnswerTaker, AsideAnswer, AsideRun, ForwardHandler } from '../forward/index.js';
import { clientResponseHeaders, tooManyHeaders, upstreamRequestHeaders } from '../headers.js';
import type { HeaderValue, ResponseBody } from '../policy.js';
import { traceContextOf } from '../request-id.js';
import type { FailureKind, UpstreamControl, UpstreamFailure } from '../upstream.js';
import { describeCause, endWith, Reply } from './reply.js';

function errorFor(kind: FailureKind, cause: unknown): GatewayError {
  const code = kind === 'connect_timeout' || kind === 'headers_timeout' || kind === 'body_timeout' || kind === 'total_timeout' ? 'upstream_timeout' : kind === 'invalid_response' ? 'bad_gateway' : kind === 'tls' ? 'upstream_tls_error' : 'upstream_unavailable';
  return new GatewayError(code, { cause });
}

/** An Error the exchange would answer, as an aside answer. */
function errorAnswer(err: GatewayError): AsideAnswer {
  return { status: err.status, code: err.code, body: Buffer.from(renderError(err)), truncated: false };
}

/** No fields of a request: the view of the headers every client gets of a shared answer. */
const NO_FIELDS: Readonly<Record<string, string>> = Object.freeze({});

/**
 * The trailing values of a whole answer's head, in the wrapper's order: one list reused, as the
 * values are copied into the written field list before `writeFinished` returns.
 */
const TRAILING: string[] = [];

function trailingOf(head: Readonly<Record<string, HeaderValue>>, names: readonly string[]): readonly string[] {
  TRAILING.length = names.length;
  for (let k = 0; k < names.length; k++) TRAILING[k] = String(head[names[k] as string] ?? '');
  return TRAILING;
}

/** The request's upstream call: `ActiveRequest`'s second part (see the file's head). */
export abstract class UpstreamCall extends Reply implements ForwardHandler {
  protected upstreamStatus: number | undefined = undefined;
  protected upstreamFailure: FailureKind | undefined = undefined;
  protected upstreamT0 = 0;
  protected upstreamT1 = 0;

  protected control: UpstreamControl | undefined = undefined;
  /** A streamed body's announced length (-1 when not announced), and whether it was ended with its last chunk. */
  private expected = -1;
  protected ended = false;
  private headers: Readonly<Record<string, HeaderValue>> | undefined = undefined;
  /** The upstream call has ended (answered, failed, timed out or abandoned): nothing more counts. */
  protected settled = true;

  // ---- What the upstream is sent ---------------------------------------------------------------

  /**
   * Puts the trace context in the places `identify` (request.ts) kept, unless a policy set the
   * fields itself. Once per request: `Outgoing` builds the upstream fields once, and retries reuse them.
   */
  private traced(): void {
    const up = this.ex.upstreamHeaders;
    const t = this.ex.trace;
    if (t !== undefined) {
      // Traced: the tracer writes each attempt's traceparent (its CLIENT span as the parent); until
      // then the fields hold the request's trace, already parsed.
      if (up.traceparent === null) up.traceparent = `00-${t.traceId}-${t.spanId}-${t.sampled ? '01' : '00'}`;
      if (up.tracestate === null) up.tracestate = t.tracestate ?? null;
      return;
    }
    const trace = traceContextOf(this.head.headers);
    if (up.traceparent === null) up.traceparent = trace.traceparent;
    if (up.tracestate === null) up.tracestate = trace.tracestate ?? null;
  }

  /** The fields the upstream is sent but the trace context, which `upstreamHeaders` makes first (an answer given without a call never needs one). */
  forwardedFields(): Record<string, string | string[]> {
    const h = this.head.headers;
    return upstreamRequestHeaders(this.rules, h, this.ex, { remoteAddress: this.head.remoteAddress, tls: this.head.tls === true, host: h.host as string | undefined }) as Record<string, string | string[]>;
  }

  /** The request headers the upstream receives, for a request with `body` (`Outgoing`). */
  upstreamHeaders(body: Buffer | undefined): Record<string, string | string[]> {
    this.traced();
    const headers = this.forwardedFields();
    if (body !== undefined) headers['content-length'] = String(body.length);
    else delete headers['content-length'];
    return headers;
  }

  // ---- Upstream call (ForwardHandler) ----------------------------------------------------------

  onStart(control: UpstreamControl): void {
    this.control = control;
    if (this.settled) control.abort();
  }

  onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    if (this.settled) {
      this.control?.abort();
      return 0;
    }
    if (errorCode !== undefined) this.errorCode = errorCode;
    this.upstreamStatus = status;
    try {
      if (!isValidUpstreamStatus(status) || tooManyHeaders(headers)) {
        // 999, 600, a 101 nobody asked for, or a header flood: not an answer to relay.
        this.refuseAnswer(new Error(`upstream answered status ${status}`));
        return 0;
      }
      const answers = this.pipeline.answers;
      let hold: number;
      try {
        hold = answers.hold(this, status, headers);
      } catch (err) {
        // A policy's fault, not the upstream's: 500 internal_error with its stack (the barrier).
        this.crash(err, 'response phase');
        return 0;
      }
      if (hold > 0) {
        this.headers = headers;
        return hold;
      }
      this.status = status;
      const length = headers['content-length'];
      this.expected = typeof length === 'string' ? Number(length) : -1;
      this.res.writeHead(status, answers.headers(this, headers));
    } catch (err) {
      // A header value node will not write (the upstream's fault): 502, nothing forwarded.
      this.status = 0;
      this.refuseAnswer(err);
    }
    return 0;
  }

  onData(chunk: Buffer): void {
    if (this.settled) return;
    this.bytesOut += chunk.length;
    if (this.bytesOut === this.expected) {
      // The last byte the upstream announced: headers, body and end in one write (a body in one
      // chunk, the common case, costs one write instead of two).
      this.ended = true;
      endWith(this.res, chunk);
      return;
    }
    if (!this.res.write(chunk)) {
      // The client reads slowly: hold the upstream back (the body-idle layer stops counting).
      this.control?.pause();
      this.res.once('drain', () => this.control?.resume());
    }
  }

  onEnd(): void {
    if (this.settled) return;
    this.settle();
    if (!this.ended) this.res.end();
  }

  /** The body the response phase reads, held by the buffering layer (whole, or cut at the cap). */
  onBody(body: Buffer, truncated: boolean): void {
    if (this.settled) return;
    this.settle();
    const status = this.upstreamStatus ?? 0;
    const upstreamHeaders = this.headers as Record<string, HeaderValue | number>;
    const out = this.respond({ status, headers: upstreamHeaders, body, truncated });
    if (out !== undefined) this.answer(out, upstreamHeaders);
  }

  /**
   * A whole upstream answer a wrapper of send holds: the response phase runs on it, when a policy
   * asks as for any answer, and the wrapper is offered what every client would get. Taken, it is
   * written as a finished answer, with the trailing values of `headers`: one way to write it,
   * whether the answer was just made or given later without a call.
   */
  onWhole(status: number, headers: Readonly<Record<string, HeaderValue>>, body: Buffer, taker: AnswerTaker): void {
    if (this.settled) return;
    this.upstreamStatus = status;
    this.headers = headers;
    if (tooManyHeaders(headers)) return this.refuseAnswer(new Error('upstream answered too many header fields'));
    const upstreamHeaders = headers as Record<string, HeaderValue | number>;
    let hold: number;
    try {
      hold = this.pipeline.answers.hold(this, status, headers);
    } catch (err) {
      return this.crash(err, 'response phase');
    }
    this.settle();
    const res: ResponseBody = { status, headers: upstreamHeaders, body, truncated: false };
    const out = hold > 0 ? this.respond(res) : res;
    if (out === undefined) return;
    if (out.status === 200 && out.headers === upstreamHeaders) {
      // What every client gets of this answer: the allowlist and the `private` rule applied, none
      // of this request's own fields (they are added per request, as on every later write).
      const shared = clientResponseHeaders(this.rules, upstreamHeaders, { responseHeaders: NO_FIELDS, consumerId: this.ex.consumerId }, true);
      const taken = taker.take(200, shared, out.body, this.ex.responseHeaders);
      if (taken !== undefined) return this.writeFinished(taken, trailingOf(headers, this.pipeline.trailing));
    }
    this.answer(out, upstreamHeaders);
  }

  /** A wrapper of send answers with a finished answer: the request's own fields on it, then the wrapper's. */
  onFinished(answer: FinishedAnswer, trailing: readonly string[], called: boolean): void {
    if (this.settled) return;
    // An answer no call went upstream for has no upstream status or duration (the access line
    // and the client histogram are for upstream calls), as for a call the breaker refused.
    if (called) {
      this.upstreamStatus = answer.status;
      this.settle();
    } else {
      this.upstreamT0 = 0;
      // No call to time: settled without reading the clock.
      this.settled = true;
    }
    this.writeFinished(answer, trailing);
  }

  /**
   * The response phase, aside (see `ForwardHandler.aside`): on a copy of the exchange as it stands
   * now, for each answer. What the exchange would refuse (a status no upstream may send, a header
   * flood) is the 502 it would answer; a policy that throws, the 500.
   */
  aside(): AsideRun {
    const snapshot = this.ex.copyAside();
    const chain = this.chain;
    return (status, headers, body, truncated) => {
      if (!isValidUpstreamStatus(status) || tooManyHeaders(headers)) return errorAnswer(new GatewayError('bad_gateway'));
      const ex = snapshot.copyAside();
      const res: ResponseBody = { status, headers: headers as Record<string, HeaderValue | number>, body, truncated };
      try {
        const out = chain.wantsResponseBody(ex, res) ? chain.finishResponse(ex, res) : res;
        return { status: out.status, code: out.code, body: out.body, truncated: out.truncated };
      } catch {
        return errorAnswer(new GatewayError('internal_error'));
      }
    };
  }

  /** The response phase on a held answer; undefined when it crashed (answered 500). */
  private respond(res: ResponseBody): ResponseBody | undefined {
    try {
      return this.chain.finishResponse(this.ex, res);
    } catch (err) {
      this.crash(err, 'response phase');
      return undefined;
    }
  }

  /** The breaker refused the call (503 with Retry-After): nothing was sent upstream. */
  onRefused(err: GatewayError): void {
    if (this.settled) return;
    this.upstreamT0 = 0;
    this.settle();
    this.sendError(err);
  }

  onFailure(failure: UpstreamFailure): void {
    if (this.settled) return;
    this.upstreamFailure = failure.kind;
    this.fail(errorFor(failure.kind, failure.cause ?? failure));
  }

  // ---- Endings ---------------------------------------------------------------------------------

  protected settle(): void {
    this.settled = true;
    this.upstreamT1 = performance.now();
  }

  /** The gateway will not relay this answer: the call stops, counted as the upstream's failure. */
  private refuseAnswer(cause: unknown): void {
    this.control?.abort('failed');
    this.fail(new GatewayError('bad_gateway', { cause }));
  }

  private fail(err: GatewayError): void {
    this.settle();
    if (this.res.headersSent) {
      // The status is out (a streamed body broke off or paused too long): close the connection.
      this.pipeline.log?.warn({ requestId: this.requestId, code: err.code, cause: describeCause(err.cause) }, 'upstream body failed; connection closed');
      this.res.destroy();
      return;
    }
    this.sendError(err);
  }

  /** The error barrier: an exception anywhere in the exchange answers 500, logged once. */
  protected crash(err: unknown, where: string): void {
    this.pipeline.crashed(err, where);
    if (!this.settled) {
      this.settle();
      // The gateway's own fault: it tells nothing of the upstream, so the breaker does not count it.
      this.control?.abort();
    }
    this.sendError(new GatewayError('internal_error'));
  }
}
