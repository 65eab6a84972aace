/**
 * One source per schema: every options type is derived from its JSON Schema by `SchemaType`
 * (src/core/options.ts), and the `policies:` section's type from the module list
 * (src/policies/index.ts), so no type can drift from its schema. What remains to check, at COMPILE
 * time (`npx tsc -p tsconfig.test.json`, part of `npm test`; the tap run only proves the file loads),
 * is the derivation itself: `SchemaType` reads every schema of the policy file as json-schema-to-ts's
 * `FromSchema` does (a reference implementation, with its `keepDefaultedPropertiesOptional` false:
 * a property with a `default` is required, as after Ajv's `useDefaults`); both sides normalised to
 * deep-readonly and compared for IDENTITY, not mutual assignability (which would miss `{a}` against
 * `{a; b?}`). The server section, composed from two folders' schemas, is checked the same way.
 *
 * What neither derivation can say: `pattern` / `propertyNames.pattern` / `minLength` / ranges (a
 * string stays `string`, a number `number`); Ajv checks them.
 */
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import t from 'tap';
import type { SchemaType } from '../../src/core/options.js';
import type { ADMIN_SCHEMA } from '../../src/ops/admin.js';
import type { LOG_SCHEMA } from '../../src/ops/access-log.js';
import type { HEADERS_SCHEMA, SERVER_ADMIN_SCHEMA, SERVER_SCHEMA, UPSTREAM_SCHEMA } from '../../src/config/schema.js';
import type { ListenerConfig, ServerConfig } from '../../src/config/types.js';
import type { LISTENER_SCHEMA } from '../../src/fronts/config.js';
import type { schema as authSchema } from '../../src/policies/auth/schema.js';
import type { schema as cacheSchema } from '../../src/policies/cache/schema.js';
import type { schema as corsSchema } from '../../src/policies/cors/schema.js';
import type { schema as deprecationSchema } from '../../src/policies/deprecation/schema.js';
import type { schema as listPetsSchema, ListPetsConfig } from '../../src/policies/list-pets/schema.js';
import type { schema as newPetSchema, NewPetConfig } from '../../src/policies/new-pet/schema.js';
import type { schema as rateLimitSchema } from '../../src/policies/rate-limit/schema.js';
import type { schema as responseContractSchema } from '../../src/policies/response-contract/index.js';
import type { schema as routeSchema } from '../../src/policies/route/index.js';
import type { schema as upstreamErrorsSchema } from '../../src/policies/upstream-errors/schema.js';

type DeepReadonly<T> = T extends (...args: never[]) => unknown
  ? T
  : T extends readonly (infer U)[]
    ? ReadonlyArray<DeepReadonly<U>>
    : T extends object
      ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
      : T;

/** True only when A and B are the same type (TypeScript's own identity relation, via generic functions). */
type Identical<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** The interface and the schema's type, after defaults, agree. */
type Agree<I, S> = Identical<DeepReadonly<I>, DeepReadonly<S>>;
type Schema<S extends JSONSchema> = FromSchema<S>;
type Own<S> = SchemaType<S>;

/** Compiles only when given `true`; on a mismatch tsc names the pair in the error. */
function agree<_T extends true>(): void {}

// Each policy's derived type is what the reference reads in its schema.
agree<Agree<Own<typeof authSchema>, Schema<typeof authSchema>>>();
agree<Agree<Own<typeof cacheSchema>, Schema<typeof cacheSchema>>>();
agree<Agree<Own<typeof corsSchema>, Schema<typeof corsSchema>>>();
agree<Agree<Own<typeof deprecationSchema>, Schema<typeof deprecationSchema>>>();
agree<Agree<Own<typeof listPetsSchema>, Schema<typeof listPetsSchema>>>();
agree<Agree<Own<typeof newPetSchema>, Schema<typeof newPetSchema>>>();
agree<Agree<Own<typeof rateLimitSchema>, Schema<typeof rateLimitSchema>>>();
agree<Agree<Own<typeof responseContractSchema>, Schema<typeof responseContractSchema>>>();
agree<Agree<Own<typeof upstreamErrorsSchema>, Schema<typeof upstreamErrorsSchema>>>();
// route has no options. FromSchema renders "an object with no properties" as `{}`, which TypeScript
// reads as "any non-null value"; SchemaType makes it `Record<string, never>` (no property can hold
// a value). What can be asserted: the schema admits no property, and the derived type fits it.
agree<Identical<keyof Schema<typeof routeSchema>, never>>();
agree<Identical<Own<typeof routeSchema>, Record<string, never>>>();
agree<Own<typeof routeSchema> extends Schema<typeof routeSchema> ? true : false>();

// The sections upstream, log and headers are derived from their schemas too.
agree<Agree<Own<typeof UPSTREAM_SCHEMA>, Schema<typeof UPSTREAM_SCHEMA>>>();
agree<Agree<Own<typeof LOG_SCHEMA>, Schema<typeof LOG_SCHEMA>>>();
agree<Agree<Own<typeof HEADERS_SCHEMA>, Schema<typeof HEADERS_SCHEMA>>>();
// server is derived too: the listener's part (src/fronts/config.ts) and the whole section, composed
// in src/config/schema.ts with the admin listener's part from src/ops.
agree<Agree<Own<typeof LISTENER_SCHEMA>, Schema<typeof LISTENER_SCHEMA>>>();
agree<Agree<ServerConfig, Schema<typeof SERVER_SCHEMA>>>();
// server.admin adds the key admin API's tokensFromEnv, tokensFile, bruteForce, its TLS and what readiness follows to the listener's own options.
agree<Agree<ServerConfig['admin'], Schema<typeof SERVER_ADMIN_SCHEMA>>>();
agree<Agree<Omit<NonNullable<ServerConfig['admin']>, 'tokensFromEnv' | 'tokensFile' | 'bruteForce' | 'tls' | 'readiness'> | null, Schema<typeof ADMIN_SCHEMA>>>();
// The whole section is the listener's options plus admin, nothing more or less.
agree<Identical<Omit<ServerConfig, 'admin'>, ListenerConfig>>();

// The checks can fail: a type that differs from its schema's is rejected (an extra optional field,
// a defaulted field made optional, a wider enum, a required field made optional).
type Not<B extends boolean> = B extends true ? false : true;
agree<Not<Agree<ListPetsConfig & { readonly extra?: string }, Schema<typeof listPetsSchema>>>>();
agree<Not<Agree<Omit<NewPetConfig, 'maxBytes'> & { readonly maxBytes?: number }, Schema<typeof newPetSchema>>>>();
agree<Not<Agree<{ readonly mode: 'off' | 'monitor' | 'enforce' | 'strict' }, Schema<typeof responseContractSchema>>>>();
agree<Not<Identical<Omit<NewPetConfig, 'maxBytes'> & { readonly maxBytes?: number }, Own<typeof newPetSchema>>>>();
agree<Not<Identical<{ readonly mode: 'off' | 'monitor' | 'enforce' | 'strict' }, Own<typeof responseContractSchema>>>>();
// SchemaType itself, on small schemas: required vs defaulted vs optional, null in a type list,
// oneOf, additionalProperties as a record, items.
const _probe = {
  type: 'object',
  required: ['a'],
  properties: {
    a: { type: 'string' },
    b: { type: 'integer', default: 1 },
    c: { type: ['string', 'null'] },
    d: { oneOf: [{ type: 'string', enum: ['x'] }, { type: 'object', required: ['y'], properties: { y: { type: 'boolean' } } }] },
    e: { type: 'object', additionalProperties: { type: 'number' } },
    f: { type: 'array', items: { const: 'z' } },
  },
} as const;
agree<
  Identical<
    Own<typeof _probe>,
    {
      readonly a: string;
      readonly b: number;
      readonly c?: string | null;
      readonly d?: 'x' | { readonly y: boolean };
      readonly e?: Readonly<Record<string, number>>;
      readonly f?: ReadonlyArray<'z'>;
    }
  >
>();

t.pass('compiled: every options type is its schema\'s (checked by tsc -p tsconfig.test.json)');
