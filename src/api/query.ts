/**
 * The query check of an operation, compiled from its parameters (the document's bounds, defaults
 * and enums): each parameter at most once, integers compared exactly (BigInt: '99999999999999999999'
 * is out of range, not a rounding artefact), and the query the upstream receives rebuilt from the
 * validated values only, in the document's order. No client text reaches the upstream query.
 */
import type { QueryParam } from './model.js';

export interface QueryValues {
  /** Each parameter's value as applied (the default when absent), in the document's order. */
  readonly values: readonly (number | string | undefined)[];
  /** The upstream query (without '?'). */
  readonly upstream: string;
}

const INTEGER = /^[+-]?[0-9]+$/;

/** Compiles the check; `clamp`: an integer outside its bounds is brought to the nearest one instead. */
export function compileQuery(params: readonly QueryParam[], clamp: boolean): (rawQuery: string) => QueryValues | { readonly error: string } {
  // Each name and enum value as the upstream query writes it, encoded once here ('page[size]' -> 'page%5Bsize%5D').
  const keys = params.map((p) => encodeURIComponent(p.name) + '=');
  const encoded = params.map((p) => (p.kind === 'enum' ? new Map(p.values.map((v) => [v, encodeURIComponent(v)])) : undefined));
  const check = (search: URLSearchParams | undefined): QueryValues | { readonly error: string } => {
    const values: (number | string | undefined)[] = [];
    let upstream = '';
    for (let i = 0; i < params.length; i++) {
      const p = params[i]!;
      const given = search === undefined ? [] : search.getAll(p.name);
      if (given.length > 1) return { error: `${p.name} may be given once` };
      const text = given[0];
      let value: number | string | undefined;
      let written: string | undefined;
      if (text === undefined) {
        if (p.required) return { error: `${p.name} is required` };
        value = p.kind === 'integer' ? p.default : undefined;
        written = value === undefined ? undefined : String(value);
      } else if (p.kind === 'integer') {
        if (!INTEGER.test(text)) return { error: `${p.name} must be an integer from ${p.min} to ${p.max}` };
        const n = BigInt(text);
        if (n < p.min && !clamp) return { error: `${p.name} must be at least ${p.min}` };
        if (n > p.max && !clamp) return { error: `${p.name} must be at most ${p.max}` };
        value = n < p.min ? p.min : n > p.max ? p.max : Number(n);
        written = String(value);
      } else {
        written = encoded[i]!.get(text);
        if (written === undefined) return { error: `${p.name} must be one of ${p.values.join(', ')}` };
        value = text;
      }
      values.push(value);
      if (written !== undefined) upstream += (upstream === '' ? '' : '&') + keys[i]! + written;
    }
    return { values, upstream };
  };
  // A request without a query gets the defaults: computed once.
  const none = check(undefined);
  return (rawQuery) => (rawQuery === '' ? none : check(new URLSearchParams(rawQuery)));
}

/** The names of a query's parameters that the operation does not define (each once). */
export function unknownParams(params: readonly QueryParam[], rawQuery: string): string | undefined {
  for (const name of new URLSearchParams(rawQuery).keys()) if (!params.some((p) => p.name === name)) return name;
  return undefined;
}
