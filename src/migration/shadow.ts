/**
 * Shadow mode: the client's answer is legacy's, untouched; a copy of the request goes to `next`,
 * and once both answers are whole, each runs through the same response phase (the exchange's
 * `aside`) and the two are compared as the client would get them.
 *
 * - `Tee` stands between the lane and legacy's handler: every callback passes through first, as it
 *   came, then what the client got is noted (bounded: past `maxAnswerBytes` nothing is compared).
 *   It changes nothing of the answer or its timing but a few property writes.
 * - `ShadowCopy` is `next`'s handler: it holds the answer whole (bounded), with a deadline of its
 *   own (`shadow.timeoutMs`), and nothing of it reaches the client.
 * - `Pair` waits for both, then compares, on a later turn of the event loop (`setImmediate`), so
 *   the comparison never runs inside the client's callbacks.
 */
import type { AnswerTaker, AsideRun, ForwardHandler } from '../core/forward/index.js';
import type { FinishedAnswer } from '../core/forward/answer.js';
import type { GatewayError } from '../core/errors.js';
import type { HeaderValue } from '../core/policy.js';
import type { UpstreamControl, UpstreamFailure } from '../core/upstream.js';
import type { ApiOperation } from '../api/model.js';
import { contractRule } from './contract.js';
import type { ClientView, Comparison, DropReason, Recorder } from './types.js';

/** One side's answer as noted: raw (the response phase still to run) or finished (the client's bytes). */
interface Noted {
  status: number;
  headers: Readonly<Record<string, HeaderValue>>;
  body: Buffer;
  truncated: boolean;
  finished: boolean;
  ms: number;
}

/** What the pair needs to compare: the response phase aside, the comparison, where to count. */
export interface PairContext {
  readonly op: ApiOperation;
  readonly run: AsideRun;
  readonly compare: (legacy: ClientView, next: ClientView, mask?: (text: string) => string) => Comparison;
  /** Masks the request's own secrets (the key its client presented) in the samples. */
  readonly mask?: (text: string) => string;
  readonly tally: Recorder;
  /** Called once when the pair is done (compared, or given up): the lane's in-flight count. */
  readonly done: () => void;
}

/**
 * Both answers of one shadowed request; compared once both are in. One deadline for the pair
 * (`shadow.timeoutMs` from the copy's start): `next` not in by then is abandoned and counted as
 * its timeout; legacy not in by then (slow, or its client left) leaves nothing to compare.
 */
export class Pair {
  private legacy: Noted | undefined = undefined;
  private next: Noted | undefined = undefined;
  /** The sides noted so far: bit 1 legacy, bit 2 next. */
  private seen = 0;
  /** A side failed or was too large: nothing to compare. */
  private given = false;
  private readonly timer: NodeJS.Timeout;
  copy: ShadowCopy | undefined = undefined;

  constructor(
    private readonly ctx: PairContext,
    timeoutMs: number,
  ) {
    this.timer = setTimeout(() => this.expire(), timeoutMs);
    // A copy's deadline never keeps the process alive (a drain on SIGTERM waits for clients only).
    this.timer.unref();
  }

  private expire(): void {
    if ((this.seen & 2) === 0) this.copy?.fail('timeout');
    this.noted('legacy', 'legacy_failed');
  }

  /**
   * One side's answer; or why it has none to compare (counted), or undefined (counted by the
   * caller). Each side once.
   */
  noted(side: 'legacy' | 'next', answer: Noted | DropReason | undefined): void {
    const bit = side === 'legacy' ? 1 : 2;
    if ((this.seen & bit) !== 0) return;
    this.seen |= bit;
    if (typeof answer === 'object') this[side] = answer;
    else {
      this.given = true;
      if (answer !== undefined) this.ctx.tally.dropped(this.ctx.op.id, answer);
    }
    if (this.seen !== 3) return;
    clearTimeout(this.timer);
    const { legacy, next } = this;
    if (this.given || legacy === undefined || next === undefined) return this.ctx.done();
    setImmediate(() => {
      try {
        this.compare(legacy, next);
      } catch {
        // Off the request's path: a comparison that throws must not end the process; counted.
        this.ctx.tally.dropped(this.ctx.op.id, 'compare_failed');
      } finally {
        this.ctx.done();
      }
    });
  }

  private compare(legacy: Noted, next: Noted): void {
    const { op, run, tally } = this.ctx;
    const rule = contractRule(op, next.status, next.headers, next.body, next.truncated);
    if (rule !== undefined) tally.nextViolation(op.id, rule);
    const a: ClientView = legacy.finished ? { status: legacy.status, code: undefined, body: legacy.body, truncated: false } : run(legacy.status, legacy.headers, legacy.body, legacy.truncated);
    const b: ClientView = run(next.status, next.headers, next.body, next.truncated);
    tally.compared(op.id, this.ctx.compare(a, b, this.ctx.mask), legacy.ms, next.ms);
  }
}

/**
 * Legacy's handler seen through: every callback passes on first, unchanged; then the time legacy
 * took is counted and, for a shadowed request (`pair`), what the client got is noted. A whole or
 * finished answer (the response cache's) passes on as well.
 */
export class Tee implements ForwardHandler {
  private status = 0;
  private headers: Readonly<Record<string, HeaderValue>> = {};
  private chunks: Buffer[] = [];
  private bytes = 0;
  /** Over `max` (or no pair): the body is not kept. */
  private over: boolean;
  private readonly t0 = performance.now();

  constructor(
    private readonly handler: ForwardHandler,
    private readonly operation: string,
    private readonly tally: Recorder,
    private readonly pair: Pair | undefined,
    private readonly max: number,
  ) {
    this.over = pair === undefined;
  }

  private note(body: Buffer, truncated: boolean, finished: boolean): void {
    const ms = performance.now() - this.t0;
    this.tally.routed(this.operation, 'legacy', ms);
    const pair = this.pair;
    if (pair === undefined) return;
    if (this.over || body.length > this.max) return pair.noted('legacy', 'answer_too_large');
    pair.noted('legacy', { status: this.status, headers: this.headers, body, truncated, finished, ms });
  }

  private failed(): void {
    this.tally.routed(this.operation, 'legacy', undefined);
    this.pair?.noted('legacy', 'legacy_failed');
  }

  onStart(control: UpstreamControl): void {
    this.handler.onStart(control);
  }

  onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    this.status = status;
    this.headers = headers;
    return this.handler.onHead(status, headers, errorCode);
  }

  onData(chunk: Buffer): void {
    this.handler.onData(chunk);
    if (this.over) return;
    this.bytes += chunk.length;
    if (this.bytes > this.max) {
      this.over = true;
      this.chunks = [];
    } else this.chunks.push(chunk);
  }

  onEnd(): void {
    this.handler.onEnd();
    this.note(this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks), false, false);
    this.chunks = [];
  }

  onBody(body: Buffer, truncated: boolean): void {
    this.handler.onBody(body, truncated);
    this.note(body, truncated, false);
  }

  onFailure(failure: UpstreamFailure): void {
    this.handler.onFailure(failure);
    this.failed();
  }

  onRefused(err: GatewayError): void {
    this.handler.onRefused(err);
    this.failed();
  }

  onWhole(status: number, headers: Readonly<Record<string, HeaderValue>>, body: Buffer, taker: AnswerTaker): void {
    this.status = status;
    this.headers = headers;
    this.handler.onWhole?.(status, headers, body, taker);
    this.note(body, false, false);
  }

  onFinished(answer: FinishedAnswer, trailing: readonly string[], called: boolean): void {
    this.handler.onFinished?.(answer, trailing, called);
    this.status = answer.status;
    this.note(answer.body, false, true);
  }

  aside(): AsideRun {
    // The lane asked the handler itself before the tee was made: never reached.
    return this.handler.aside!();
  }
}

/** `next`'s handler for a shadow copy: the answer held whole, under its own deadline; never the client's. */
export class ShadowCopy implements ForwardHandler {
  private control: UpstreamControl | undefined = undefined;
  private status = 0;
  private headers: Readonly<Record<string, HeaderValue>> = {};
  private ended = false;
  private readonly t0 = performance.now();

  constructor(
    private readonly pair: Pair,
    private readonly operation: string,
    private readonly tally: Recorder,
    private readonly max: number,
  ) {
    pair.copy = this;
  }

  private end(): boolean {
    if (this.ended) return false;
    this.ended = true;
    return true;
  }

  /** The copy failed (or its pair's deadline fell due): abandoned, counted as `next`'s failure. */
  fail(kind: string): void {
    if (!this.end()) return;
    this.control?.abort('failed');
    this.tally.nextFailed(this.operation, kind);
    this.pair.noted('next', undefined);
  }

  onStart(control: UpstreamControl): void {
    this.control = control;
    if (this.ended) control.abort();
  }

  onHead(status: number, headers: Readonly<Record<string, HeaderValue>>): number {
    this.status = status;
    this.headers = headers;
    // Held whole, one byte past the bound: a body that fills it is too large to compare.
    return this.max + 1;
  }

  onData(): void {
    // Never called: onHead asked for the whole body (the buffering layer delivers it with onBody).
  }

  onEnd(): void {
    // An empty body the buffering layer did not hold.
    this.onBody(Buffer.alloc(0), false);
  }

  onBody(body: Buffer, truncated: boolean): void {
    if (!this.end()) return;
    if (truncated || body.length > this.max) return this.pair.noted('next', 'answer_too_large');
    this.pair.noted('next', { status: this.status, headers: this.headers, body, truncated: false, finished: false, ms: performance.now() - this.t0 });
  }

  onFailure(failure: UpstreamFailure): void {
    this.fail(failure.kind.endsWith('timeout') ? 'timeout' : failure.kind);
  }

  onRefused(): void {
    this.fail('open_circuit');
  }
}
