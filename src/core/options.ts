/**
 * The TypeScript type of a policy's options, derived from its JSON Schema (declared `as const`), so
 * the schema is the one source: what Ajv validates and fills defaults into is what the code reads.
 * A property is required when the schema lists it in `required` or gives it a `default` (the loader
 * validates with `useDefaults`, so a defaulted property is always there). Everything is readonly:
 * the loaded config is frozen.
 *
 * It covers the keywords our schemas use for shapes (`type`, including a list of types, `enum`,
 * `const`, `oneOf`, `anyOf`, `properties`, `required`, `default`, `items`, `additionalProperties`).
 * What only narrows a value (`pattern`, `minimum`, `minLength`, `propertyNames`) does not change
 * the type: Ajv checks it. Ours rather than json-schema-to-ts's `FromSchema` so that the published
 * declarations need no extra package and tsc stays fast.
 */

/** The type of the values a JSON Schema `S` accepts, after defaults. */
export type SchemaType<S> = S extends { readonly oneOf: readonly (infer U)[] }
  ? SchemaType<U>
  : S extends { readonly anyOf: readonly (infer U)[] }
    ? SchemaType<U>
    : S extends { readonly const: infer C }
      ? C
      : S extends { readonly enum: readonly (infer E)[] }
        ? E
        : S extends { readonly type: readonly (infer T)[] }
          ? OfType<T, S>
          : S extends { readonly type: infer T }
            ? OfType<T, S>
            : unknown;

type OfType<T, S> = T extends 'null'
  ? null
  : T extends 'string'
    ? string
    : T extends 'integer' | 'number'
      ? number
      : T extends 'boolean'
        ? boolean
        : T extends 'array'
          ? ReadonlyArray<S extends { readonly items: infer I } ? SchemaType<I> : unknown>
          : T extends 'object'
            ? ObjectType<S>
            : never;

/** The keys of an object schema a value always has: listed in `required`, or given a `default`. */
type RequiredKeys<S, P> =
  | (S extends { readonly required: readonly (infer R)[] } ? R & keyof P : never)
  | { [K in keyof P]: P[K] extends { readonly default: unknown } ? K : never }[keyof P];

/** An intersection written out as one object type, so that two equal shapes are the same type. */
type Flat<T> = { [K in keyof T]: T[K] };

type Properties<P, R extends keyof P> = Flat<{ readonly [K in R]: SchemaType<P[K]> } & { readonly [K in Exclude<keyof P, R>]?: SchemaType<P[K]> }>;

type ObjectType<S> = S extends { readonly properties: infer P }
  ? [keyof P] extends [never]
    ? // No property allowed: `{}` would read as "any value but null".
      Record<string, never>
    : Properties<P, RequiredKeys<S, P>>
  : S extends { readonly additionalProperties: infer A }
    ? A extends false
      ? Record<string, never>
      : Readonly<Record<string, SchemaType<A>>>
    : Readonly<Record<string, unknown>>;
