/**
 * Local references of an interface document (`$ref: '#/components/schemas/Pet'`): the pointer a
 * reference names, and the value it leads to, with a loop of references ending the walk.
 */

export type Json = Record<string, unknown>;

export const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `a~b/c` as one JSON Pointer token (RFC 6901). */
export const pointerToken = (s: string): string => s.replace(/~/g, '~0').replace(/\//g, '~1');

/** The value a local reference (`#/components/schemas/Pet`, `#`) names, or undefined. */
export function resolvePointer(document: unknown, ref: string): unknown {
  if (ref !== '#' && !ref.startsWith('#/')) return undefined;
  let node: unknown = document;
  const tokens = ref === '#' ? [] : ref.slice(2).split('/');
  for (const raw of tokens) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      return undefined;
    }
    if (Array.isArray(node) && /^(0|[1-9]\d*)$/.test(key)) node = node[Number(key)];
    else if (isObject(node) && Object.hasOwn(node, key)) node = node[key];
    else return undefined;
  }
  return node;
}

/** A value of a document and the JSON Pointer where it is written (`/components/schemas/Pet`). */
export interface Located {
  readonly value: unknown;
  readonly at: string;
}

/**
 * Follows `value`'s `$ref` (and the reference's own, and so on) to what it names. A reference to
 * another document, to nothing, or into a loop of references ends at undefined, where it was
 * written: the structure check reports those; a comparison sees no schema there.
 */
export function follow(document: unknown, value: unknown, at: string): Located {
  const seen = new Set<string>();
  let here: Located = { value, at };
  while (isObject(here.value) && typeof here.value.$ref === 'string') {
    const ref = here.value.$ref;
    if (seen.has(ref)) return { value: undefined, at: here.at };
    seen.add(ref);
    const target = resolvePointer(document, ref);
    if (target === undefined) return { value: undefined, at: here.at };
    here = { value: target, at: ref === '#' ? '' : ref.slice(1) };
  }
  return here;
}
