/**
 * The shipped interface document, openapi/pet-store.yaml at the package's root: the default of a
 * policy's `interface:`, and what `check` compares an operator's document with.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

/**
 * Found from this module: two folders up from src/api (run through tsx) and dist/api (the
 * package), three from .test-build/src/api (the compiled tests).
 */
export function shippedDocumentPath(): string {
  const candidates = ['../../openapi/pet-store.yaml', '../../../openapi/pet-store.yaml'].map((p) => fileURLToPath(new URL(p, import.meta.url)));
  return candidates.find((p) => existsSync(p)) ?? candidates[0]!;
}

/** The shipped document, parsed (a fresh copy each call: callers may keep or change it). */
export function readShippedDocument(): object {
  return parse(readFileSync(shippedDocumentPath(), 'utf8')) as object;
}
