/**
 * The byte scanner of each operation's 2xx answer, compiled once per operation (at policy
 * creation, never per request) and shared: `list-pets` cuts a list with it and hands its findings
 * to `response-contract`, which finishes them with the same scanner.
 */
import { compileShape, type ShapeScanner } from './scan/index.js';
import type { ApiOperation } from './model.js';

const scanners = new WeakMap<ApiOperation, ShapeScanner | null>();

/** The scanner of `op`'s 2xx body (its list filter's field included); undefined when it has no 2xx body. */
export function scannerOf(op: ApiOperation): ShapeScanner | undefined {
  let s = scanners.get(op);
  if (s === undefined) {
    s = op.success === undefined ? null : compileShape(op.success.shape, op.listFilter === undefined ? {} : { filterField: op.listFilter.field });
    scanners.set(op, s);
  }
  return s ?? undefined;
}
