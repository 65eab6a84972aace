/**
 * What of `next`'s answer breaks the interface, judged on the upstream's own answer (before the
 * response phase, which would hide it: a list cut to its limit, unknown fields dropped): a 1xx or
 * 3xx status, or a 2xx that is not the operation's success answer (its status, JSON, its shape,
 * every int64 exact). Unknown fields are not a violation here: the response contract decides
 * what they become, for either side alike. A rule is short and bounded: a status, a content type,
 * or a field path with list positions written `*` and the scanner's words.
 */
import { isJsonMediaType } from '../core/contract.js';
import type { HeaderValue } from '../core/policy.js';
import type { ApiOperation } from '../api/model.js';
import { scannerOf } from '../api/scanners.js';

/** The first rule `next`'s answer breaks, or undefined when it conforms (or could not be read whole). */
export function contractRule(op: ApiOperation, status: number, headers: Readonly<Record<string, HeaderValue>>, body: Buffer, truncated: boolean): string | undefined {
  if (status < 200 || (status >= 300 && status < 400)) return `status ${Math.floor(status / 100)}xx`;
  if (status >= 300) return undefined;
  const success = op.success;
  if (success === undefined) return undefined;
  if (status !== success.status) return `status ${status} where ${success.status}`;
  const type = headers['content-type'];
  if (!isJsonMediaType(typeof type === 'string' ? type : undefined)) return 'content-type';
  if (truncated) return undefined;
  const scanner = scannerOf(op);
  if (scanner === undefined) return undefined;
  const problem = scanner.scanBody(body, success.list, 'pass').problems[0];
  return problem === undefined ? undefined : problem.replace(/\/\d+(?=\/|\s|$)/g, '/*').slice(0, 120);
}
