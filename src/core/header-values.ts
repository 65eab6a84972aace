/**
 * Single header field values the gateway reads or rewrites (RFC 9110, RFC 9111): Host syntax and
 * count, Cache-Control on an authenticated answer, Vary, content codings, and the bound on an
 * upstream's field count. Each is a small pure function; headers.ts applies them per message.
 */
import { isIPv6 } from 'node:net';
import type { HeaderValue } from './policy.js';

/**
 * Host (RFC 9110 section 7.2: uri-host [":" port], RFC 3986 section 3.2.2): an IP literal in
 * brackets, or a reg-name of unreserved characters, sub-delims and %-escapes (an IPv4 address is
 * one), then an optional port of digits. Empty is allowed (a target without authority).
 */
const HOST = /^(?:\[[0-9A-Fa-f:.]{2,45}\]|(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2}){0,253})(?::[0-9]{0,5})?$/;

/**
 * The last Host value found valid: nearly every request names the same host, and comparing two
 * short strings costs less than running the pattern again (bench/instr.mjs counts the pattern at
 * about 1,000 instructions per request). Only a valid value is kept, so a match is valid.
 */
let lastValidHost = '';

/**
 * Whether a Host header value is valid (RFC 9110 section 7.2). A repeated Host (an array) is not:
 * RFC 9112 section 3.2 requires a 400 for more than one Host line or an invalid value.
 */
export function isValidHost(value: string | string[] | undefined): boolean {
  if (value === undefined || value === lastValidHost) return true;
  if (typeof value !== 'string') return false;
  if (!HOST.test(value)) return false;
  if (value.charCodeAt(0) === 91) {
    // An IP literal: the bracketed part must be an IPv6 address (IPvFuture is not used on the web).
    const end = value.indexOf(']');
    if (!isIPv6(value.slice(1, end))) return false;
  }
  lastValidHost = value;
  return true;
}

/**
 * How many Host fields a request carried (RFC 9112 section 3.2: more than one is a 400). node keeps
 * only the first in `req.headers`, so the raw list is counted: one comparison of length per field,
 * a lower-casing only for the 4-letter names.
 */
export function hostFieldCount(rawHeaders: readonly string[]): number {
  let hosts = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!; // i < rawHeaders.length: noUncheckedIndexedAccess cannot follow the loop's bound
    if (name.length === 4 && name.toLowerCase() === 'host') hosts++;
  }
  return hosts;
}

/**
 * RFC 9111 section 3.5: a shared cache may store an answer to a request with Authorization only
 * when the answer says `public`, `s-maxage` or `must-revalidate`. An upstream that says so for one
 * consumer's answer would let a CDN serve it to another, so on an authenticated answer `public`
 * and `s-maxage` are removed and `private` added when any of the three is present; every other
 * directive (max-age, no-store, must-revalidate...) is kept.
 */
export function privateCacheControl(value: HeaderValue | number | undefined): HeaderValue | number | undefined {
  if (value === undefined || typeof value === 'number') return value;
  const kept: string[] = [];
  let invited = false;
  let isPrivate = false;
  for (const part of (Array.isArray(value) ? value.join(',') : value).split(',')) {
    const d = part.trim();
    const eq = d.indexOf('=');
    const name = (eq === -1 ? d : d.slice(0, eq)).trim().toLowerCase();
    if (name === '') continue;
    if (name === 'public' || name === 's-maxage') {
      invited = true;
      continue;
    }
    if (name === 'must-revalidate') invited = true;
    // `private="field"` (RFC 9111 section 5.2.2.7) still lets a shared cache store the rest.
    if (name === 'private' && eq === -1) isPrivate = true;
    kept.push(d);
  }
  if (!invited) return value;
  return isPrivate ? kept.join(', ') : ['private', ...kept].join(', ');
}

/**
 * Two Vary field values as one (RFC 9110 section 12.5.5): Vary is a list, so the gateway's own
 * `Origin` (CORS) is added to what the upstream said instead of replacing it, which would let a
 * shared cache hand an answer negotiated on another field (Accept-Encoding, say) to every client.
 * Names compare case-insensitively and appear once, the first spelling kept; `*` (the answer
 * varies on more than request fields) absorbs every name.
 */
export function mergeVary(first: HeaderValue | number | undefined, second: HeaderValue | number | undefined): string {
  const names: string[] = [];
  const seen = new Set<string>();
  for (const value of [first, second]) {
    if (value === undefined) continue;
    for (const part of (Array.isArray(value) ? value.join(',') : String(value)).split(',')) {
      const name = part.trim();
      if (name === '') continue;
      if (name === '*') return '*';
      const lower = name.toLowerCase();
      if (seen.has(lower)) continue;
      seen.add(lower);
      names.push(name);
    }
  }
  return names.join(', ');
}

/**
 * The content coding of an upstream answer (RFC 9110 section 8.4), lower-case; undefined for none
 * or `identity`. Several codings (`gzip, br`) are returned as written.
 */
export function contentCoding(value: HeaderValue | number | undefined): string | undefined {
  if (value === undefined || typeof value === 'number') return undefined;
  const text = (Array.isArray(value) ? value.join(',') : value).trim().toLowerCase();
  return text === '' || text === 'identity' ? undefined : text;
}

/**
 * Whether the client's Accept-Encoding (RFC 9110 section 12.5.3) accepts `coding`: named, or `*`,
 * with a q above 0. No Accept-Encoding accepts nothing here: RFC 9110 would allow any coding, but
 * a client that did not ask (curl without --compressed, most API clients) shows the bytes as they
 * come, so the gateway only passes a coding a client asked for.
 */
export function acceptsCoding(accept: HeaderValue | undefined, coding: string): boolean {
  if (accept === undefined) return false;
  let star: boolean | undefined;
  for (const part of (Array.isArray(accept) ? accept.join(',') : accept).split(',')) {
    const [name = '', ...params] = part.split(';').map((x) => x.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    const ok = q === undefined || Number(q.slice(2)) > 0;
    if (name === coding) return ok;
    if (name === '*') star = ok;
  }
  return star === true;
}

/** More response header fields than any pet store answer needs: a flood is a 502, not forwarded. */
export const MAX_UPSTREAM_HEADERS = 100;

export function tooManyHeaders(headers: Record<string, unknown>): boolean {
  let n = 0;
  for (const _ in headers) if (++n > MAX_UPSTREAM_HEADERS) return true;
  return false;
}
