/**
 * The kinds of change between two interface documents, and which of them break clients. One
 * table: a kind is breaking or not, or, for a schema, by the side of the exchange it is on. What a
 * client sends (a parameter, a request body) may not be tightened; what it receives (a response
 * body) may not be loosened: a bound raised on a request refuses requests that passed, a value
 * added to a response's enum reaches clients that do not know it. The verdict says why.
 */
import { toJsonPath } from '../core/json-path.js';

/** Not breaking (false), or breaking and why (a phrase a report shows in parentheses). */
export type Verdict = false | string;

/** Which side of the exchange a schema describes: what clients send, or what they receive. */
export type Side = 'request' | 'response';

const both = (request: Verdict, response: Verdict) => ({ request, response }) as const;

export const RULES = {
  // The document
  'base-path-changed': 'every client calls the old path',
  // Operations
  'operation-added': false,
  'operation-removed': 'clients that call it get an error',
  'deprecation-added': false,
  'deprecation-removed': false,
  'sunset-changed': false,
  'sunset-earlier': 'clients have less time to move',
  'successor-changed': false,
  'security-changed': 'clients may need other credentials',
  'list-limit-added': false,
  'list-limit-removed': 'the list is no longer cut to the parameter',
  'list-limit-changed': 'the list is cut to another parameter',
  'list-filter-added': false,
  'list-filter-removed': 'answers no longer match the filter',
  'list-filter-changed': 'answers match the filter on another field',
  // Parameters
  'parameter-added': false,
  'required-parameter-added': 'requests without it are refused',
  'parameter-removed': 'clients that send it lose its effect',
  'parameter-renamed': false,
  'parameter-required': 'requests without it are refused',
  'parameter-optional': false,
  // Bodies and answers
  'request-body-added': false,
  'required-request-body-added': 'requests without a body are refused',
  'request-body-removed': 'clients that send a body lose it',
  'request-body-required': 'requests without a body are refused',
  'request-body-optional': false,
  'media-type-added': false,
  'media-type-removed': 'clients that use it are refused',
  'response-added': false,
  'response-removed': false,
  'success-response-removed': 'clients that expect it get another status',
  'error-code-changed': 'clients that match on the code miss it',
  // Schemas, by side
  'bound-tightened': both('requests valid before may be refused', false),
  'bound-loosened': both(false, 'clients may receive values outside the former bounds'),
  'enum-value-removed': both('clients that send it are refused', false),
  'enum-value-added': both(false, 'clients may receive a value they do not know'),
  'default-added': both(false, false),
  'default-changed': both('clients that omit it get another value', false),
  'default-removed': both('clients that omit it no longer know what they get', false),
  'field-added': both(false, false),
  'required-field-added': both('requests without it are refused', false),
  'field-removed': both('requests that carry it may be refused as unknown', 'clients that read it no longer get it'),
  'field-required': both('requests without it are refused', false),
  'field-optional': both(false, 'clients may no longer get it'),
  'type-changed': both('values of the former type are refused', 'clients may receive another type'),
  'format-changed': both('values of the former format may be refused', 'clients may receive another format'),
  'schema-changed': both('not analysed, so taken as breaking', 'not analysed, so taken as breaking'),
} as const satisfies Record<string, Verdict | { readonly request: Verdict; readonly response: Verdict }>;

export type ChangeKind = keyof typeof RULES;
type SideKind = { [K in ChangeKind]: (typeof RULES)[K] extends Verdict ? never : K }[ChangeKind];
type PlainKind = Exclude<ChangeKind, SideKind>;

/** A difference between two interface documents. */
export interface Change {
  readonly kind: ChangeKind;
  /** Where, as a JSON path into the document that has it (the later one, or the earlier for what went). */
  readonly path: string;
  /** What changed, for whom, and, when breaking, why: one line. */
  readonly message: string;
  readonly breaking: boolean;
}

/** Collects changes as the comparison finds them; `at` is a JSON Pointer, shown as a JSON path. */
export class Changes {
  readonly list: Change[] = [];

  add(kind: PlainKind, at: string, message: string): void {
    this.push(kind, at, message, RULES[kind]);
  }

  addOnSide(kind: SideKind, side: Side, at: string, message: string): void {
    this.push(kind, at, message, RULES[kind][side]);
  }

  private push(kind: ChangeKind, at: string, message: string, verdict: Verdict): void {
    const breaking = verdict !== false;
    this.list.push({ kind, path: toJsonPath(at), message: breaking ? `${message} (${verdict})` : message, breaking });
  }
}
