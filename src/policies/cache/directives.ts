/** What the upstream's answer says about storing it: Cache-Control, its dates, Vary and Age (RFC 9111). */
import type { HeaderValue } from '../../core/policy.js';
import type { UpstreamRequest } from '../../core/upstream.js';

/** What storing an answer depends on, of the cache's rules (`ResponseCache`, flight.ts). */
export interface StoringRules {
  /** Freshness lifetime per cacheable operation, ms (0: not cached). */
  readonly ttlMs: Readonly<Record<'listPets' | 'getPet', number>>;
  /** Whether the upstream sees the gateway's own credential (or none) as Authorization. */
  readonly sharedCredential: boolean;
  /** Forwarded request fields left out of the key (lower-case). */
  readonly unkeyed: ReadonlySet<string>;
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
export function varyKeyed(cache: StoringRules, vary: HeaderValue): boolean {
  if (vary === undefined) return true;
  for (const part of fieldText(vary).split(',')) {
    const name = part.trim().toLowerCase();
    if (name === '*') return false;
    if (cache.unkeyed.has(name) && !(name === 'authorization' && cache.sharedCredential)) return false;
  }
  return true;
}

/** How long an answer stays fresh here (ms, 0: it is not stored), and whether a stale copy of it may ever answer. */
export interface Freshness {
  readonly ms: number;
  readonly noStale: boolean;
}

const NOT_STORED: Freshness = { ms: 0, noStale: true };

/**
 * The freshness lifetime of an upstream 200 here (RFC 9111 section 4.2.1): the configured TTL,
 * shortened by the upstream's s-maxage or max-age, else by its Expires less its Date (the time it
 * was received when Date is absent or invalid; an invalid Expires is in the past), less its Age.
 */
export function freshness(cache: StoringRules, request: UpstreamRequest, op: 'listPets' | 'getPet', headers: Readonly<Record<string, HeaderValue>>, now: number): Freshness {
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
export function ageOf(headers: Readonly<Record<string, HeaderValue>>): number {
  const v = headers.age;
  return typeof v === 'string' && /^\d{1,10}$/.test(v) ? Number(v) : 0;
}
