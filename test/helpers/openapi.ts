/**
 * The shipped interface document for tests, and edits of a copy of it by key path, so a test can
 * break or change one place without typing the document as `any`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { PROJECT_ROOT } from './root.js';

export type Doc = Record<string, unknown>;
export type Key = string | number;

export const SHIPPED_DOCUMENT_PATH = join(PROJECT_ROOT, 'openapi', 'pet-store.yaml');

/** A fresh copy of openapi/pet-store.yaml, parsed. */
export function shippedDocument(): Doc {
  return parse(readFileSync(SHIPPED_DOCUMENT_PATH, 'utf8')) as Doc;
}

function holder(doc: unknown, keys: readonly Key[]): Record<Key, unknown> {
  let node = doc;
  for (const key of keys.slice(0, -1)) {
    if (typeof node !== 'object' || node === null) throw new Error(`no ${keys.join('.')} in the document (stops at ${String(key)})`);
    node = (node as Record<Key, unknown>)[key];
  }
  if (typeof node !== 'object' || node === null) throw new Error(`no ${keys.join('.')} in the document`);
  return node as Record<Key, unknown>;
}

/** The value at `keys` (`['paths', '/pets', 'get']`). */
export function getAt(doc: unknown, keys: readonly Key[]): unknown {
  return keys.length === 0 ? doc : holder(doc, keys)[keys[keys.length - 1]!];
}

/** Sets the value at `keys` (the holder must exist). */
export function setAt(doc: unknown, keys: readonly Key[], value: unknown): void {
  holder(doc, keys)[keys[keys.length - 1]!] = value;
}

/** Removes the property (or array item) at `keys`. */
export function deleteAt(doc: unknown, keys: readonly Key[]): void {
  const h = holder(doc, keys);
  const last = keys[keys.length - 1]!;
  if (Array.isArray(h) && typeof last === 'number') h.splice(last, 1);
  else delete h[last];
}
