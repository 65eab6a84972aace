/**
 * The response cache as a forwarding layer (RFC 9111, as a shared cache), outermost: it sits
 * above breaker accounting, so a hit is no upstream call and tells the breaker nothing.
 *
 * What it stores is the answer the client got, after the response phase: the status, the client
 * fields that do not depend on the request (the header allowlist applied, Content-Length
 * computed) and the final body bytes (a list filtered, unknown fields dropped). The miss that
 * fills an entry runs the response phase once (`onAnswer`) and offers the result (`AnswerKeeper`);
 * every later answer from the entry, the filling miss's own included, is written from it
 * (`onStored`) with the request's own fields (request id, CORS, deprecation, rate limit, Age,
 * Cache-Status). A hit parses nothing and runs no response policy, and its bytes are the bytes
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
import type { GatewayError } from '../errors.js';
import type { OperationId } from '../operations.js';
import type { HeaderValue } from '../policy.js';
import { UpstreamFailure, type AbortReason, type UpstreamControl, type UpstreamRequest } from '../upstream.js';
import { Call, ONE_WRITE_MAX, start, type AnswerKeeper, type ForwardHandler, type Send, type SendWrapper } from './layer.js';

/** The name this cache gives itself in Cache-Status (RFC 9211 section 2). */
export const CACHE_NAME = 'petstore-gateway';

/** One stored answer, as the client gets it but for the request's own fields. Times are milliseconds since the epoch. */
export interface CacheEntry {
  readonly status: number;
  /** The client fields that do not depend on the request, Content-Length included; no Age, no Cache-Status. */
  readonly headers: Readonly<Record<string, string | string[]>>;
  /** The body after the response phase: the bytes the client gets. */
  readonly body: Buffer;
  /**
   * The same bytes as a latin1 string, for a body of at most `ONE_WRITE_MAX` bytes kept in this
   * process: node joins a string with the response head, so a hit leaves in one write without
   * copying the body into a new string each time.
   */
  readonly text?: string;
  /**
   * The same fields as `headers`, as one flat list of names and values (`[name, value, ...]`), for
   * an entry kept in this process: a hit hands node this list, plus its own fields, and node writes
   * a list without the per-field own-property checks and varied property lookups of an object.
   * Absent when there is a `plan`, whose list begins with the same fields.
   */
  readonly fields?: readonly (string | string[])[];
  /**
   * How a hit's list is made, for an entry kept in this process: the fields above with a place for
   * each of the exchange's own fields and for Age and Cache-Status. Made when the entry is kept,
   * from the own fields of the request that filled it: the requests of one route and consumer set
   * the same field names, so a hit copies the list and fills in values only.
   */
  readonly plan?: HitPlan;
  /** When the upstream produced it (the store time less the upstream's Age): the Age is counted from it. */
  readonly born: number;
  readonly freshUntil: number;
  /** Past it, not even a failing upstream makes it worth serving: the store may drop it. */
  readonly staleUntil: number;
}

/** Where entries live: this process (lru-cache) or Redis, shared by every instance. */
export interface CacheStore {
  /** The current list generation: part of every listPets key, moved on by `dropLists`. */
  readonly generation: number;
  /** The entry of `key`, or undefined; a failing shared store answers undefined (a miss), never throws. `now`: the cache's clock when the caller read it already. */
  get(key: string, now?: number): CacheEntry | undefined | Promise<CacheEntry | undefined>;
  /** Stores `entry` under `key` until its `staleUntil`; never throws (a failing store stores nothing). */
  set(key: string, entry: CacheEntry): void;
  /** Every listPets entry becomes unreachable, on every instance sharing the store. */
  dropLists(): void;
  close(): Promise<void>;
}

/** What the cache did with one request; `bypass`: not its to keep (createPet, or an operation with TTL 0). */
export type CacheEvent = 'hit' | 'miss' | 'stale' | 'coalesced' | 'bypass';

/** The cache of one upstream: its store, its rules, its flights in progress and its counts. */
export interface ResponseCache {
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

// ---- Cache-Control --------------------------------------------------------------------------

interface Directives {
  noStore: boolean;
  /** private, no-cache: this shared cache may not answer with it (RFC 9111 sections 5.2.2.4, 5.2.2.7). */
  unshared: boolean;
  /** public, s-maxage, must-revalidate: shareable although the request carried Authorization (section 3.5). */
  shareable: boolean;
  /** must-revalidate, proxy-revalidate, s-maxage: never served stale, not even for a failing upstream (section 4.2.4). */
  noStale: boolean;
  /** s-maxage, else max-age, in seconds. */
  maxAge: number | undefined;
}

function fieldText(v: HeaderValue | number): string {
  return v === undefined ? '' : Array.isArray(v) ? v.join(',') : String(v);
}

/** The directives that decide storing (RFC 9111 section 5.2.2); an unparseable max-age is none. */
export function directives(value: HeaderValue): Directives {
  const d: Directives = { noStore: false, unshared: false, shareable: false, noStale: false, maxAge: undefined };
  let sMaxAge: number | undefined;
  for (const part of fieldText(value).split(',')) {
    const eq = part.indexOf('=');
    const name = (eq < 0 ? part : part.slice(0, eq)).trim().toLowerCase();
    const arg = eq < 0 ? '' : part.slice(eq + 1).trim().replace(/^"|"$/g, '');
    if (name === 'no-store') d.noStore = true;
    else if (name === 'private' || name === 'no-cache') d.unshared = true;
    else if (name === 'public') d.shareable = true;
    else if (name === 'must-revalidate') d.shareable = d.noStale = true;
    else if (name === 'proxy-revalidate') d.noStale = true;
    else if (name === 's-maxage') {
      // Present at all, s-maxage forbids a stale answer (section 5.2.2.10), even with a value it cannot read.
      d.noStale = true;
      if (/^\d{1,10}$/.test(arg)) {
        sMaxAge = Number(arg);
        d.shareable = true;
      }
    } else if (name === 'max-age' && /^\d{1,10}$/.test(arg)) d.maxAge = Number(arg);
  }
  if (sMaxAge !== undefined) d.maxAge = sMaxAge;
  return d;
}

const WEEKDAY = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const MONTH = '(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)';
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
/** IMF-fixdate, the obsolete RFC 850 form and asctime's (RFC 9110 section 5.6.7). */
const IMF_FIXDATE = new RegExp(`^${WEEKDAY}, (\\d{2}) ${MONTH} (\\d{4}) (\\d{2}):(\\d{2}):(\\d{2}) GMT$`);
const RFC850_DATE = new RegExp(`^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-${MONTH}-(\\d{2}) (\\d{2}):(\\d{2}):(\\d{2}) GMT$`);
const ASCTIME_DATE = new RegExp(`^${WEEKDAY} ${MONTH} ([ \\d]\\d) (\\d{2}):(\\d{2}):(\\d{2}) (\\d{4})$`);

/**
 * An HTTP-date (RFC 9110 section 5.6.7) in milliseconds since the epoch; NaN for anything else,
 * a list included. Strict: `Date.parse` reads "0" or "1" as a year, and RFC 9111 section 5.3
 * says such an invalid Expires is a time in the past.
 */
export function httpDate(value: HeaderValue | number): number {
  if (typeof value !== 'string') return NaN;
  let m = IMF_FIXDATE.exec(value);
  if (m !== null) return utc(Number(m[3]), m[2] as string, Number(m[1]), m[4] as string, m[5] as string, m[6] as string);
  m = RFC850_DATE.exec(value);
  if (m !== null) {
    // A two-digit year more than 50 years ahead is in the past century (RFC 9110 section 5.6.7).
    const yy = Number(m[3]);
    const thisYear = new Date().getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + yy;
    if (year > thisYear + 50) year -= 100;
    return utc(year, m[2] as string, Number(m[1]), m[4] as string, m[5] as string, m[6] as string);
  }
  m = ASCTIME_DATE.exec(value);
  if (m !== null) return utc(Number(m[6]), m[1] as string, Number((m[2] as string).trim()), m[3] as string, m[4] as string, m[5] as string);
  return NaN;
}

function utc(year: number, month: string, day: number, h: string, min: string, sec: string): number {
  const t = Date.UTC(year, MONTHS.indexOf(month), day, Number(h), Number(min), Number(sec));
  // Date.UTC rolls 31 Feb over into March: a date that does not exist is no date.
  const d = new Date(t);
  return d.getUTCDate() === day && Number(h) < 24 && Number(min) < 60 && Number(sec) < 61 ? t : NaN;
}

/**
 * Whether the key tells apart every request the answer's Vary says it depends on (RFC 9111 section
 * 4.1). It holds every forwarded field but the unkeyed ones, present or absent, so a Vary naming
 * a keyed field (Accept-Language...) is a variant per key, and one naming a field never forwarded
 * (Accept-Encoding, Origin) names what the upstream never saw. `*` and an unkeyed field (the
 * client's address, a request id, a field declared ignored, the client's own Authorization) are
 * not: such an answer is not stored.
 */
export function varyKeyed(cache: ResponseCache, vary: HeaderValue): boolean {
  if (vary === undefined) return true;
  for (const part of fieldText(vary).split(',')) {
    const name = part.trim().toLowerCase();
    if (name === '*') return false;
    if (cache.unkeyed.has(name) && !(name === 'authorization' && cache.sharedCredential)) return false;
  }
  return true;
}

/** How long an answer stays fresh here (ms, 0: it is not stored), and whether a stale copy of it may ever answer. */
interface Freshness {
  readonly ms: number;
  readonly noStale: boolean;
}

const NOT_STORED: Freshness = { ms: 0, noStale: true };

/**
 * The freshness lifetime of an upstream 200 here (RFC 9111 section 4.2.1): the configured TTL,
 * shortened by the upstream's s-maxage or max-age, else by its Expires less its Date (the time it
 * was received when Date is absent or invalid; an invalid Expires is in the past), less its Age.
 */
function freshness(cache: ResponseCache, request: UpstreamRequest, op: 'listPets' | 'getPet', headers: Readonly<Record<string, HeaderValue>>, now: number): Freshness {
  const d = directives(headers['cache-control']);
  if (d.noStore || d.unshared || !varyKeyed(cache, headers.vary)) return NOT_STORED;
  // A coded answer (gzip...) reaches a client only if its Accept-Encoding, which the key does not
  // hold, accepts the coding (response-contract): what one client may get is not every client's.
  if (headers['content-encoding'] !== undefined && fieldText(headers['content-encoding']).trim().toLowerCase() !== 'identity') return NOT_STORED;
  if (!cache.sharedCredential && request.headers.authorization !== undefined && !d.shareable) return NOT_STORED;
  let limit = cache.ttlMs[op];
  if (d.maxAge !== undefined) limit = Math.min(limit, d.maxAge * 1000);
  else if (headers.expires !== undefined) {
    const expires = httpDate(headers.expires);
    const date = httpDate(headers.date);
    limit = Number.isNaN(expires) ? 0 : Math.min(limit, expires - (Number.isNaN(date) ? now : date));
  }
  const ms = Math.max(0, limit - ageOf(headers) * 1000);
  return ms > 0 ? { ms, noStale: d.noStale } : NOT_STORED;
}

/** The upstream's Age in seconds (RFC 9111 section 5.1); 0 when absent or invalid. */
function ageOf(headers: Readonly<Record<string, HeaderValue>>): number {
  const v = headers.age;
  return typeof v === 'string' && /^\d{1,10}$/.test(v) ? Number(v) : 0;
}

/** The key of a cacheable request, or undefined. listPets keys carry the list generation. */
export function cacheKey(cache: ResponseCache, request: UpstreamRequest): string | undefined {
  if (request.method !== 'GET') return undefined;
  const op = request.operation;
  if (op === 'getPet') return cache.ttlMs.getPet > 0 && request.param !== undefined ? keyOf(cache, request, 0, request.param) : undefined;
  if (op === 'listPets') return cache.ttlMs.listPets > 0 ? keyOf(cache, request, 1, request.query) : undefined;
  return undefined;
}

/**
 * A field's value as the key holds it: `\\`, CR and LF escaped (node's parser and nghttp2 let
 * none of the last two through, so this only makes sure), the lines of a repeated field joined
 * with CR, and, where the difference means nothing to the upstream, one spelling: a host is
 * case-insensitive (RFC 3986 section 3.2.2), and in Accept and Accept-Language the case of media
 * ranges and language tags and the whitespace around `,` and `;` mean nothing (RFC 9110 sections
 * 5.6.1, 12.5.1 and 12.5.4) unless a quoted string is there.
 */
export function keyValue(name: string, value: string | string[] | number | undefined): string {
  if (value === undefined) return '';
  if (typeof value !== 'string') return Array.isArray(value) ? value.map((v) => escaped(v)).join('\r') : String(value);
  if (name === 'x-forwarded-host') return escaped(value.toLowerCase());
  if ((name === 'accept' || name === 'accept-language') && SPELLING.test(value) && !value.includes('"')) return escaped(value.toLowerCase().replace(OWS, ''));
  return escaped(value);
}

const CONTROL = /[\\\r\n]/;
const CONTROLS = /[\\\r\n]/g;

function escaped(value: string): string {
  return CONTROL.test(value) ? value.replace(CONTROLS, (c) => (c === '\\' ? '\\\\' : c === '\n' ? '\\n' : '\\r')) : value;
}

const SPELLING = /[A-Z \t]/;
const OWS = /[ \t]+/g;

/**
 * The forwarded fields' part of a key: `\n<name>=<value>` (`keyValue`) for every field the upstream
 * is sent but the unkeyed ones, in the order of their names, so the order a client sent them in
 * makes no other key. A field's absence is part of it too: two requests of one key carry the same
 * names. Names are tokens and values hold no line feed (node's parser and nghttp2 refuse one), so
 * the text is unambiguous.
 */
export function variantText(fields: readonly (readonly [string, string])[]): string {
  let out = '';
  for (const [name, value] of fields) out += '\n' + name + '=' + value;
  return out;
}

/** The keyed fields of `headers`, by name, their values as the key holds them. */
export function variantOf(cache: ResponseCache, headers: Readonly<Record<string, string | string[] | number>>): string {
  const fields: [string, string][] = [];
  for (const name in headers) if (!cache.unkeyed.has(name)) fields.push([name, keyValue(name, headers[name])]);
  fields.sort((a, b) => (a[0] < b[0] ? -1 : 1));
  return variantText(fields);
}

/**
 * Most `KeyMemo` holds, in bytes it counts (its strings as UTF-16, and `MEMO_ITEM` for each map
 * entry and object): past it, it starts afresh. A bound on its memory (a client may send a
 * User-Agent of 8 KiB, a new one per request), not on the cache: a key not held is made as before.
 */
const KEY_MEMO_MAX_BYTES = 1 << 20;
const MEMO_ITEM = 160;

/**
 * One combination of keyed field values seen lately, reached from the memo's root one field at a
 * time in the order the request holds them: its key text, made once (sorted, so any order reaches
 * the same text), and the keys made with it, by operation and parameter.
 */
class Variant {
  /** name -> value as sent -> the variant with that field too. */
  readonly next = new Map<string, Map<string, Variant>>();
  readonly keys = [new Map<string, string>(), new Map<string, string>()] as const;
  /** The step taken last from here: requests in a row mostly carry the same fields, so two compares find it. */
  lastName = '';
  lastValue = '';
  lastTo: Variant | undefined = undefined;
  constructor(
    /** Its fields as the key holds them, by name. */
    readonly fields: readonly (readonly [string, string])[],
    readonly text: string,
  ) {}
}

/**
 * The keys made lately, for one set of rules and list generation. A key made per request is a new
 * string the store hashes whole (and flattens first: a joined string is kept as its parts until
 * read), after the variant text was joined from the fields; found here, each keyed field costs
 * two compares (the step taken last from there) or two lookups in a map, the parameter one, and
 * the key is the string made before, its hash kept with it.
 */
export class KeyMemo {
  private rules: string | undefined = undefined;
  private generation = -1;
  private root = new Variant([], '');
  private size = 0;

  /** Where a request's walk begins, for these rules and this generation. */
  start(rules: string | undefined, generation: number): Variant {
    if (rules !== this.rules || generation !== this.generation) {
      this.rules = rules;
      this.generation = generation;
      this.clear();
    }
    return this.root;
  }

  /**
   * The variant of `from`'s fields and `name` with `value`, made when new. `slot`: where it is
   * found, `name` for a value sent once, `name` and a NUL (no name has one) for a repeated field,
   * found by `lookup`, the text of its lines.
   */
  step(from: Variant, slot: string, lookup: string, name: string, value: string | string[] | number): Variant {
    if (from.lastName === slot && from.lastValue === lookup && from.lastTo !== undefined) return from.lastTo;
    let byValue = from.next.get(slot);
    let to = byValue?.get(lookup);
    if (to === undefined) {
      const fields = [...from.fields, [name, keyValue(name, value)] as const].sort((a, b) => (a[0] < b[0] ? -1 : 1));
      to = new Variant(fields, variantText(fields));
      if (!this.grow(MEMO_ITEM + 4 * to.text.length + 2 * lookup.length)) return to;
      if (byValue === undefined) from.next.set(slot, (byValue = new Map()));
      byValue.set(lookup, to);
    }
    from.lastName = slot;
    from.lastValue = lookup;
    from.lastTo = to;
    return to;
  }

  /** Counts `bytes` more held; false (nothing is added) when the memo had to start afresh. */
  grow(bytes: number): boolean {
    if (this.size + bytes <= KEY_MEMO_MAX_BYTES) {
      this.size += bytes;
      return true;
    }
    this.clear();
    return false;
  }

  /** Bytes held now, as counted (for tests of the bound). */
  get bytes(): number {
    return this.size;
  }

  private clear(): void {
    this.root = new Variant([], '');
    this.size = 0;
  }
}

function makeKey(cache: ResponseCache, answerRules: string | undefined, op: 0 | 1, generation: number, param: string, variant: string): string {
  const rules = (answerRules === undefined ? '' : `${answerRules} `) + (cache.keyTag ?? '');
  // A parameter holds no line feed (a petId, a query rebuilt by list-pets): `param + variant` is unambiguous.
  return op === 0 ? `${rules}getPet ${param}${variant}` : `${rules}listPets ${generation} ${param}${variant}`;
}

function keyOf(cache: ResponseCache, request: UpstreamRequest, op: 0 | 1, param: string): string {
  const generation = cache.store.generation;
  const memo = cache.keys;
  const headers = request.keyFields ?? request.headers;
  if (memo === undefined) return makeKey(cache, request.answerRules, op, generation, param, variantOf(cache, headers));
  const unkeyed = cache.unkeyed;
  let at = memo.start(request.answerRules, generation);
  for (const name in headers) {
    if (unkeyed.has(name)) continue;
    const value = headers[name] as string | string[];
    // A repeated field (a list) is a new array per request: found by its text instead.
    at = typeof value === 'string' ? memo.step(at, name, value, name, value) : memo.step(at, name + '\0', keyValue(name, value), name, value);
  }
  const keys = at.keys[op];
  let key = keys.get(param);
  if (key !== undefined) return key;
  key = makeKey(cache, request.answerRules, op, generation, param, at.text);
  if (memo.grow(MEMO_ITEM + 2 * key.length)) keys.set(param, key);
  return key;
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
function ageText(born: number, now: number): string {
  const s = Math.max(0, Math.floor((now - born) / 1000));
  return s < SAID_MAX ? (AGE_TEXT[s] ??= String(s)) : String(s);
}

/** Cache-Status of a fresh hit (RFC 9211 section 2): the seconds of freshness it has left. */
function hitStatus(entry: CacheEntry, now: number): string {
  const ttl = Math.floor((entry.freshUntil - now) / 1000);
  return ttl >= 0 && ttl < SAID_MAX ? (HIT_STATUS[ttl] ??= `${CACHE_NAME}; hit; ttl=${ttl}`) : `${CACHE_NAME}; hit; ttl=${ttl}`;
}

// ---- Replaying an answer --------------------------------------------------------------------

/** A stored answer's fields as node's writeHead takes a list: `[name, value, name, value, ...]`. */
export function storedFields(headers: Readonly<Record<string, string | string[]>>): (string | string[])[] {
  const fields: (string | string[])[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined) fields.push(name, value);
  }
  // A copy of its exact length: the list lives as long as its entry, and push leaves spare slots.
  return fields.slice();
}

/**
 * A hit's field list made ahead: `fields` holds the stored fields (the first `stored` items), then a
 * pair for each own field that is not among them, then Age and Cache-Status, with the values that
 * change per request left empty. `names` are the own field names it was made for, in the order
 * the exchange's fields enumerate, and `at` where each one's value goes.
 */
export interface HitPlan {
  readonly fields: readonly (string | string[])[];
  readonly stored: number;
  readonly names: readonly string[];
  readonly at: readonly number[];
}

/** Where `name` is among the first `end` items of a flat field list (`[name, value, ...]`), or -1. */
export function fieldAt(fields: readonly (string | string[])[], end: number, name: string): number {
  for (let i = 0; i < end; i += 2) if (fields[i] === name) return i;
  return -1;
}

/** The plan of a hit's list for the stored `fields` and the own fields named in `own` (those with a value). */
export function hitPlan(fields: readonly (string | string[])[], own: Readonly<Record<string, HeaderValue>>): HitPlan {
  const out = fields.slice();
  const names: string[] = [];
  const at: number[] = [];
  for (const name in own) {
    if (own[name] === undefined) continue;
    let i = fieldAt(fields, fields.length, name);
    if (i < 0) {
      i = out.length;
      out.push(name, '');
    }
    names.push(name);
    at.push(i + 1);
  }
  out.push('age', '', 'cache-status', '');
  // Copies of their exact length: they live as long as their entry, and push leaves spare slots.
  return { fields: out.slice(), stored: fields.length, names: names.slice(), at: at.slice() };
}

/** A handler the cache can answer: it takes a whole answer to finish, and a stored one. */
type CacheClient = ForwardHandler & Required<Pick<ForwardHandler, 'onAnswer' | 'onStored'>>;

function isCacheClient(handler: ForwardHandler): handler is CacheClient {
  return handler.onAnswer !== undefined && handler.onStored !== undefined;
}

/**
 * What a client request waits on: its handler, and the call it is part of (a `Call` with no part of
 * a layer; the flight, not the subscriber, sends). Its own request: a transport may work through
 * the front's request object (`native`).
 */
class Subscriber extends Call {
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
  serve(entry: CacheEntry, status: string, now: number, called: boolean): void {
    if (this.done) return;
    this.flight = undefined;
    this.done = true;
    this.client.onStored(entry, ageText(entry.born, now), status, called);
  }

  /** Hands the upstream's answer whole to the handler, whose response phase offers `keeper` the result. */
  deliver(headers: Readonly<Record<string, string | string[]>>, body: Buffer, keeper: AnswerKeeper): void {
    if (this.done) return;
    this.flight = undefined;
    this.done = true;
    this.client.onAnswer(200, headers, body, keeper);
  }
}

function ttlParam(entry: CacheEntry, now: number): string {
  return `ttl=${Math.floor((entry.freshUntil - now) / 1000)}`;
}


/**
 * One upstream call that several identical requests wait on. It is the handler the layer below
 * calls; its subscribers are the client requests. Storing mode: the body is held whole (up to
 * `maxEntryBytes`) and handed to one subscriber's response phase, which offers back what it
 * sends (`keep`); that is stored, and every other subscriber answered with it. Pass mode (an answer that may not
 * be stored or shared): the first subscriber gets the call as it comes, the others send their own.
 */
export class Flight implements ForwardHandler, AnswerKeeper {
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
    for (const sub of subs) sub.serve(entry, status, now, called);
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
        sub.serve(this.kept, i === 0 ? status : `${status}; collapsed`, now, true);
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
  keep(status: number, headers: Readonly<Record<string, HeaderValue | number>>, body: Buffer, own?: Readonly<Record<string, HeaderValue>>): CacheEntry | undefined {
    if (!this.keeping || this.kept !== undefined || status !== 200) return undefined;
    const stored: Record<string, string | string[]> = {};
    for (const name in headers) {
      const v = headers[name];
      if (v === undefined || name === 'age' || name === 'cache-status' || name === 'content-length') continue;
      stored[name] = typeof v === 'number' ? String(v) : v;
    }
    stored['content-length'] = String(body.length);
    const text = body.length <= ONE_WRITE_MAX ? body.toString('latin1') : undefined;
    const fields = storedFields(stored);
    const plan = own === undefined ? undefined : hitPlan(fields, own);
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
 * The layer: hits are answered here, misses join or start a flight, createPet invalidates. The
 * breaker's admission is below (forward/breaker.ts): a hit or a coalesced request asks nothing of it.
 */
export function responseCache(cache: ResponseCache): SendWrapper {
  return (next: Send): Send =>
    (request, handler: ForwardHandler) => {
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
        if (found !== undefined && now < found.freshUntil) return hit(cache, handler, found, now);
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
function hit(cache: ResponseCache, handler: CacheClient, entry: CacheEntry, now: number): void {
  cache.counts.hit++;
  handler.onStored(entry, ageText(entry.born, now), hitStatus(entry, now), false);
}

function lookup(cache: ResponseCache, next: Send, request: UpstreamRequest, key: string, sub: Subscriber, entry: CacheEntry | undefined): void {
  if (sub.done) return;
  const now = cache.now();
  if (entry !== undefined && now < entry.freshUntil) {
    cache.counts.hit++;
    return sub.serve(entry, hitStatus(entry, now), now, false);
  }
  const running = cache.flights.get(key);
  if (running !== undefined) {
    cache.counts.coalesced++;
    return running.join(sub);
  }
  cache.counts.miss++;
  const op = request.operation as Exclude<OperationId, 'createPet'>;
  const stale = entry !== undefined && now < entry.staleUntil ? entry : undefined;
  const flight = new Flight(cache, key, op, request, next, stale);
  cache.flights.set(key, flight);
  flight.join(sub);
  next(request, flight);
}
