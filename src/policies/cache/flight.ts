/**
 * Single flight: identical misses wait for one upstream call (a `Flight`); its answer is offered
 * to the exchange's response phase, kept, and every waiter is written from the entry.
 */
import type { GatewayError } from '../../core/errors.js';
import type { HeaderValue } from '../../core/policy.js';
import { UpstreamFailure, type AbortReason, type UpstreamControl, type UpstreamRequest } from '../../core/upstream.js';
import { Call, ONE_WRITE_MAX, type AnswerTaker, type ForwardHandler, type Send } from '../../core/forward/layer.js';
import { fieldPlan, flatFields } from '../../core/forward/answer.js';
import { ageOf, freshness, type StoringRules } from './directives.js';
import type { KeyMemo, KeyRules } from './key.js';
import { CACHE_NAME, TRAILING_FIELDS, type CacheEntry, type CacheEvent, type CacheStore } from './types.js';
import { TRACE_EVENTS } from '../../core/trace.js';

/** The cache of one upstream: its store, its rules, its flights in progress and its counts. */
export interface ResponseCache extends KeyRules, StoringRules {
  readonly store: CacheStore;
  /** Freshness lifetime per cacheable operation, ms (0: not cached). */
  readonly ttlMs: Readonly<Record<'listPets' | 'getPet', number>>;
  /** How long past freshness a stale copy may answer for a failing upstream, ms. */
  readonly staleMs: number;
  /**
   * True when the upstream sees the gateway's own credential (or none) as Authorization, the same
   * for every client; false when the client's Authorization is forwarded, and then an answer is
   * stored only when the upstream marks it shareable (RFC 9111 section 3.5).
   */
  readonly sharedCredential: boolean;
  /**
   * Forwarded request fields left out of the key (lower-case): the request ids, the client's
   * address, Authorization (above), and the fields the operator declared the upstream ignores
   * (`ignoreRequestFields`). Every other field the upstream is sent is part of the key.
   */
  readonly unkeyed: ReadonlySet<string>;
  /**
   * What sets these keys apart from those of a cache that leaves other fields out (an instance
   * with another `ignoreRequestFields` on the same Redis store), ending in a space; none when
   * nothing is ignored.
   */
  readonly keyTag?: string;
  /** Most body bytes held to store one answer; a bigger one is not stored. */
  readonly maxEntryBytes: number;
  readonly now: () => number;
  readonly flights: Map<string, Flight>;
  /** The keys made lately (`KeyMemo`); none: every key is made per request. */
  readonly keys?: KeyMemo;
  readonly counts: Record<CacheEvent, number>;
  /** Where an exception of the layer's own asynchronous work goes (the exchange logs it). */
  readonly crashed?: (err: unknown) => void;
}
/**
 * Field values a hit repeats, made once per value of their whole seconds: every hit within a
 * second of an entry says the same Age and Cache-Status. Bounded: past `SAID_MAX` seconds a value
 * is formatted per request.
 */
const SAID_MAX = 4096;
const AGE_TEXT: (string | undefined)[] = new Array<string | undefined>(SAID_MAX).fill(undefined);
const HIT_STATUS: (string | undefined)[] = new Array<string | undefined>(SAID_MAX).fill(undefined);

/** Seconds since the answer was made (RFC 9111 section 5.1), as the Age field says it. */
export function ageText(born: number, now: number): string {
  const s = Math.max(0, Math.floor((now - born) / 1000));
  return s < SAID_MAX ? (AGE_TEXT[s] ??= String(s)) : String(s);
}

/** Cache-Status of a fresh hit (RFC 9211 section 2): the seconds of freshness it has left. */
export function hitStatus(entry: CacheEntry, now: number): string {
  const ttl = Math.floor((entry.freshUntil - now) / 1000);
  return ttl >= 0 && ttl < SAID_MAX ? (HIT_STATUS[ttl] ??= `${CACHE_NAME}; hit; ttl=${ttl}`) : `${CACHE_NAME}; hit; ttl=${ttl}`;
}

/**
 * A stored answer's trailing values (`TRAILING_FIELDS`: Age, Cache-Status), in one list reused:
 * the exchange copies them as it writes the answer (`onFinished`), so a hit makes no list.
 */
const SAID: string[] = ['', ''];

export function said(age: string, status: string): readonly string[] {
  SAID[0] = age;
  SAID[1] = status;
  return SAID;
}

// ---- Replaying an answer --------------------------------------------------------------------

/** A handler the cache can answer: it takes a whole answer to finish, and a finished one. */
export type CacheClient = ForwardHandler & Required<Pick<ForwardHandler, 'onWhole' | 'onFinished'>>;

export function isCacheClient(handler: ForwardHandler): handler is CacheClient {
  return handler.onWhole !== undefined && handler.onFinished !== undefined;
}

/**
 * What a client request waits on: its handler, and the call it is part of (a `Call` with no part of
 * a layer; the flight, not the subscriber, sends). Its own request: a transport may work through
 * the front's request object (`native`).
 */
export class Subscriber extends Call {
  flight: Flight | undefined = undefined;
  private started = false;

  constructor(
    readonly client: CacheClient,
    request: UpstreamRequest,
    below: Send,
  ) {
    super(client, request, below);
  }

  /** Starts the handler once; a later call of its own only replaces the control. */
  override onStart(control: UpstreamControl | undefined): void {
    if (this.started) {
      this.control = control;
      if (this.done) control?.abort();
      return;
    }
    this.started = true;
    this.control = control;
    this.handler.onStart(this);
  }

  override abort(reason?: AbortReason): void {
    const flight = this.flight;
    this.done = true;
    if (flight !== undefined) flight.leave(this, reason);
    else this.control?.abort(reason);
  }

  /** Answers with a stored entry, as it is (no response phase runs again); `called`: whether a call went upstream for it. */
  serve(entry: CacheEntry, status: string, now: number, called: boolean, event?: 'hit' | 'stale' | 'collapsed'): void {
    if (this.done) return;
    this.flight = undefined;
    this.done = true;
    if (event !== undefined) this.request.exchange?.trace?.event(TRACE_EVENTS.cache, { 'gateway.cache.status': event });
    this.client.onFinished(entry, said(ageText(entry.born, now), status), called);
  }

  /** Hands the upstream's answer whole to the handler, whose response phase offers `taker` the result. */
  deliver(headers: Readonly<Record<string, string | string[]>>, body: Buffer, taker: AnswerTaker): void {
    if (this.done) return;
    this.flight = undefined;
    this.done = true;
    this.client.onWhole(200, headers, body, taker);
  }
}

function ttlParam(entry: CacheEntry, now: number): string {
  return `ttl=${Math.floor((entry.freshUntil - now) / 1000)}`;
}


/**
 * One upstream call that several identical requests wait on. It is the handler the layer below
 * calls; its subscribers are the client requests. Storing mode: the body is held whole (up to
 * `maxEntryBytes`) and handed to one subscriber's response phase, which offers back what it
 * sends (`take`); that is stored, and every other subscriber answered with it. Pass mode (an answer that may not
 * be stored or shared): the first subscriber gets the call as it comes, the others send their own.
 */
export class Flight implements ForwardHandler, AnswerTaker {
  private readonly subs: Subscriber[] = [];
  /** The answer kept from this call, once a subscriber's response phase offered it. */
  private kept: CacheEntry | undefined = undefined;
  /** True while a subscriber's response phase runs on the answer: only then is an offer taken. */
  private keeping = false;
  private born = 0;
  private storedAt = 0;
  private control: UpstreamControl | undefined = undefined;
  private headers: Readonly<Record<string, HeaderValue>> = {};
  private mode: 'pending' | 'store' | 'pass' | 'drain' = 'pending';
  private fresh = 0;
  /** The answer forbids stale copies of itself (must-revalidate, proxy-revalidate, s-maxage). */
  private noStale = false;
  private passTo: Subscriber | undefined = undefined;

  constructor(
    private readonly cache: ResponseCache,
    private readonly key: string,
    private readonly op: 'listPets' | 'getPet',
    /** The request the call was sent with: the first subscriber's, until that one leaves. */
    private request: UpstreamRequest,
    private readonly next: Send,
    /** The stale copy, when there is one still within the stale-if-error window. */
    private readonly stale: CacheEntry | undefined,
  ) {}

  join(sub: Subscriber): void {
    sub.flight = this;
    this.subs.push(sub);
  }

  /**
   * A subscriber's client left: when nobody waits any more, the call is abandoned. When the one
   * whose request the call was sent with leaves, the call is sent again with the next one's: a
   * transport that works through the front's request object (http-proxy-3, reply-from) ends its
   * call with that client, and the others would wait for an answer that never comes.
   */
  leave(sub: Subscriber, reason?: AbortReason): void {
    const i = this.subs.indexOf(sub);
    if (i >= 0) this.subs.splice(i, 1);
    if (this.passTo === sub) {
      this.passTo = undefined;
      this.control?.abort(reason);
      return;
    }
    if (this.mode !== 'pending' && this.mode !== 'store') return;
    const heir = this.subs[0];
    if (heir === undefined) {
      if (this.mode === 'pending') {
        this.end();
        this.control?.abort(reason);
      }
      return;
    }
    if (sub.request !== this.request) return;
    const old = this.control;
    this.control = undefined;
    this.mode = 'pending';
    this.request = heir.request;
    old?.abort('abandoned');
    this.next(this.request, this);
  }

  private end(): void {
    if (this.cache.flights.get(this.key) === this) this.cache.flights.delete(this.key);
  }

  onStart(control: UpstreamControl): void {
    this.control = control;
    if (this.subs.length === 0) control.abort();
  }

  onHead(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    if (status === 200) {
      const f = freshness(this.cache, this.request, this.op, headers, this.cache.now());
      this.fresh = f.ms;
      this.noStale = f.noStale;
      if (this.fresh > 0) {
        this.mode = 'store';
        this.headers = headers;
        return this.cache.maxEntryBytes;
      }
    }
    this.end();
    if (status >= 500 && this.serveStale(`fwd=stale; fwd-status=${status}; `, 'stale-if-error', true)) {
      // The error body is read and dropped, so the layers below see the call end as it ended.
      this.mode = 'drain';
      return 0;
    }
    return this.pass(status, headers, errorCode);
  }

  /** The answer goes to the first subscriber only; every other sends its own call. */
  private pass(status: number, headers: Readonly<Record<string, HeaderValue>>, errorCode?: string): number {
    this.mode = 'pass';
    const [first, ...rest] = this.subs;
    this.subs.length = 0;
    for (const sub of rest) {
      sub.flight = undefined;
      this.next(sub.request, sub);
    }
    if (first === undefined) {
      this.control?.abort();
      return 0;
    }
    first.flight = this;
    first.control = this.control;
    this.passTo = first;
    const out: Record<string, HeaderValue> = {};
    for (const name in headers) out[name] = headers[name];
    out['cache-status'] = `${CACHE_NAME}; fwd=${this.stale === undefined ? 'uri-miss' : 'stale'}; fwd-status=${status}`;
    return first.onHead(status, out, errorCode);
  }

  /**
   * Answers every subscriber from the stale copy, when there is one; false otherwise. `params`:
   * what Cache-Status says before the (negative) ttl (RFC 9211 section 2): `fwd=stale` when the
   * call went forward and failed, `hit` when it was never sent.
   */
  private serveStale(params: string, detail: string, called: boolean): boolean {
    const entry = this.stale;
    const now = this.cache.now();
    if (entry === undefined || now >= entry.staleUntil || this.subs.length === 0) return false;
    const subs = this.subs.splice(0);
    const status = `${CACHE_NAME}; ${params}${ttlParam(entry, now)}; detail=${detail}`;
    this.cache.counts.stale += subs.length;
    for (const sub of subs) sub.serve(entry, status, now, called, 'stale');
    return true;
  }

  onData(chunk: Buffer): void {
    if (this.mode === 'pass') this.passTo?.onData(chunk);
  }

  onBody(body: Buffer, truncated: boolean): void {
    if (this.mode === 'pass') return this.passTo?.onBody(body, truncated);
    if (this.mode !== 'store') return;
    this.end();
    const subs = this.subs.splice(0);
    if (truncated) {
      const failure = new UpstreamFailure('invalid_response');
      for (const sub of subs) sub.onFailure(failure);
      return;
    }
    const now = this.cache.now();
    this.storedAt = now;
    this.born = now - ageOf(this.headers) * 1000;
    const fwd = this.stale === undefined ? 'uri-miss' : 'stale';
    const status = `${CACHE_NAME}; fwd=${fwd}; fwd-status=200; stored; ttl=${Math.floor(this.fresh / 1000)}`;
    const head = this.answerHead(body, now, status);
    for (let i = 0; i < subs.length; i++) {
      const sub = subs[i] as Subscriber;
      // The first subscriber whose response phase offers its answer fills the entry; the others
      // get that entry. One whose phase made no shareable answer (a contract violation) kept
      // nothing: the next runs its own phase on the upstream's answer.
      if (this.kept !== undefined) {
        sub.serve(this.kept, i === 0 ? status : `${status}; collapsed`, now, true, i === 0 ? undefined : 'collapsed');
        continue;
      }
      this.keeping = true;
      sub.deliver(i === 0 ? head : { ...head, 'cache-status': `${status}; collapsed` }, body, this);
      this.keeping = false;
    }
  }

  /** The upstream's fields for the response phase: framing, its own Age and cache names replaced by what this cache says. */
  private answerHead(body: Buffer, now: number, status: string): Record<string, string | string[]> {
    const head: Record<string, string | string[]> = {};
    for (const name in this.headers) {
      const v = this.headers[name];
      if (v !== undefined && name !== 'transfer-encoding' && name !== 'age' && name !== 'cache-status' && name !== 'connection' && name !== 'content-length') head[name] = v;
    }
    head['content-length'] = String(body.length);
    head.age = ageText(this.born, now);
    head['cache-status'] = status;
    return head;
  }

  /**
   * A subscriber's response phase offers what it sends: kept, unless it is not the shareable 200.
   * Age and Cache-Status are the request's own; Content-Length is the final body's.
   */
  take(status: number, headers: Readonly<Record<string, HeaderValue | number>>, body: Buffer, own?: Readonly<Record<string, HeaderValue>>): CacheEntry | undefined {
    if (!this.keeping || this.kept !== undefined || status !== 200) return undefined;
    const stored: Record<string, string | string[]> = {};
    for (const name in headers) {
      const v = headers[name];
      if (v === undefined || name === 'age' || name === 'cache-status' || name === 'content-length') continue;
      stored[name] = typeof v === 'number' ? String(v) : v;
    }
    stored['content-length'] = String(body.length);
    const text = body.length <= ONE_WRITE_MAX ? body.toString('latin1') : undefined;
    const fields = flatFields(stored);
    const plan = own === undefined ? undefined : fieldPlan(fields, own, TRAILING_FIELDS);
    // With a plan, its list holds the stored fields first: the entry keeps one list, not two.
    // An answer that forbids stale copies (RFC 9111 section 4.2.4) has no stale-if-error window: the store drops it once it is stale.
    const freshUntil = this.storedAt + this.fresh;
    const entry: CacheEntry = { status, headers: stored, body, text, fields: plan === undefined ? fields : undefined, plan, born: this.born, freshUntil, staleUntil: this.noStale ? freshUntil : freshUntil + this.cache.staleMs };
    this.cache.store.set(this.key, entry);
    this.kept = entry;
    return entry;
  }

  onEnd(): void {
    if (this.mode === 'pass') this.passTo?.onEnd();
  }

  onFailure(failure: UpstreamFailure): void {
    if (this.mode === 'drain') return;
    if (this.mode === 'pass') return this.passTo?.onFailure(failure);
    this.end();
    // RFC 5861 section 4: "an error is any situation that would result in a 500, 502, 503 or 504",
    // which every failure kind is (refused, reset, a timeout, an answer that is not HTTP, TLS).
    if (this.serveStale('fwd=stale; ', 'stale-if-error', true)) return;
    for (const sub of this.subs.splice(0)) sub.onFailure(failure);
  }

  /**
   * The breaker refused the call: the upstream is failing (RFC 5861 section 4 counts any error
   * reaching the origin). A stale copy within the window answers, as a stale hit (nothing went
   * forward, RFC 9211 section 3: negative ttl), and tells the breaker nothing; else the 503.
   */
  onRefused(err: GatewayError): void {
    if (this.mode === 'drain') return;
    if (this.mode === 'pass') return this.passTo?.onRefused(err);
    this.end();
    if (this.serveStale('hit; ', 'circuit-open', false)) return;
    for (const sub of this.subs.splice(0)) sub.onRefused(err);
  }
}
