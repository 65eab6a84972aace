/**
 * A finished answer a wrapper of `send` may hand the exchange to write as it is (`onStored`): its
 * status, its client fields and its final body bytes, and how a written copy's field list is made
 * ahead. The response cache (src/policies/cache) keeps them; the exchange writes them.
 */
import type { HeaderValue } from '../policy.js';

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
