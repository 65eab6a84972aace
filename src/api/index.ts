/**
 * The interface as data: an OpenAPI 3.1 document (openapi/pet-store.yaml by default, or the
 * policy file's `interface:`) read, checked and compiled once into the operations the gateway
 * enforces (docs/interface-document.md).
 */
import type { Interface } from '../core/operations.js';
import { compileDocument, type CompileResult } from './compile.js';
import { readDocument, SHIPPED_DOCUMENT } from './document.js';
import type { Api } from './model.js';

export type { Api, ApiOperation, Field, FieldType, ObjectShape, QueryParam, SuccessAnswer } from './model.js';
export { compileDocument, type CompileResult } from './compile.js';
export { readDocument, SHIPPED_DOCUMENT } from './document.js';

/** Reads and compiles a document; a file that cannot be read or parsed is one problem at `$`. */
export function loadInterface(path: string): CompileResult {
  let doc: unknown;
  try {
    doc = readDocument(path);
  } catch (err) {
    return { ok: false, problems: [{ path: '$', message: `cannot read the interface document: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}` }] };
  }
  return compileDocument(doc, path === SHIPPED_DOCUMENT ? 'shipped' : path);
}

let shipped: Api | undefined;

/** The shipped pet store interface, compiled once per process. */
export function shippedApi(): Api {
  if (shipped !== undefined) return shipped;
  const r = loadInterface(SHIPPED_DOCUMENT);
  if (!r.ok) throw new Error(`the shipped interface document is invalid: ${r.problems.map((p) => `${p.path} ${p.message}`).join('; ')}`);
  return (shipped = r.api);
}

/** The interface a policy enforces: its environment's, else the shipped one (a policy made in code). */
export function apiOf(env: { readonly api?: Interface | undefined }): Api {
  return (env.api as Api | undefined) ?? shippedApi();
}
