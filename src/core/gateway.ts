/**
 * The chain: runs the policies in their stated order and stops at the first denial. It knows
 * nothing of HTTP frameworks; adapters give it a RequestHead and, for createPet, the raw body.
 */
import type { GatewayError } from './errors.js';
import { matchRoute, splitTarget } from './operations.js';
import type { Decision, Exchange, Policy, RequestHead, ResponseBody, UpstreamResponse } from './policy.js';

/**
 * Response phases run in the same order as request phases: `upstream-errors` turns a non-2xx into
 * the Error shape before `list-pets` and `response-contract` look at 2xx bodies.
 */
export class Chain {
  private readonly annotators: ReadonlyArray<Policy>;
  private readonly onRequest: ReadonlyArray<Policy>;
  private readonly onBody: ReadonlyArray<Policy>;
  private readonly responders: ReadonlyArray<Policy>;

  constructor(readonly policies: ReadonlyArray<Policy>) {
    this.annotators = policies.filter((p) => p.annotate !== undefined);
    this.onRequest = policies.filter((p) => p.onRequest !== undefined);
    this.onBody = policies.filter((p) => p.onBody !== undefined);
    this.responders = policies.filter((p) => p.onResponseBody !== undefined);
  }

  /** Starts an exchange and runs every policy's request phase; `error` is the first denial. */
  begin(head: RequestHead): { ex: Exchange; error: GatewayError | undefined } {
    const { path, query } = splitTarget(head.target);
    const route = matchRoute(head.method, path);
    const ex: Exchange = {
      head,
      route,
      operation: route.kind === 'operation' ? route.operation : undefined,
      petId: route.kind === 'operation' ? route.petId : undefined,
      rawQuery: query,
      // Only listPets has query parameters ("Endpoints"); `list-pets` rebuilds them from the
      // validated values. Nothing of the client's query reaches the upstream otherwise.
      upstreamQuery: '',
      upstreamHeaders: {},
      responseHeaders: {},
      upstreamBody: undefined,
      keyId: undefined,
      list: undefined,
    };
    for (const p of this.annotators) p.annotate!(ex);
    for (const p of this.onRequest) {
      const d = p.onRequest!(ex) as Decision; // interim: the exchange (issue 11) awaits async decisions
      if (d !== undefined) return { ex, error: d };
    }
    return { ex, error: undefined };
  }

  /** Runs every policy's body phase on the complete raw body. */
  acceptBody(ex: Exchange, body: Buffer): Decision {
    for (const p of this.onBody) {
      const d = p.onBody!(ex, body);
      if (d !== undefined) return d;
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
    for (const p of this.responders) out = p.onResponseBody!(ex, out);
    return out;
  }
}
