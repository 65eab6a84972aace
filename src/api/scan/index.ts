/**
 * Byte-level checks of JSON answers against an object shape of the interface (model.ts), compiled
 * once per shape and run in one pass over the bytes with no value built. The structure is checked
 * as JSON (RFC 8259), each field against its type, and the members outside the shape found by
 * their offsets. A conforming answer is then forwarded as the very bytes received; unknown fields
 * are dropped by copying the kept members' bytes, so every number, int64 beyond 2^53 included,
 * stays as the upstream wrote it.
 *
 *     const pets = compileShape(petShape, { filterField: 'status' });   // at load; throws on what it cannot check
 *     pets.scanBody(body, true, 'drop');                  // { problems: [] } or the problems, maybe a new body
 *     const page = pets.scanPage(body, 20, 'sold');       // the list cut to 20 items of status sold, checked on the way
 *     if (page.findings) pets.finish(page.findings, 'drop');  // the verdict scanBody would give, without a second read
 *     filterArray(body, 20, 'status', 'sold');            // the same cut, nothing checked
 *
 * The API:
 * - `compileShape(shape, { filterField? }): ShapeScanner`. Refuses (throws, naming the field) a
 *   type it does not implement, more than 30 fields, a required or filter field that is not a field
 *   (the filter field must be an enum), a name defined twice or both a field and forbidden.
 * - `ShapeScanner.scanBody(body, list, unknownFields): ShapeScan`: one answer, an object
 *   (`list` false) or an array of them; never throws.
 * - `ShapeScanner.scanPage(body, limit, filterValue): PageScan`: at most `limit` items, only those
 *   whose filter field is `filterValue` when given, each checked; `findings` when nothing was
 *   removed. Throws ScanError as filterArray does.
 * - `ShapeScanner.finish(findings, unknownFields): ShapeScan`: the verdict on a page from the
 *   findings of the same scanner's `scanPage`.
 * - `filterArray(body, limit, field, value): ArrayFilterResult`: the structural cut alone.
 * - `ScanError`; `LIST_CHECK`, the slot a contract check and a list cut share per request.
 *
 * What it accepts is what `parseLossless` followed by Ajv on the shape's JSON Schema accepts
 * (test/unit/api-scan.test.ts and api-scan-shapes.test.ts hold the two together): UTF-8 only (a byte that is not is refused,
 * never replaced), a repeated member name only with an equal value (lossless-json's rule),
 * `__proto__` an ordinary unknown field, `int64` and `int32` as integers written without fraction
 * or exponent within their bounds. One difference, on purpose: nesting deeper than 512 levels
 * inside an unknown field is refused, where a recursive parser would go on until its stack ends.
 * A forbidden field (`false` in the schema) present is a problem, `/<index>/<field> must not be
 * sent`, in every unknown-field mode.
 *
 * Scanners compiled from several shapes coexist: each call starts from its scanner's tables, and
 * the scratch state the calls share (json.ts, scan.ts) is reset at the start of each (the scans
 * never re-enter).
 */
import { slot } from '../../core/facts.js';
import type { ObjectShape } from '../model.js';
import { finish, scanBody, scanPage } from './check.js';
import type { ListFindings, PageScan, ShapeScan, UnknownFieldMode } from './scan.js';
import { CompiledShape } from './shape.js';

export { filterArray, ScanError, type ArrayFilterResult } from './json.js';
export type { ListFindings, PageScan, ShapeScan, UnknownFieldMode } from './scan.js';

export interface ShapeScanner {
  /** The shape it was compiled from. */
  readonly shape: ObjectShape;
  /** One answer: an object (list=false) or an array of them (list=true). */
  scanBody(body: Buffer, list: boolean, unknownFields: UnknownFieldMode): ShapeScan;
  /** A list cut to `limit` items, keeping only items whose filter field equals `filterValue` (when given), each checked on the way. */
  scanPage(body: Buffer, limit: number, filterValue: string | undefined): PageScan;
  /** The verdict on a page from its findings, as scanBody would give on `findings.body`. */
  finish(findings: ListFindings, unknownFields: UnknownFieldMode): ShapeScan;
}

class CompiledScanner implements ShapeScanner {
  private readonly tables: CompiledShape;

  constructor(
    readonly shape: ObjectShape,
    filterField: string | undefined,
  ) {
    this.tables = new CompiledShape(shape, filterField);
  }

  scanBody(body: Buffer, list: boolean, unknownFields: UnknownFieldMode): ShapeScan {
    return scanBody(this.tables, body, list, unknownFields);
  }

  scanPage(body: Buffer, limit: number, filterValue: string | undefined): PageScan {
    return scanPage(this.tables, body, limit, filterValue);
  }

  finish(findings: ListFindings, unknownFields: UnknownFieldMode): ShapeScan {
    return finish(this.tables, findings, unknownFields);
  }
}

/**
 * Compiles the checks of one shape, once (at load, never per request). `filterField`: the enum
 * field a list's filter reads (`scanPage`'s `filterValue`).
 */
export function compileShape(shape: ObjectShape, options: { readonly filterField?: string } = {}): ShapeScanner {
  return new CompiledScanner(shape, options.filterField);
}

/**
 * One slot, two steps: `'wanted'` on a list request, set by a policy that will check the answer
 * against the shape; then, by the policy that cuts the list, the findings of its pass
 * (`scanPage`), when that pass checked the list it passes on.
 */
export const LIST_CHECK = slot<'wanted' | ListFindings>('listCheck');
