/**
 * The structural cut of a list, now `filterArray` of src/api/scan (one scanner for every shape):
 * kept here, under its old signature, until its last importer moves to src/api/scan.
 */
import { filterArray as cut, ScanError, type ArrayFilterResult } from '../api/scan/index.js';

export { ScanError, type ArrayFilterResult };

/** At most `limit` elements, and only objects whose one `status` member is `status` when given. */
export function filterArray(buf: Buffer, limit: number, status: string | undefined): ArrayFilterResult {
  return cut(buf, limit, 'status', status);
}
