/**
 * A finished answer a wrapper of `send` may hand the exchange to write as it is (`onFinished`):
 * its status, its client fields that do not depend on the request and its final body bytes, and
 * how a written copy's field list is made ahead. A wrapper that keeps answers extends it with what
 * it needs (outside the core); the exchange writes it.
 */
import type { HeaderValue } from '../policy.js';

/** One finished answer, as the client gets it but for the request's own fields and the wrapper's trailing ones. */
export interface FinishedAnswer {
  readonly status: number;
  /** The client fields that do not depend on the request, Content-Length included; none of the wrapper's trailing fields. */
  readonly headers: Readonly<Record<string, string | string[]>>;
  /** The body after the response phase: the bytes the client gets. */
  readonly body: Buffer;
  /**
   * The same bytes as a latin1 string, for a body of at most `ONE_WRITE_MAX` bytes kept in this
   * process: node joins a string with the response head, so the answer leaves in one write without
   * copying the body into a new string each time.
   */
  readonly text?: string;
  /**
   * The same fields as `headers`, as one flat list of names and values (`[name, value, ...]`), for
   * an answer kept in this process: each write hands node this list, plus the request's fields, and
   * node writes a list without the per-field own-property checks and varied property lookups of
   * an object. Absent when there is a `plan`, whose list begins with the same fields.
   */
  readonly fields?: readonly (string | string[])[];
  /**
   * How a written copy's list is made, for an answer kept in this process: the fields above with a
   * place for each of the exchange's own fields and for the wrapper's trailing fields. Made when
   * the answer is kept, from the own fields of the request it was made for: the requests of one
   * route and consumer set the same field names, so a write copies the list and fills in values only.
   */
  readonly plan?: FieldPlan;
}

/** An answer's fields as node's writeHead takes a list: `[name, value, name, value, ...]`. */
export function flatFields(headers: Readonly<Record<string, string | string[]>>): (string | string[])[] {
  const fields: (string | string[])[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined) fields.push(name, value);
  }
  // A copy of its exact length: the list lives as long as its answer, and push leaves spare slots.
  return fields.slice();
}

/**
 * A written copy's field list made ahead: `fields` holds the answer's fields (the first `stored`
 * items), then a pair for each own field that is not among them, then one pair for each trailing
 * field of the wrapper, with the values that change per request left empty. `names` are the own
 * field names it was made for, in the order the exchange's fields enumerate, and `at` where each
 * one's value goes; the trailing values go in the last pairs, in the wrapper's order.
 */
export interface FieldPlan {
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

/**
 * The plan of a written copy's list for the answer's `fields`, the own fields named in `own`
 * (those with a value) and the wrapper's `trailing` field names.
 */
export function fieldPlan(fields: readonly (string | string[])[], own: Readonly<Record<string, HeaderValue>>, trailing: readonly string[]): FieldPlan {
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
  for (const name of trailing) out.push(name, '');
  // Copies of their exact length: they live as long as their answer, and push leaves spare slots.
  return { fields: out.slice(), stored: fields.length, names: names.slice(), at: at.slice() };
}
