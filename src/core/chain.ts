/**
 * The chain: runs the policies in their stated order and stops at the first denial. It knows
 * nothing of HTTP frameworks; the exchange gives it a RequestHead and, for an operation with a body, the raw body.
 */
import type { RequestTrace } from './trace.js';
import type { GatewayError } from './errors.js';
import { DeclaredFacts, type LogField, type Slot } from './facts.js';
import { splitTarget, type Operation, type RouteMatch, type Router } from './operations.js';
import { LocalReply, type Decision, type Exchange, type Policy, type RequestDecision, type RequestHead, type ResponseBody, type UpstreamResponse } from './policy.js';

/** What the chain's policies declared for observers, gathered once per chain. */
interface Declared {
  readonly logFields: readonly LogField[];
  readonly consumer: Slot<string> | undefined;
}

/**
 * The exchange the chain opens: the policies' `Exchange` view, its facts in its own fields, and
 * (for the record at the end) the access-log fields the chain's policies declared.
 */
export class OpenExchange extends DeclaredFacts implements Exchange {
  readonly operation: Operation | undefined;
  // `list-pets` rebuilds the query from the validated values of the operation's parameters.
  // Nothing of the client's query reaches the upstream otherwise.
  upstreamQuery = '';
  readonly upstreamHeaders: Record<string, string | null> = {};
  readonly responseHeaders: Record<string, string> = {};
  upstreamBody: Buffer | undefined = undefined;
  requestId?: string;
  deniedBy?: string;
  /** A copy whose response phase runs for an answer no client gets (`copyAside`). */
  aside = false;
  /** The request's trace when tracing is on; a copy has none (it records nothing). */
  trace: RequestTrace | undefined = undefined;

  constructor(
    readonly head: RequestHead,
    readonly route: RouteMatch,
    readonly rawQuery: string,
    private readonly declared: Declared,
  ) {
    super(declared.logFields);
    this.operation = route.kind === 'operation' ? route.operation : undefined;
  }

  /**
   * A copy of this exchange as it stands (its facts, its upstream query and fields, its own
   * response fields), marked `aside`: the response phase may run on it for another answer than
   * the client's, and changes nothing of this one.
   */
  copyAside(): OpenExchange {
    const copy = new OpenExchange(this.head, this.route, this.rawQuery, this.declared);
    copy.copyFacts(this);
    copy.upstreamQuery = this.upstreamQuery;
    Object.assign(copy.upstreamHeaders, this.upstreamHeaders);
    Object.assign(copy.responseHeaders, this.responseHeaders);
    copy.upstreamBody = this.upstreamBody;
    if (this.requestId !== undefined) copy.requestId = this.requestId;
    copy.aside = true;
    return copy;
  }

  /** Who made the request, as the policy that identifies consumers declared it (auth's key id). */
  get consumerId(): string | undefined {
    const s = this.declared.consumer;
    return s === undefined ? undefined : this.get(s);
  }
}

/**
 * Response phases run in the same order as request phases: `upstream-errors` turns a non-2xx into
 * the Error shape before `list-pets` and `response-contract` look at 2xx bodies.
 */
/** A policy that has phase `K`: the chain keeps one list per phase, of the policies that have it. */
type With<K extends keyof Policy> = Policy & Required<Pick<Policy, K>>;

export class Chain {
  private readonly annotators: ReadonlyArray<With<'annotate'>>;
  private readonly onRequest: ReadonlyArray<With<'onRequest'>>;
  private readonly onBody: ReadonlyArray<With<'onBody'>>;
  private readonly responders: ReadonlyArray<With<'onResponseBody'>>;
  private readonly declared: Declared;

  /** `router`: the interface's (src/api), handed in by the gateway. */
  constructor(
    readonly policies: ReadonlyArray<Policy>,
    readonly router: Router,
  ) {
    this.annotators = policies.filter((p): p is With<'annotate'> => p.annotate !== undefined);
    this.onRequest = policies.filter((p): p is With<'onRequest'> => p.onRequest !== undefined);
    this.onBody = policies.filter((p): p is With<'onBody'> => p.onBody !== undefined);
    this.responders = policies.filter((p): p is With<'onResponseBody'> => p.onResponseBody !== undefined);
    this.declared = Object.freeze({
      logFields: Object.freeze(policies.flatMap((p) => p.declares?.logFields ?? [])),
      consumer: policies.find((p) => p.declares?.consumer !== undefined)?.declares?.consumer,
    });
  }

  /** A fresh exchange for a request head: its route, nothing decided yet. */
  open(head: RequestHead): OpenExchange {
    const { path, query } = splitTarget(head.target);
    return new OpenExchange(head, this.router.match(head.method, path), query, this.declared);
  }

  /**
   * Runs every policy's request phase on `ex`, in order, until the first denial. Synchronous while
   * every policy is; a policy that must wait (shared state) returns a promise, and the rest of the
   * chain runs once it settles: then the result is a promise of the decision.
   */
  decide(ex: Exchange, from = 0): RequestDecision | Promise<RequestDecision> {
    if (from === 0) for (const p of this.annotators) p.annotate(ex);
    const list = this.onRequest;
    for (let i = from; i < list.length; i++) {
      // Indexed, not iterated: a pending policy resumes the loop at i + 1. i < list.length.
      const p = list[i]!;
      const d = p.onRequest(ex);
      if (d === undefined) continue;
      if (d instanceof Promise) {
        const name = p.name;
        return d.then((r) => {
          if (r === undefined) return this.decide(ex, i + 1);
          if (!(r instanceof LocalReply)) ex.deniedBy = name;
          return r;
        });
      }
      if (!(d instanceof LocalReply)) ex.deniedBy = p.name;
      return d;
    }
    return undefined;
  }

  /**
   * Starts an exchange and runs every policy's request phase; `error` is the first denial. For
   * synchronous policies only (unit tests and tools); the exchange uses `open` and `decide`.
   */
  begin(head: RequestHead): { ex: OpenExchange; error: GatewayError | undefined; reply?: LocalReply } {
    const ex = this.open(head);
    const d = this.decide(ex);
    if (d instanceof Promise) throw new Error('Chain.begin: a policy decided asynchronously; use decide()');
    if (d instanceof LocalReply) return { ex, error: undefined, reply: d };
    return { ex, error: d };
  }

  /** Runs every policy's body phase on the complete raw body. */
  acceptBody(ex: Exchange, body: Buffer): Decision {
    for (const p of this.onBody) {
      const d = p.onBody(ex, body);
      if (d !== undefined) {
        ex.deniedBy = p.name;
        return d;
      }
    }
    return undefined;
  }

  /** Whether some policy must read the whole upstream body before the response is sent. */
  wantsResponseBody(ex: Exchange, res: UpstreamResponse): boolean {
    for (const p of this.responders) if (p.wantsResponseBody?.(ex, res) === true) return true;
    return false;
  }

  /** Runs every policy's response-body phase on a buffered upstream response. */
  finishResponse(ex: Exchange, res: ResponseBody): ResponseBody {
    let out = res;
    for (const p of this.responders) out = p.onResponseBody(ex, out);
    return out;
  }
}
