/**
 * The migration lane: a wrapper of the legacy upstream's `send` (outermost, around the response
 * cache when there is one) that sends each request of an operation under migration where its
 * mode says, and `next`'s own composed `send` (its timeouts, breaker and connections).
 *
 *   legacy  every request to legacy (an operation the section does not list: nothing is read)
 *   shadow  answered by legacy; a copy to `next` (GET and HEAD, or every method when `next` is a
 *           sandbox), bounded in flight, in body size and in time; both answers compared (shadow.ts)
 *   split   by consumer, sticky (side.ts): `percent` of the consumers to `next` (routed.ts)
 *   next    every request to `next` (routed.ts: a request safe to repeat falls back to legacy)
 *
 * A tester's header picks the side in any mode, with no copy. Requests routed to `next` do not go
 * through the response cache, which keeps legacy's answers.
 */
import type { Send } from '../core/forward/index.js';
import type { UpstreamRequest } from '../core/upstream.js';
import type { Exchange } from '../core/policy.js';
import { credentialSecrets, SecretSet } from '../core/redact.js';
import { KEY_ID } from '../policies/auth/facts.js';
import type { MigrationRules } from './rules.js';
import { Routed } from './routed.js';
import { Pair, ShadowCopy, Tee } from './shadow.js';
import { splitSide, testerSide } from './side.js';
import type { Recorder } from './types.js';

export interface LaneOptions {
  /** The rules in force (a reload replaces them); undefined: the lane passes everything to legacy. */
  readonly rules: () => MigrationRules | undefined;
  /** `next`'s send, with its own forwarding layers. */
  readonly next: Send;
  /** The same for a request routed to `next` (traced: a CLIENT span per attempt); `next` when absent. Shadow copies use `next`. */
  readonly routedNext?: Send | undefined;
  /** The path prefixes of the two upstreams' URLs (`/v1`, no trailing slash). */
  readonly legacyBasePath: string;
  readonly nextBasePath: string;
  /** `next.sandbox`: copies of every method may be sent (not only GET and HEAD). */
  readonly sandbox: boolean;
  /** `next`'s maxBufferedBytes: the most of its answer held to check it before the client gets it. */
  readonly nextMaxBytes: number;
  readonly tally: Recorder;
}

/** The request `next` gets: legacy's, on `next`'s base path. Its fields are read from legacy's when sent. */
class NextRequest implements UpstreamRequest {
  readonly method: string;
  readonly operation: string;
  readonly param: string | undefined;
  readonly query: string;
  readonly pathname: string;
  readonly path: string;
  readonly body: Buffer | undefined;
  readonly native = undefined;
  readonly exchange: Exchange | undefined;

  constructor(
    private readonly of: UpstreamRequest,
    legacyBase: string,
    nextBase: string,
  ) {
    this.method = of.method;
    this.operation = of.operation;
    this.param = of.param;
    this.query = of.query;
    this.pathname = nextBase + of.pathname.slice(legacyBase.length);
    this.path = this.query === '' ? this.pathname : `${this.pathname}?${this.query}`;
    this.body = of.body;
    this.exchange = of.exchange;
  }

  get headers(): Record<string, string | string[]> {
    return this.of.headers;
  }
}

const SAFE = new Set(['GET', 'HEAD']);

/**
 * The key the client presented, masked wherever it stands in a sample: either upstream may have
 * seen it (`auth.upstreamAuthorization: forward`) and echo it, and a key held only as a hash is
 * none of the gateway's known secrets. Made when a sample is, not before.
 */
function maskOf(authorization: unknown): ((text: string) => string) | undefined {
  if (typeof authorization !== 'string' || authorization === '') return undefined;
  let set: SecretSet | undefined;
  return (text) => (set ??= new SecretSet(credentialSecrets(authorization))).mask(text);
}

export class MigrationLane {
  /** Shadow copies whose pair is not done yet, in this process. */
  inFlight = 0;
  private readonly pairDone = (): void => {
    this.inFlight--;
  };

  constructor(private readonly options: LaneOptions) {}

  /** The lane around legacy's composed `send` (with the cache, when there is one). */
  wrap(legacy: Send): Send {
    const o = this.options;
    return (request, handler) => {
      const rules = o.rules();
      const ex = request.exchange;
      if (rules === undefined || ex === undefined) return legacy(request, handler);
      const m = rules.modes.get(request.operation);
      const picked = testerSide(ex, rules.tester.header, rules.tester.scope);
      if (m === undefined && picked === undefined) return legacy(request, handler);
      const op = rules.operations.get(request.operation);
      if (op === undefined) return legacy(request, handler);
      const side = picked ?? (m?.mode === 'next' ? 'next' : m?.mode === 'split' ? splitSide(ex.get(KEY_ID), m.percent) : 'legacy');
      if (side === 'next') {
        const routed = new Routed(handler, request, op, SAFE.has(request.method), legacy, o.tally, o.nextMaxBytes);
        return routed.start(o.routedNext ?? o.next, new NextRequest(request, o.legacyBasePath, o.nextBasePath));
      }
      // Legacy's answer, timed (a Tee passes every callback on first).
      if (m?.mode !== 'shadow' || picked !== undefined) return legacy(request, new Tee(handler, op.id, o.tally, undefined, 0));
      // Shadow: is a copy allowed, and is there room for it?
      const s = rules.shadow;
      const drop = !SAFE.has(request.method) && !o.sandbox ? 'method' : s.percent < 100 && Math.random() * 100 >= s.percent ? 'sampled_out' : this.inFlight >= s.maxInFlight ? 'in_flight' : (request.body?.length ?? 0) > s.maxBodyBytes ? 'body' : undefined;
      const run = drop === undefined ? handler.aside?.() : undefined;
      if (run === undefined) {
        if (drop !== undefined) o.tally.dropped(op.id, drop);
        return legacy(request, new Tee(handler, op.id, o.tally, undefined, 0));
      }
      this.inFlight++;
      const pair = new Pair({ op, run, compare: rules.compare, mask: maskOf(ex.head.headers.authorization), tally: o.tally, done: this.pairDone }, s.timeoutMs);
      legacy(request, new Tee(handler, op.id, o.tally, pair, s.maxAnswerBytes));
      const copy = new ShadowCopy(pair, op.id, o.tally, s.maxAnswerBytes);
      const nextRequest = new NextRequest(request, o.legacyBasePath, o.nextBasePath);
      // After legacy's call is under way: the copy never goes out before the client's request.
      setImmediate(() => o.next(nextRequest, copy));
    };
  }
}
