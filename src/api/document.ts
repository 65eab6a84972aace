/**
 * Reading an interface document: YAML or JSON from a file, its local `$ref`s resolved, and the
 * JSON paths its problems are named by. A `$ref` outside the document, or one that leads back to
 * itself, is a problem at load, never a loop.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import type { Problem } from '../core/policy.js';

/**
 * The shipped document: the pet store interface (docs/interface.md), openapi/pet-store.yaml at the
 * package's root. Found from this module: two folders up from src/api (run through tsx) and
 * dist/api (the package), three from .test-build/src/api (the compiled tests).
 */
export const SHIPPED_DOCUMENT = ((): string => {
  const candidates = ['../../openapi/pet-store.yaml', '../../../openapi/pet-store.yaml'].map((p) => fileURLToPath(new URL(p, import.meta.url)));
  return candidates.find((p) => existsSync(p)) ?? candidates[0]!;
})();

/** The shipped document, parsed (a fresh copy each call: callers may keep or change it). */
export function readShippedDocument(): Record<string, unknown> {
  return readDocument(SHIPPED_DOCUMENT) as Record<string, unknown>;
}

/** Reads a document (YAML, JSON being YAML); throws with a plain message when it cannot. */
export function readDocument(path: string): unknown {
  const text = readFileSync(path, 'utf8');
  return parse(text, { maxAliasCount: 100 }) as unknown;
}

const NAME = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** `$.paths['/pets'].get`: a JSON path from its keys, as problems name them. */
export function pathOf(keys: readonly (string | number)[]): string {
  let out = '$';
  for (const k of keys) out += typeof k === 'number' ? `[${k}]` : NAME.test(k) ? `.${k}` : `['${k.replace(/'/g, "\\'")}']`;
  return out;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * A node with its `$ref` followed (local refs only, `#/...`), and the keys of where it really is.
 * Problems go to `problems`; undefined when the ref cannot be followed.
 */
export function deref(doc: unknown, node: unknown, at: readonly (string | number)[], problems: Problem[]): { node: unknown; at: readonly (string | number)[] } | undefined {
  const seen = new Set<string>();
  let where = at;
  while (isObject(node) && typeof node.$ref === 'string') {
    const ref = node.$ref;
    if (!ref.startsWith('#/')) {
      problems.push({ path: pathOf([...where, '$ref']), message: `only local references (#/...) are supported, not '${ref.slice(0, 80)}'` });
      return undefined;
    }
    if (seen.has(ref)) {
      problems.push({ path: pathOf([...where, '$ref']), message: `'${ref}' refers back to itself` });
      return undefined;
    }
    seen.add(ref);
    const keys = ref.slice(2).split('/').map((k) => decodeURIComponent(k).replace(/~1/g, '/').replace(/~0/g, '~'));
    let target: unknown = doc;
    for (const k of keys) target = isObject(target) ? target[k] : undefined;
    if (target === undefined) {
      problems.push({ path: pathOf([...where, '$ref']), message: `'${ref}' does not exist in the document` });
      return undefined;
    }
    if (Object.keys(node).some((k) => k !== '$ref' && k !== 'description' && k !== 'summary')) {
      problems.push({ path: pathOf(where), message: 'a $ref with sibling keywords is not supported' });
      return undefined;
    }
    node = target;
    where = keys;
  }
  return { node, at: where };
}
