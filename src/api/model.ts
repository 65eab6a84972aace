/**
 * What an interface document (openapi/pet-store.yaml, or the operator's `interface:`) compiles to:
 * the operations with the facts each check needs, read once at load. Nothing here is interpreted
 * per request: the policies build their checks from these values when they are created.
 */
import type { Interface, Operation, Router } from '../core/operations.js';

/** The type of a field or parameter the compiled checks support (others are refused at load). */
export type FieldType =
  /** `type: integer, format: int64`: checked on the JSON text, exact beyond 2^53. */
  | { readonly kind: 'int64' }
  /** `type: integer, format: int32`. */
  | { readonly kind: 'int32' }
  | { readonly kind: 'string' }
  /** `type: string, enum: [...]` (a `$ref` to such a schema included). */
  | { readonly kind: 'enum'; readonly values: readonly string[] };

export interface Field {
  readonly name: string;
  readonly type: FieldType;
}

/**
 * A flat JSON object schema (`type: object`, `properties`, `required`): the only body shape the
 * compiled checks support. `forbidden` lists properties written as `false` (NewPet's `id`).
 */
export interface ObjectShape {
  /** The schema's name under components.schemas, when it was a `$ref` (for messages). */
  readonly name: string;
  readonly fields: readonly Field[];
  readonly required: readonly string[];
  readonly forbidden: readonly string[];
}

export type QueryParam =
  | { readonly name: string; readonly kind: 'integer'; readonly min: number; readonly max: number; readonly default: number | undefined; readonly required: boolean }
  | { readonly name: string; readonly kind: 'enum'; readonly values: readonly string[]; readonly required: boolean };

/** The successful answer an operation gives: one status, a JSON object or a JSON array of them. */
export interface SuccessAnswer {
  readonly status: number;
  readonly list: boolean;
  readonly shape: ObjectShape;
}

/** An operation of the document, compiled. `Operation` is the core's view of it. */
export interface ApiOperation extends Operation {
  /** Position in `Api.operations`: policies keep per-operation tables indexed by it. */
  readonly index: number;
  /** The path below the base address, as the document writes it: `/pets/{petId}`. */
  readonly path: string;
  /** The one path parameter's type, when the path has one. */
  readonly pathParam: Field | undefined;
  /** The query parameters the operation defines, in the document's order; empty when none. */
  readonly query: readonly QueryParam[];
  /** `x-list-limit`: the query parameter whose value caps the length of the 2xx list. */
  readonly listLimit: string | undefined;
  /** `x-list-filter`: a query parameter whose value each item's field must equal. */
  readonly listFilter: { readonly param: string; readonly field: string } | undefined;
  /** The JSON request body, when the operation has one. */
  readonly body: ObjectShape | undefined;
  readonly success: SuccessAnswer | undefined;
  /** Every status the document lists for the operation. */
  readonly statuses: readonly number[];
  /** `x-error-code` of a response: the gateway's code for that status on this operation. */
  readonly errorCodes: Readonly<Partial<Record<number, string>>>;
  /**
   * `deprecated: true`, with `x-sunset` (RFC 3339), `x-successor` (a URI reference) and
   * `x-successor-description` (what to use instead, in words, for the 410's message).
   */
  readonly deprecation: { readonly sunset: string | undefined; readonly successor: string | undefined; readonly advice: string | undefined } | undefined;
}

/** A compiled interface document: the core's `Interface` and what the policies read. */
export interface Api extends Interface {
  readonly router: Router;
  readonly title: string;
  readonly version: string;
  /** The path prefix of the base address (`servers[0].url`): `/v1`. */
  readonly basePath: string;
  readonly operations: readonly ApiOperation[];
  /** The document as read (JSON-compatible), for `/openapi.json` and `check`'s report. */
  readonly document: unknown;
  /** Where it was read from (a path), or 'shipped'. */
  readonly source: string;
}
