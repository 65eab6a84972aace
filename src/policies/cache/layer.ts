/**
 * The response cache as a forwarding layer (RFC 9111, as a shared cache), outermost: it sits
 * above breaker accounting, so a hit is no upstream call and tells the breaker nothing.
 *
 * What it stores is the answer the client got, after the response phase: the status, the client
 * fields that do not depend on the request (the header allowlist applied, Content-Length
 * computed) and the final body bytes (a list filtered, unknown fields dropped): a finished answer
 * (src/core/forward/answer.ts), through the exchange's generic capabilities. The miss that fills an
 * entry has the response phase run once on the upstream's whole answer (`onWhole`), which offers
 * the result back (`AnswerTaker.take`); every later answer from the entry, the filling miss's own
 * included, is written from it as a finished answer (`onFinished`) with the request's own fields
 * (request id, CORS, deprecation, rate limit), then the cache's trailing ones (Age, Cache-Status). A hit parses nothing and runs no response policy, and its bytes are the bytes
 * the miss sent (an int64 stays exact). The request phase (authentication, the rate limit,
 * parameter validation) runs before the layer is reached, for hits as for misses.
 *
 * - Key: the rules that made the stored answer (`UpstreamRequest.answerRules`: a reload that
 *   changes a policy or the header rules starts afresh), the operation and its normalised
 *   parameters: getPet's petId, listPets' upstream query, which `list-pets` rebuilt from the
 *   validated values with `limit` explicit, never the raw query; and every request field the
 *   upstream is sent that its answer may depend on (`variantOf`: X-Forwarded-Host and -Proto,
 *   Accept, Accept-Language, User-Agent, each `headers.request.allow` entry), so one client's
 *   variant is never another's. An answer whose Vary names a field the key leaves out (`*`, the
 *   client's address, a request id) is not stored.
 * - Single flight: identical misses wait for one upstream call (a `Flight`). When its answer may
 *   not be shared (not a storable 200), the waiters send their own calls: a `private` answer is
 *   never handed to another client. A transport failure carries no data and is shared.
 * - stale-if-error (RFC 5861): within the window, a failed call (refused, reset, timed out...), a
 *   5xx answer or a call the open circuit breaker refused is answered from the stale copy, and
 *   Cache-Status says so (`fwd=stale` with the status, or a stale `hit` when nothing was sent).
 * - Invalidation: a 2xx to createPet moves the store to a new list generation (RFC 9111 section
 *   4.4): every list entry is then unreachable at once, in O(1), and ages out of the LRU.
 */

import type { HeaderValue } from '../../core/policy.js';
import type { UpstreamRequest } from '../../core/upstream.js';
import { Call, start, type ForwardHandler, type Send, type SendWrapper } from '../../core/forward/layer.js';
import { ageText, Flight, hitStatus, isCacheClient, said, Subscriber, type CacheClient, type ResponseCache } from './flight.js';
import { cacheKey } from './key.js';
import { ACCOUNT_FIELDS, CACHE_NAME, TRAILING_FIELDS, type CacheEntry } from './types.js';
import { TRACE_EVENTS } from '../../core/trace.js';

/**
 * A request the cache does not keep, passed through and said so (RFC 9211 section 2.2): createPet
 * is `fwd=method` (a POST must go forward), and a 2xx to it drops every list entry; an operation
 * whose TTL is 0 is `fwd=bypass`.
 */
class Bypass extends Call {
  constructor(
    handler: ForwardHandler,
    request: UpstreamRequest,
    below: Send,
    private readonly cache: ResponseCache,
    private readonly create: boolean,
  ) {
    super(handler, request, below);
  }

  override onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    if (this.create && status >= 200 && status < 300 && this.cache.ttlMs.listPets > 0) this.cache.store.dropLists();
    const out: Record<string, HeaderValue> = {};
    for (const name in headers) out[name] = headers[name];
    out['cache-status'] = `${CACHE_NAME}; fwd=${this.create ? 'method' : 'bypass'}; fwd-status=${status}`;
    return super.onHead(status, out, errorCode);
  }
}

/**
 * The layer, as the exchange gets it: a wrapper of the composed send that writes Age and
 * Cache-Status after a stored answer, and whose Cache-Status on a passed answer is its own.
 */
export function responseCache(cache: ResponseCache): SendWrapper {
  return { wrap: (next) => cached(cache, next), trailing: TRAILING_FIELDS, account: ACCOUNT_FIELDS };
}

/**
 * Hits are answered here, misses join or start a flight, createPet invalidates. The breaker's
 * admission is below (forward/breaker.ts): a hit or a coalesced request asks nothing of it.
 */
function cached(cache: ResponseCache, next: Send): Send {
  return (request, handler: ForwardHandler) => {
    const key = cacheKey(cache, request);
    if (key === undefined || !isCacheClient(handler)) {
      cache.counts.bypass++;
      return start(new Bypass(handler, request, next, cache, request.operation === 'createPet'));
    }
    const now = cache.now();
    const found = cache.store.get(key, now);
    if (!(found instanceof Promise)) {
      // A fresh entry at hand is written at once: nothing waits and nothing runs, so no
      // subscriber is made (the handler is told nothing else, not even a start).
      if (found !== undefined && now < found.freshUntil) return hit(cache, request, handler, found, now);
      return lookup(cache, next, request, key, subscribe(handler, request, next), found);
    }
    const sub = subscribe(handler, request, next);
    found.then(
      (entry) => lookup(cache, next, request, key, sub, entry),
      () => lookup(cache, next, request, key, sub, undefined),
    ).catch((err: unknown) => cache.crashed?.(err));
  };
}

function subscribe(handler: CacheClient, request: UpstreamRequest, below: Send): Subscriber {
  const sub = new Subscriber(handler, request, below);
  sub.onStart(undefined);
  return sub;
}

/** Answers from a fresh entry. */
function hit(cache: ResponseCache, request: UpstreamRequest, handler: CacheClient, entry: CacheEntry, now: number): void {
  cache.counts.hit++;
  request.exchange?.trace?.event(TRACE_EVENTS.cache, { 'gateway.cache.status': 'hit' });
  handler.onFinished(entry, said(ageText(entry.born, now), hitStatus(entry, now)), false);
}

function lookup(cache: ResponseCache, next: Send, request: UpstreamRequest, key: string, sub: Subscriber, entry: CacheEntry | undefined): void {
  if (sub.done) return;
  const now = cache.now();
  if (entry !== undefined && now < entry.freshUntil) {
    cache.counts.hit++;
    return sub.serve(entry, hitStatus(entry, now), now, false, 'hit');
  }
  const running = cache.flights.get(key);
  if (running !== undefined) {
    cache.counts.coalesced++;
    return running.join(sub);
  }
  cache.counts.miss++;
  const op = request.operation as 'listPets' | 'getPet';
  const stale = entry !== undefined && now < entry.staleUntil ? entry : undefined;
  const flight = new Flight(cache, key, op, request, next, stale);
  cache.flights.set(key, flight);
  flight.join(sub);
  next(request, flight);
}
